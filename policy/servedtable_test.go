package policy_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestServedTableChecked: a rules table served as data (a data file's
// data.toolgate.rules, an array or an object of rows, or one the user's
// Rego defines) is held to a rules file's checks as the policy loads: a
// deny row with a typo in a key or its effect, which the library would
// skip, letting through what it was written to stop, refuses the policy,
// naming the row. A good table loads, with the keys rulesData writes.
func TestServedTableChecked(t *testing.T) {
	const all = `{"id": "all", "effect": "allow", "tool": "read_file", "target": "*"}`
	for _, tc := range []struct{ name, file, src, want string }{
		{"bad effect", "toolgate/data.json", `{"rules": [` + all + `, {"id": "env", "effect": "Deny", "tool": "read_file", "target": "**/.env"}]}`, `data.toolgate.rules[1] (id env): effect "Deny"`},
		{"unknown key", "toolgate/data.yaml", "rules:\n  - " + all + "\n  - {id: env, effect: deny, tool: read_file, targt: \"**/.env\"}\n", `field targt not found`},
		{"missing target", "toolgate/data.json", `{"rules": [{"id": "env", "effect": "deny", "tool": "read_file"}]}`, "target is missing"},
		{"toolgate's id", "toolgate/data.json", `{"rules": [{"id": "toolgate.default", "effect": "deny", "tool": "x", "target": "*"}]}`, "toolgate's own"},
		{"duplicate id, object form", "toolgate/data.json", `{"rules": {"a": ` + all + `, "b": ` + all + `}}`, `id "all" is also used`},
		{"a row not an object", "toolgate/data.json", `{"rules": [` + all + `, "deny everything"]}`, "data.toolgate.rules[1] is not an object"},
		{"in Rego", "p.rego", "package toolgate\n\nrules := [{\"id\": \"env\", \"effect\": \"deny\", \"tool\": \"read_file\", \"tagret\": \"**/.env\"}]\n", "field tagret not found"},
		// Rows that hold for some calls only are checked too.
		{"a row of some calls", "p.rego", "package toolgate\n\nrules contains {\"id\": \"all\", \"effect\": \"allow\", \"tool\": \"*\", \"target\": \"*\"}\n\nrules contains {\"id\": \"env\", \"effect\": \"Deny\", \"tool\": \"read_file\", \"target\": \"**/.env\"} if input.tool\n", `p.rego:5: data.toolgate.rules[0] (id env): effect "Deny"`},
		{"a table of some calls", "p.rego", "package toolgate\n\nfs_rows := [{\"id\": \"all\", \"effect\": \"allow\", \"tool\": \"*\", \"target\": \"*\", \"mesage\": \"x\"}]\n\nrules := fs_rows if input.upstream.name == \"fs\"\n", "p.rego:5: data.toolgate.rules[0]: yaml: unmarshal errors:\n  line 1: field mesage not found"},
		// Read as "22" by a decoder, as a number by the library.
		{"a number for a target", "toolgate/data.yaml", "rules:\n  - {id: ssh, effect: deny, tool: connect, target: 22}\n", "target is a number"},
		{"a number for an ID", "toolgate/data.json", `{"rules": [{"id": 42, "effect": "deny", "tool": "x", "target": "*"}]}`, "id is a number"},
		{"a string for a flag", "toolgate/data.json", `{"rules": [{"id": "r", "effect": "allow", "tool": "x", "target": "*", "read_only": "true"}]}`, "read_only is a string"},
		// The library picks a call's rows from the index when there is
		// one: rows of the user's there would be rows nothing checked.
		{"an index in a data file", "toolgate/data.json", `{"rules": [` + all + `], "rules_index": {"by_tool": {"read_file": [{"id": "env", "effect": "Deny", "tool": "read_file", "target": "**/.env"}]}, "wild": []}}`, "rules_index is toolgate's own"},
		{"the checked flag in a data file", "toolgate/data.json", `{"rules": [` + all + `], "rules_checked": true}`, "rules_checked is toolgate's own"},
		{"the checked flag in Rego", "p.rego", "package toolgate\n\nrules_checked := true\n", "rules_checked is toolgate's own; your Rego defines it (p.rego:3)"},
		{"an index in Rego", "p.rego", "package toolgate\n\nrules_index := {\"by_tool\": {}, \"wild\": [], \"tool_regex\": {}, \"target_regex\": {}}\n", "rules_index is toolgate's own, written from the rules table; your Rego defines it (p.rego:3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{tc.file: {Data: []byte(tc.src)}}
			_, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: fsys})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loaded with %v; want it refused naming %q", err, tc.want)
			}
		})
	}
	good := `{"rules": [` + all + `, {"id": "env", "effect": "deny", "tool": "read_file", "target": "**/.env", "tool_glob": false, "target_glob": true, "message": "secrets", "read_only": false}]}`
	e := newEngine(t, policy.Options{Policies: fstest.MapFS{"toolgate/data.json": {Data: []byte(good)}}})
	if d, err := e.Decide(t.Context(), call("read_file", "a/.env")); err != nil || d.Action != policy.Deny {
		t.Errorf("a good served table: read_file a/.env is %v (%v), want deny", d.Action, err)
	}
}

// TestRegoTableBesideRulesFile: a table the user's Rego defines beside
// policy.rules_file refuses the policy, naming where, as a data file's
// does: the file's table would replace it without a word, and its deny
// rows with it.
func TestRegoTableBesideRulesFile(t *testing.T) {
	rules := writeRules(t, t.TempDir(), []string{`{id: all, effect: allow, tool: read_file, target: "*"}`})
	for name, src := range map[string]string{
		"rules":         "package toolgate\n\nrules := [{\"id\": \"no-secrets\", \"effect\": \"deny\", \"tool\": \"read_file\", \"target\": \"secrets/**\"}]\n",
		"a partial set": "package toolgate\n\nrules contains {\"id\": \"no-secrets\", \"effect\": \"deny\", \"tool\": \"read_file\", \"target\": \"secrets/**\"}\n",
		"its package":   "package toolgate.rules\n\nx := 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := policy.New(t.Context(), policy.Options{
				Library: shipped.Library(), NativeLibrary: true, RulesFile: rules,
				Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}},
			})
			if err == nil || !strings.Contains(err.Error(), "defined both by policy.rules_file and by your Rego (p.rego:3)") {
				t.Fatalf("loaded with %v; want it refused, naming p.rego:3", err)
			}
		})
	}
	// A rule beside the table's name is not the table.
	newEngine(t, policy.Options{RulesFile: rules, Policies: fstest.MapFS{"p.rego": {Data: []byte("package toolgate\n\nrules_note := \"see rules.yaml\"\n")}}})
}
