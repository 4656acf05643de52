package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// rule is one row of the rules table both toolgate and the external OPA
// decide with.
type rule struct{ id, effect, tool, target string }

// table is the ten rows the harness's calls meet, exact names and globs.
// The calls: read_file docs/... (allow, r1), delete_file (deny, r4),
// write_note notes/... (ask, r3). withRows adds rows for other tools.
var table = []rule{
	{"r1", "allow", "read_file", "docs/**"},
	{"r2", "deny", "read_file", "**/.env"},
	{"r3", "ask", "write_note", "notes/**"},
	{"r4", "deny", "delete_file", "*"},
	{"r5", "allow", "list_dir", "*"},
	{"r6", "allow", "search.*", "*"},
	{"r7", "deny", "*", "secrets/**"},
	{"r8", "allow", "read_file", "src/*.go"},
	{"r9", "ask", "deploy", "*"},
	{"r10", "deny", "write_note", "**/*.exe"},
}

// defaultRows is the size of the table the harness measures with: the
// targets are stated for a 100-row table.
const defaultRows = 100

// withRows is base followed by rows for other tools, n rows in all: as a
// real table has, most name one tool (an exact target, a glob, "*"); one
// in 25 names tools by a glob and one in 25 denies a tree to every tool,
// rows that every call meets. None decides a call the harness sends.
func withRows(base []rule, n int) []rule {
	rules := append([]rule(nil), base...)
	for i := len(base); i < n; i++ {
		id := fmt.Sprintf("f%d", i)
		switch {
		case i%25 == 3:
			rules = append(rules, rule{id, "allow", fmt.Sprintf("ns%d.*", i), "src/*.go"})
		case i%25 == 7:
			rules = append(rules, rule{id, "deny", "*", fmt.Sprintf("private%d/**", i)})
		case i%4 == 0:
			rules = append(rules, rule{id, "allow", fmt.Sprintf("tool%d", i), "docs/**"})
		case i%4 == 1:
			rules = append(rules, rule{id, "deny", fmt.Sprintf("tool%d", i), fmt.Sprintf("secret%d.txt", i)})
		case i%4 == 2:
			rules = append(rules, rule{id, "ask", fmt.Sprintf("tool%d", i), "*"})
		default:
			rules = append(rules, rule{id, "allow", fmt.Sprintf("tool%d", i), "**/*.md"})
		}
	}
	return rules
}

func isGlob(p string) bool { return p != "*" && strings.ContainsAny(p, "*?[{") }

// writeRules writes rules in toolgate's rules-file format.
func writeRules(file string, rules []rule) error {
	var b strings.Builder
	b.WriteString("rules:\n")
	for _, r := range rules {
		fmt.Fprintf(&b, "  - {id: %s, effect: %s, tool: %q, target: %q}\n", r.id, r.effect, r.tool, r.target)
	}
	return os.WriteFile(file, []byte(b.String()), 0o600)
}

// extOPAPolicy decides the rules table the way toolgate's shipped library
// does (same matching, same index by tool), as a self-contained policy a
// standalone OPA server can load.
//
//go:embed extopa.rego
var extOPAPolicy []byte

// writeExtOPA writes the policy and the table, as OPA data with the glob
// flags and the index by tool precomputed, into dir.
func writeExtOPA(dir string, table []rule) error {
	var rows []map[string]any
	byTool := map[string][]map[string]any{}
	wild := []map[string]any{}
	for _, r := range table {
		m := map[string]any{
			"id": r.id, "effect": r.effect, "tool": r.tool, "target": r.target,
			"tool_glob": isGlob(r.tool), "target_glob": isGlob(r.target),
		}
		rows = append(rows, m)
		if r.tool == "*" || isGlob(r.tool) {
			wild = append(wild, m)
		} else {
			byTool[r.tool] = append(byTool[r.tool], m)
		}
	}
	data, err := json.Marshal(map[string]any{"bench": map[string]any{
		"rules": rows, "rules_index": map[string]any{"by_tool": byTool, "wild": wild},
	}})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), data, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "policy.rego"), extOPAPolicy, 0o600)
}
