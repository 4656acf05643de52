package policy_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

func TestParseRules(t *testing.T) {
	good := `rules:
  - {id: r1, effect: allow, tool: Read, target: "*", read_only: true}
  - {id: r2, effect: ask, tool: "fs.*", target: "src/**", must_ask: true, message: look first}
`
	rules, err := policy.ParseRules([]byte(good))
	if err != nil || len(rules) != 2 || !rules[0].ReadOnly || !rules[1].MustAsk || rules[1].Message != "look first" {
		t.Fatalf("ParseRules(good) = %+v, %v", rules, err)
	}
	if rules, err := policy.ParseRules(nil); err != nil || len(rules) != 0 {
		t.Fatalf("empty file: %v, %v; want an empty table", rules, err)
	}
	bad := []struct{ name, src, want string }{
		{"unknown key", `rules: [{id: a, effect: allow, tool: x, target: "*", tagret: y}]`, "tagret"},
		{"missing id", `rules: [{effect: allow, tool: x, target: "*"}]`, "id is missing"},
		{"bad id", `rules: [{id: "a b", effect: allow, tool: x, target: "*"}]`, "not a valid id"},
		{"duplicate id", `rules: [{id: a, effect: allow, tool: x, target: "*"}, {id: a, effect: deny, tool: y, target: "*"}]`, "also used by rules[0]"},
		{"bad effect", `rules: [{id: a, effect: permit, tool: x, target: "*"}]`, "effect"},
		{"toolgate's id", `rules: [{id: toolgate.target_escapes, effect: deny, tool: x, target: "*"}]`, "toolgate's own"},
		{"missing tool", `rules: [{id: a, effect: allow, target: "*"}]`, "tool is missing"},
		{"missing target", `rules: [{id: a, effect: allow, tool: x}]`, "target is missing"},
		{"unclosed class", `rules: [{id: a, effect: allow, tool: x, target: "a[b"}]`, "unclosed ["},
		{"caret class", `rules: [{id: a, effect: deny, tool: x, target: "secrets/[^.]*"}]`, "write [!...] to negate"},
		{"unclosed brace", `rules: [{id: a, effect: allow, tool: x, target: "{a,b"}]`, "unclosed {"},
		{"must_ask on allow", `rules: [{id: a, effect: allow, tool: x, target: "*", must_ask: true}]`, "must_ask"},
		{"not a list", `rules: {id: a}`, "rules table"},
		{"approvers on allow", `rules: [{id: a, effect: allow, tool: x, target: "*", approvers: {groups: [sre]}}]`, "approvers is only meaningful"},
		{"approvers naming nobody", `rules: [{id: a, effect: ask, tool: x, target: "*", approvers: {min: 2}}]`, "names no groups"},
		{"approvers min too high", `rules: [{id: a, effect: ask, tool: x, target: "*", approvers: {groups: [sre], min: 65}}]`, "min 65"},
		{"approvers unknown key", `rules: [{id: a, effect: ask, tool: x, target: "*", approvers: {group: [sre]}}]`, "group"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.ParseRules([]byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
