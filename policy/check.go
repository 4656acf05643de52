package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/dependencies"
	"github.com/open-policy-agent/opa/v1/types"
)

// decisionPackages are the packages whose ruleNames the engine reads.
var decisionPackages = [...]string{"toolgate", "toolgate.lib"}

// checkRuleTypes names the decision rules (deny, ask, allow, read_only of
// package toolgate and toolgate.lib) that cannot give what the engine
// reads: a boolean, or a set of reasons (strings, or objects with a string
// "message", an optional string "id" and an optional boolean "must_ask").
// Rules are judged by the type OPA's compiler infers for them, data
// documents by their value, so such a policy is named at load rather than
// at the first call it denies. A type the compiler does not know (a value
// read from the input, say) is let through: the check at each decision
// still holds.
func checkRuleTypes(c *ast.Compiler, data map[string]any) error {
	var errs []string
	for _, pkg := range decisionPackages {
		for _, name := range ruleNames {
			path := pkg + "." + name
			if v, ok := dataAt(data, path); ok {
				if _, err := verdictOf(name, []any{v}); err != nil {
					errs = append(errs, fmt.Sprintf("data.%s (a data file): %v", path, strings.TrimPrefix(err.Error(), "policy: ")))
				}
				continue
			}
			ref := ast.MustParseRef("data." + path)
			rules := c.GetRules(ref)
			if len(rules) == 0 {
				continue
			}
			if what := ruleTypeProblem(c.TypeEnv.GetByRef(ref)); what != "" {
				where := "data." + path
				if loc := culprit(c, rules).Location; loc != nil {
					where = fmt.Sprintf("%s:%d", loc.File, loc.Row)
				}
				errs = append(errs, fmt.Sprintf("%s: rule %s must be a boolean or a set of reasons, %s", where, name, what))
			}
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("policy: %s", errs[0])
	}
	return fmt.Errorf("policy: %d rules cannot decide a call:\n%s", len(errs), strings.Join(errs, "\n"))
}

// culprit is the definition of a mistyped rule to point at: the first
// whose own head the check refuses (deny := 5, deny contains 7), else the
// first (the problem is then in how the definitions combine).
func culprit(c *ast.Compiler, rules []*ast.Rule) *ast.Rule {
	for _, r := range rules {
		if r.Head.RuleKind() == ast.MultiValue {
			if r.Head.Key != nil && reasonTypeProblem(c.TypeEnv.GetByValue(r.Head.Key.Value)) != "" {
				return r
			}
		} else if r.Head.Value != nil && ruleTypeProblem(c.TypeEnv.GetByValue(r.Head.Value.Value)) != "" {
			return r
		}
	}
	return rules[0]
}

// dataAt returns the value of the dotted path in a data document.
func dataAt(data map[string]any, path string) (any, bool) {
	var v any = data
	for k := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// ruleTypeProblem says why a rule of type t cannot give a decision, or ""
// when it can (or may: any is not refused).
func ruleTypeProblem(t types.Type) string {
	switch t := t.(type) {
	case nil, types.Boolean:
		return ""
	case types.Any:
		for _, m := range t {
			if p := ruleTypeProblem(m); p != "" {
				return p
			}
		}
		return ""
	case *types.Set, *types.Array:
		if p := reasonTypeProblem(types.Values(t)); p != "" {
			return "but " + p
		}
		return ""
	}
	return "not " + article(t)
}

// reasonTypeProblem says why a value of type t cannot be a reason, or "".
func reasonTypeProblem(t types.Type) string {
	switch t := t.(type) {
	case nil, types.String:
		return ""
	case types.Any:
		for _, m := range t {
			if p := reasonTypeProblem(m); p != "" {
				return p
			}
		}
		return ""
	case *types.Object:
		props := map[string]types.Type{}
		for _, p := range t.StaticProperties() {
			if k, ok := p.Key.(string); ok {
				props[k] = p.Value
			}
		}
		if _, ok := props["message"]; !ok && t.DynamicProperties() == nil {
			return `a reason object has no "message"`
		}
		for _, f := range []struct {
			key  string
			want types.Type
		}{{"message", types.S}, {"id", types.S}, {"must_ask", types.B}} {
			if v, ok := props[f.key]; ok && !mayBe(v, f.want) {
				return fmt.Sprintf("a reason's %q is %s, not %s", f.key, article(v), article(f.want))
			}
		}
		if v, ok := props["approvers"]; ok && !mayBeObject(v) {
			return fmt.Sprintf(`a reason's "approvers" is %s, not an object`, article(v))
		}
		return ""
	}
	return "a reason is " + article(t) + ", not a string or an object"
}

// mayBe reports whether a value of type t may be of type want: t is want,
// or any (unknown), or a union of which every member may be want.
func mayBe(t, want types.Type) bool {
	if a, ok := t.(types.Any); ok {
		for _, m := range a {
			if !mayBe(m, want) {
				return false
			}
		}
		return true
	}
	return types.Compare(t, want) == 0
}

// mayBeObject reports whether a value of type t may be an object.
func mayBeObject(t types.Type) bool {
	switch t := t.(type) {
	case *types.Object:
		return true
	case types.Any:
		for _, m := range t {
			if !mayBeObject(m) {
				return false
			}
		}
		return true
	}
	return false
}

// article names a type with its article: "a number", "an object".
func article(t types.Type) string {
	s := types.Sprint(t)
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// unreadRules names the rules of the user's modules under
// data.toolgate named like a decision rule (deny, ask, allow, read_only)
// that toolgate never reads: neither the decision packages' own, nor read
// by them (directly or through other rules). An author who split a policy
// by package (toolgate.deploy) would otherwise see its denies pass their
// tests and decide nothing.
func unreadRules(c *ast.Compiler) []string {
	toolgate := ast.MustParseRef("data.toolgate")
	// One walk from every decision rule at once: each rule they read,
	// directly or through others, is visited once.
	var decision []ast.Ref
	var reads ast.Body
	for _, pkg := range decisionPackages {
		for _, name := range ruleNames {
			ref := ast.MustParseRef("data." + pkg + "." + name)
			decision = append(decision, ref)
			reads = append(reads, ast.NewExpr(ast.NewTerm(ref)))
		}
	}
	read, err := dependencies.Virtual(c, reads)
	if err != nil {
		return nil // nothing is named that may be read
	}
	isRead := func(p ast.Ref) bool {
		return slices.ContainsFunc(decision, func(d ast.Ref) bool { return d.Equal(p) }) ||
			slices.ContainsFunc(read, func(d ast.Ref) bool { return d.HasPrefix(p) || p.HasPrefix(d) })
	}
	var out []string
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(c.Modules)) {
		if strings.HasPrefix(name, "lib/") {
			continue
		}
		for _, r := range c.Modules[name].Rules {
			p := r.Ref().GroundPrefix()
			if len(p) < 3 || !p.HasPrefix(toolgate) {
				continue
			}
			last, ok := p[len(p)-1].Value.(ast.String)
			if !ok || !slices.Contains(ruleNames[:], string(last)) || isRead(p) || seen[p.String()] {
				continue
			}
			seen[p.String()] = true
			where := name
			if r.Location != nil {
				where = fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
			}
			out = append(out, fmt.Sprintf("%s: %s decides nothing: toolgate reads deny, ask, allow and read_only of package toolgate alone, and nothing there reads this one (have package toolgate's rules read it, if that is what it is for)",
				where, p))
		}
	}
	return out
}

// decisionFunctions refuses a decision rule of a decision package written
// as a function (deny(x) := …): toolgate reads deny, ask, allow and
// read_only as rules, and OPA's own refusal names a place in toolgate's
// query rather than the file and line of the function.
func decisionFunctions(c *ast.Compiler) error {
	var errs []string
	for _, pkg := range decisionPackages {
		for _, name := range ruleNames {
			ref := ast.MustParseRef("data." + pkg + "." + name)
			for _, r := range c.GetRules(ref) {
				where := "data." + pkg + "." + name
				if r.Location != nil {
					where = fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
				}
				switch p := r.Ref().GroundPrefix(); {
				case !p.Equal(ref):
					// GetRules gives the rules below ref too: a package
					// toolgate.allow, or allow.x, makes allow an object,
					// which no call can be decided by.
					errs = append(errs, fmt.Sprintf("%s: %s sits where toolgate reads the %s rule (an object of rules is no decision): name its package or rule otherwise", where, p, name))
				case len(r.Head.Args) > 0:
					errs = append(errs, fmt.Sprintf("%s: %s is a function (it takes arguments); toolgate reads %s as a rule: a boolean (%s if …) or a set of reasons (%s contains reason if …)", where, name, name, name, name))
				}
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "\n"))
}
