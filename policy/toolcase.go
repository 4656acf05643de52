package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/internal/toolname"
)

// Why a tool name in another case than the rules table's is denied: the
// table matches tool names exactly (an exact name matches only itself),
// but routers that match paths without regard to case (Express's and
// ASP.NET Core's defaults) run POST /tools/DELETE_FILE as delete_file. A
// deny row for delete_file would then not see the call that runs it, and
// an allow row for "*" let it through. So a REST call whose tool name the
// table names only in another case (or whose name a glob row matches only
// without regard to case) is denied before the policy: the agent can
// send the name as the table spells it, and a case-sensitive upstream has
// no such tool anyway. Likewise a name that is one the table names with a
// suffix after a dot (delete_file.json, delete_file.zzz, delete_file.):
// Rails' routes take an optional (.:format) of any extension, and Spring
// MVC's suffix pattern match any suffix, so both run delete_file. A name
// the table names as spelt (fs.write, or a glob such as report.*) is
// decided as spelt, unless a row that denies or asks names a prefix of it
// (fs): then even a row of its own does not excuse it.
// MCP servers look tool names up exactly, so MCP calls are left alone.

// toolCase knows the tool names and globs of a rules table without regard
// to case.
type toolCase struct {
	exact  map[string]bool   // the table's exact tool names
	folded map[string]string // lower-cased exact name -> as the table spells it
	globs  []caseGlob
	// strictFolded and strictGlobs are the rows that deny or ask, and
	// denyGlobs the globs that deny every call of their tools (target
	// "*"): a name that is a strict row's tool with a suffix after a dot
	// is denied even where a broader glob names it as spelt (allow fs_*
	// beside deny fs_delete: Rails and Spring run fs_delete.json as
	// fs_delete), unless a glob that denies it whatever its target names
	// it so (its own row denies it).
	strictFolded map[string]string
	strictGlobs  []caseGlob
	denyGlobs    []caseGlob
}

type caseGlob struct {
	pattern       string
	match, folded globMatcher
}

// caseRow is what the check reads of a row: its tool, whether the tool is
// a glob, its effect and its target.
type caseRow struct {
	tool, effect, target string
	glob                 bool
}

// fileRows are a rules file's rows.
func fileRows(rules []Rule) []caseRow {
	rows := make([]caseRow, len(rules))
	for i, r := range rules {
		rows[i] = caseRow{tool: r.Tool, effect: r.Effect, target: r.Target, glob: isGlob(r.Tool)}
	}
	return rows
}

// dataRows are the rows of a table the library reads from data (a data
// file's data.toolgate.rules, or the user's Rego that defines it), as it
// reads them: an array or an object of rows, a row's tool a glob by its
// tool_glob or, without one, by its spelling. A row without a string tool is left out: it names no
// tool.
func dataRows(table any) []caseRow {
	var list []any
	switch t := table.(type) {
	case []any:
		list = t
	case map[string]any:
		for _, r := range t {
			list = append(list, r)
		}
	}
	var rows []caseRow
	for _, r := range list {
		row, _ := r.(map[string]any)
		tool, ok := row["tool"].(string)
		if !ok {
			continue
		}
		effect, _ := row["effect"].(string)
		target, _ := row["target"].(string)
		glob, set := row["tool_glob"].(bool)
		if !set {
			glob = isGlob(tool) // as the library reads a row without it
		}
		rows = append(rows, caseRow{tool: tool, effect: effect, target: target, glob: glob})
	}
	return rows
}

// newToolCase indexes the rows of a rules table; nil when the table names
// no tool but "*".
func newToolCase(rows []caseRow) (*toolCase, error) {
	tc := &toolCase{exact: map[string]bool{}, folded: map[string]string{}, strictFolded: map[string]string{}}
	for _, r := range rows {
		strict := r.effect != "allow"
		switch {
		case r.tool == "*":
		case r.glob:
			// A malformed glob: a rules file's is refused as it is read;
			// a served table's is refused here, as the library would fail
			// every decision that reaches it.
			m, err := compileMatcher(r.tool)
			if err != nil {
				return nil, fmt.Errorf("rules table: tool %q: %w", r.tool, err)
			}
			f, err := compileMatcher(strings.ToLower(r.tool))
			if err != nil {
				return nil, fmt.Errorf("rules table: tool %q: %w", r.tool, err)
			}
			g := caseGlob{r.tool, m, f}
			tc.globs = append(tc.globs, g)
			if strict {
				tc.strictGlobs = append(tc.strictGlobs, g)
			}
			if r.effect == "deny" && r.target == "*" {
				tc.denyGlobs = append(tc.denyGlobs, g)
			}
		default:
			tc.exact[r.tool] = true
			tc.folded[strings.ToLower(r.tool)] = r.tool
			if strict {
				tc.strictFolded[strings.ToLower(r.tool)] = r.tool
			}
		}
	}
	if len(tc.exact) == 0 && len(tc.globs) == 0 {
		return nil, nil
	}
	return tc, nil
}

// variant returns the table's spelling that name differs from only in
// case, or "".
func (tc *toolCase) variant(name string) string {
	if tc == nil {
		return ""
	}
	// Before the name's own rows: a row of its own (deny db.read on
	// secrets/**) does not excuse a name whose prefix a row denies or asks
	// about (deny db): Rails and Spring run db.read as db whatever rows
	// db.read has.
	if (len(tc.strictFolded) > 0 || len(tc.strictGlobs) > 0) && strings.IndexByte(name, '.') > 0 && !slices.ContainsFunc(tc.denyGlobs, func(g caseGlob) bool { return g.match(name) }) {
		low := strings.ToLower(name)
		for _, base := range toolname.Prefixes(low) {
			if spelt := tc.prefixMatch(base, low); spelt != "" {
				return spelt
			}
		}
	}
	if tc.exact[name] {
		return ""
	}
	for _, g := range tc.globs {
		if g.match(name) {
			return "" // the table names it as spelt ("report.*" for report.csv)
		}
	}
	low := strings.ToLower(name)
	if spelt := tc.foldedMatch(low); spelt != "" {
		return spelt
	}
	for _, base := range toolname.Prefixes(low) {
		if spelt := tc.foldedMatch(base); spelt != "" {
			return spelt
		}
	}
	return ""
}

// foldedMatch returns the table's spelling of an exact name or glob that
// low, a lower-cased name, matches without regard to case; "" for none.
func (tc *toolCase) foldedMatch(low string) string {
	if spelt, ok := tc.folded[low]; ok {
		return spelt
	}
	for _, g := range tc.globs {
		if g.folded(low) {
			return g.pattern
		}
	}
	return ""
}

// prefixMatch returns the spelling of a row that denies or asks and names
// base, a lower-cased name's prefix, and does not name the whole name low
// as well: a glob that names both (ask github.* for github.issues.create)
// decides the name as spelt, as strictly as its prefix. "" for none.
func (tc *toolCase) prefixMatch(base, low string) string {
	if spelt, ok := tc.strictFolded[base]; ok {
		return spelt
	}
	for _, g := range tc.strictGlobs {
		if g.folded(base) && !g.folded(low) {
			return g.pattern
		}
	}
	return ""
}

// caseDenied is the decision for a call of tool name, which the table
// names only as spelt.
func caseDenied(name, spelt string) Decision {
	return Decision{Action: Deny, Reasons: []Reason{{
		ID: "toolgate.tool_case",
		Message: fmt.Sprintf("tool %q is named %q in the rules table: a router that ignores case would run it as that tool; send the name as the table spells it",
			name, spelt),
	}}}
}

// restToolName is the tool name of an input document of a REST call, as
// policy eval hands it over.
func restToolName(v ast.Value) (string, bool) {
	get := func(v ast.Value, key string) ast.Value {
		if obj, ok := v.(ast.Object); ok {
			if t := obj.Get(ast.InternedTerm(key)); t != nil {
				return t.Value
			}
		}
		return nil
	}
	if kind, ok := get(v, "kind").(ast.String); !ok || string(kind) != KindREST {
		return "", false
	}
	name, ok := get(get(v, "tool"), "name").(ast.String)
	return string(name), ok
}
