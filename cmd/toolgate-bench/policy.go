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

// table is a 10-row table of exact names and globs, like the policies the
// issue's reference figures were measured with. The calls the harness
// sends: read_file docs/... (allow, r1), delete_file (deny, r4),
// write_note notes/... (ask, r3).
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
func writeExtOPA(dir string) error {
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
