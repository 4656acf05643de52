package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// nativeLib is the shipped library (rego/lib, package toolgate.lib)
// evaluated in Go. The Rego stays the definition: `opa test`, `toolgate
// policy eval` and policies that read data.toolgate.lib.* all use it, and
// TestNativeMatchesRego proves on generated tables and calls that both forms
// decide alike. The Go form exists for speed: it is the rules table that
// every call consults, and OPA visits every glob row and recompiles globs
// once a table holds more than its cache of 100 patterns, so the Rego form
// costs grow with the table while this one looks up the tool's rows in a
// map and runs precompiled matchers.
type nativeLib struct {
	byTool map[string][]*nativeRow // rows by exact tool name
	// Rows whose tool is "*" or a glob, by the literal prefix of the
	// pattern ("" for "*" and for globs that open with a wildcard). A call
	// visits only the groups whose prefix its tool name starts with, one
	// map lookup per distinct prefix length, so a table of many globs
	// ("github.*", "jira.*", ...) costs what a table of a few does.
	byPrefix   map[string][]*nativeRow
	prefixLens []int // distinct prefix lengths, ascending
}

// nativeRow is one table row with its matchers compiled and its reason
// built once.
type nativeRow struct {
	Rule
	tool, target globMatcher // nil when the field is not a glob (globre.go)
	reason       Reason
}

// newNativeLib compiles the rules table. The globs were checked by
// ParseRules; compiling them here with the delimiters the library gives
// glob.match (none for tools, "/" for targets) makes them match exactly as
// OPA's glob.match does (compileMatcher: the same glob package, or the
// regular expression the library is served for a glob that backtracks).
func newNativeLib(rules []Rule) (*nativeLib, error) {
	n := &nativeLib{byTool: make(map[string][]*nativeRow), byPrefix: make(map[string][]*nativeRow)}
	for _, r := range rules {
		row := &nativeRow{Rule: r}
		var err error
		if isGlob(r.Tool) {
			if row.tool, err = compileMatcher(r.Tool); err != nil {
				return nil, fmt.Errorf("rules table %s: tool: %w", r.ID, err)
			}
		}
		if isGlob(r.Target) {
			if row.target, err = compileMatcher(TargetPattern(r.Target), '/'); err != nil {
				return nil, fmt.Errorf("rules table %s: target: %w", r.ID, err)
			}
		}
		msg := r.Message
		if msg == "" {
			msg = fmt.Sprintf("rules table %s: %s %s on %s", r.ID, r.Effect, r.Tool, r.Target)
		}
		row.reason = Reason{ID: r.ID, Message: msg, MustAsk: r.Effect == "ask" && r.MustAsk}
		if r.Effect == "ask" {
			row.reason.Approvers = r.Approvers
		}
		if r.Tool == "*" || row.tool != nil {
			p := literalPrefix(r.Tool)
			if _, seen := n.byPrefix[p]; !seen {
				n.prefixLens = append(n.prefixLens, len(p))
			}
			n.byPrefix[p] = append(n.byPrefix[p], row)
		} else {
			n.byTool[r.Tool] = append(n.byTool[r.Tool], row)
		}
	}
	slices.Sort(n.prefixLens)
	n.prefixLens = slices.Compact(n.prefixLens)
	return n, nil
}

// literalPrefix is the part of a glob before its first special character;
// every name the glob matches starts with it.
func literalPrefix(pattern string) string {
	if i := strings.IndexAny(pattern, `*?[{\`); i >= 0 {
		return pattern[:i]
	}
	return pattern
}

// libVerdicts is what the library's four rules produce for one call.
type libVerdicts struct {
	deny, ask, allow verdict
	readOnly         bool
}

// decide evaluates the library's rules for in, as rego/lib/toolgate.rego
// states them. Reasons come sorted by ID, as the Rego form's reasons are
// sorted after evaluation, so a decision reads the same either way.
func (n *nativeLib) decide(in *Input) libVerdicts {
	var v libVerdicts
	list := in.listing()
	asks := !list || in.Mode != ModeDontAsk // listed_without_asks in the library
	if t := in.Tool; t != nil {
		n.match(n.byTool[t.Name], t, list, asks, &v)
		for _, l := range n.prefixLens {
			if l > len(t.Name) {
				break
			}
			n.match(n.byPrefix[t.Name[:l]], t, list, asks, &v)
		}
		if !list && escaping(t) {
			v.deny.add(Reason{ID: "toolgate.target_escapes", Message: "a target climbs above its root"}) // not quoted: see the library
		}
		if in.Kind == KindMCP && t.Annotations["readOnlyHint"] == true {
			v.readOnly = true
		}
	} else if in.Kind == KindMCP {
		method := ""
		if in.MCP != nil {
			method = in.MCP.Method
		}
		if method == "subscriptions/listen" && subscribesResources(in.MCP.Params) {
			v.deny.add(Reason{ID: "toolgate.mcp_subscribe", Message: "MCP resource subscriptions are not let through: subscriptions/listen with notifications.resourceSubscriptions, as resources/subscribe"})
		}
		if method == "" || mcpMethods[method] {
			v.allow.add(Reason{ID: "toolgate.mcp_plumbing", Message: "MCP protocol message"})
			v.readOnly = true // plumbing moves no tool: plan mode lets it through
		} else {
			v.deny.add(Reason{ID: "toolgate.mcp_method", Message: fmt.Sprintf("MCP method %q is not one of the protocol's methods that toolgate lets through", method)})
		}
	}
	for _, vd := range []*verdict{&v.deny, &v.ask, &v.allow} {
		if len(vd.reasons) > 1 {
			vd.sortByID()
		}
	}
	return v
}

// subscribesResources reports whether the params of a subscriptions/listen
// ask for notifications/resources/updated: a resourceSubscriptions member
// in notifications that is neither null nor an empty array, as the
// library's toolgate.mcp_subscribe reads it. The proxy's params are JSON's
// own values; an input built in Go may hold others (a []string, a pointer
// to a map, a json.RawMessage), read as OPA reads them: through JSON.
func subscribesResources(params map[string]any) bool {
	notifications, ok := asJSON(params["notifications"])
	if !ok {
		return true // OPA could not read the input either: deny
	}
	n, isObject := notifications.(map[string]any)
	if !isObject {
		return false
	}
	subs, ok := asJSON(n["resourceSubscriptions"])
	if !ok {
		return true
	}
	a, isArray := subs.([]any)
	return subs != nil && (!isArray || len(a) > 0)
}

// asJSON is v as encoding/json would decode it: v itself when it is one
// of JSON's own values, else v encoded and decoded again. ok is false when
// v has no JSON form.
func asJSON(v any) (any, bool) {
	switch v.(type) {
	case nil, bool, float64, string, []any, map[string]any:
		return v, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, false
	}
	return out, true
}

// match applies the rows that can concern t's tool. asks is false when a
// listed tool's ask rows are read as deny rows (mode dont_ask).
func (n *nativeLib) match(rows []*nativeRow, t *Tool, list, asks bool, v *libVerdicts) {
	for _, r := range rows {
		if !r.toolMatches(t.Name) {
			continue
		}
		// In the list phase (no arguments yet) an allow or ask row matches
		// whatever its target, since some target could match; a deny row
		// hides the tool only when it covers every call of it. In the call
		// phase a deny or ask row fires when any of the call's targets
		// matches, an allow or read-only row only when every one does.
		whole := r.Target == "*"
		switch r.Effect {
		case "deny":
			if whole || !list && r.anyTarget(t) {
				v.deny.add(r.reason)
			}
			continue
		case "ask":
			if whole || list && asks || !list && r.anyTarget(t) {
				v.ask.add(r.reason)
			}
		case "allow":
			if whole || list || r.everyTarget(t) {
				v.allow.add(r.reason)
			}
		}
		if r.ReadOnly && (whole || list || r.everyTarget(t)) {
			v.readOnly = true
		}
	}
}

// anyTarget is the call phase's target test of deny and ask rows; "*" was
// handled by the caller. A call without a target matches only "*"; an
// opaque target (one the policy cannot read) matches every row, and a
// rooted one matches in its relative spelling too ("/secrets/key" a row
// for "secrets/**").
func (r *nativeRow) anyTarget(t *Tool) bool {
	for _, a := range t.AllTargets() {
		if a.Opaque || r.targetMatches(a.Target) || a.Relative != "" && r.targetMatches(a.Relative) {
			return true
		}
	}
	return false
}

// everyTarget is the call phase's target test of allow and read-only
// rows: a call with several targets is allowed only where all of them are,
// and an opaque target matches no row but "*".
func (r *nativeRow) everyTarget(t *Tool) bool {
	all := t.AllTargets()
	for _, a := range all {
		if a.Opaque || !r.targetMatches(a.Target) {
			return false
		}
	}
	return len(all) > 0
}

func (r *nativeRow) toolMatches(name string) bool {
	switch {
	case r.Tool == "*":
		return true
	case r.tool != nil:
		return r.tool(name)
	}
	return r.Tool == name
}

// targetMatches is one target's test against a row's target other
// than "*".
func (r *nativeRow) targetMatches(target string) bool {
	if r.target != nil {
		return r.target(target)
	}
	return r.Target == target
}

// escaping reports whether any of the call's targets climbs above its
// root: the target itself, or another target argument.
func escaping(t *Tool) bool {
	if t.HasTarget && t.TargetEscapes {
		return true
	}
	for _, a := range t.Targets {
		if a.Escapes {
			return true
		}
	}
	return false
}

// merge appends what another package's rule produced.
func (v *verdict) merge(o verdict) {
	v.fired = v.fired || o.fired
	v.reasons = append(v.reasons, o.reasons...)
}

// sortByID orders the library's reasons by ID, in both of its forms: the
// Go form builds them in table order, and OPA orders a set of reason
// objects by their keys first, so neither order is the other's.
func (v *verdict) sortByID() {
	slices.SortStableFunc(v.reasons, func(a, b Reason) int { return strings.Compare(a.ID, b.ID) })
}

func (v *verdict) add(r Reason) {
	v.fired = true
	v.reasons = append(v.reasons, r)
}

// nativeEligible reports whether the library may be evaluated in Go for
// this bundle: nothing but the shipped library and the rules file may
// contribute to data.toolgate.lib or to the table the library reads. A
// policy that adds rules to package toolgate.lib, defines its own
// data.toolgate.rules or rules_index, or serves a table from a data file is
// evaluated wholly by OPA.
func nativeEligible(b *bundle) bool {
	// Data files may not add to the library; without a rules file they may
	// not serve the table or its index either.
	keys := []string{"lib"}
	if !b.rulesFromFile {
		keys = append(keys, "rules", "rules_index")
	}
	if tg, ok := b.data["toolgate"].(map[string]any); ok {
		for _, k := range keys {
			if _, ok := tg[k]; ok {
				return false
			}
		}
	}
	reserved := []ast.Ref{
		ast.MustParseRef("data.toolgate.lib"),
		ast.MustParseRef("data.toolgate.rules"),
		ast.MustParseRef("data.toolgate.rules_index"),
	}
	for key, m := range b.modules {
		if strings.HasPrefix(key, "lib/") {
			continue
		}
		for _, r := range m.Rules {
			path := m.Package.Path.Extend(r.Head.Ref().GroundPrefix())
			for _, res := range reserved {
				if path.HasPrefix(res) || res.HasPrefix(path) {
					return false
				}
			}
		}
		if slices.ContainsFunc(reserved, m.Package.Path.HasPrefix) {
			return false
		}
	}
	return true
}
