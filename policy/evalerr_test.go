package policy_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

// TestEvalErrorHidesInput: a built-in's error quotes its operand, here a
// call's argument. Without ErrorDetail neither the error nor the deny's
// reason holds it, and both still name the built-in and where in the
// policy it failed; with ErrorDetail the text is OPA's, whole.
func TestEvalErrorHidesInput(t *testing.T) {
	const secret = "PW-7f3a-not-a-number"
	rules := map[string]string{
		"to_number":     `deny contains "n" if to_number(input.tool.arguments.password) > 0`,
		"time.parse":    `deny contains "t" if time.parse_rfc3339_ns(input.tool.arguments.password) > 0`,
		"regex":         `deny contains "r" if regex.match(input.tool.arguments.password, "x")`,
		"approvers key": `deny contains {"message": "m", "approvers": {input.tool.arguments.password: 1}} if input.tool.name == "write_note"`,
		"conflict": `x := input.tool.arguments.password
x := "other"
deny contains "c" if x`,
	}
	for name, src := range rules {
		t.Run(name, func(t *testing.T) {
			in := call("write_note", "notes/a.txt")
			in.Tool.Arguments["password"] = secret
			if name == "regex" {
				in.Tool.Arguments["password"] = "(" + secret
			}
			for _, detail := range []bool{false, true} {
				e := newEngine(t, policy.Options{Policies: module(src), ErrorDetail: detail})
				d, err := e.Decide(t.Context(), in)
				if err == nil {
					t.Fatalf("detail %v: no error; want the built-in's", detail)
				}
				if d.Action != policy.Deny {
					t.Errorf("detail %v: %v, want deny", detail, d.Action)
				}
				told := err.Error() + " | " + strings.Join(d.Messages(), " | ")
				if got := strings.Contains(told, secret); got != detail {
					t.Errorf("detail %v: argument quoted %v, want %v: %s", detail, got, detail, told)
				}
				if name == "approvers key" {
					continue // the engine's own error: no place in the policy
				}
				if !strings.Contains(told, "p.rego:") || !strings.Contains(told, "eval_") {
					t.Errorf("detail %v: no location or code: %s", detail, told)
				}
			}
		})
	}
}

// TestEvalErrorNamesTheRule: a conflict's values may be the input's and
// are cut, but the error still names the rule that produced them.
func TestEvalErrorNamesTheRule(t *testing.T) {
	e := newEngine(t, policy.Options{Policies: module(`
x := 1 if input.tool.name == "write_note"
x := 2 if input.tool.name == "write_note"
deny contains "x" if x == 1`)})
	_, err := e.Decide(t.Context(), call("write_note", "notes/a.txt"))
	const want = "p.rego:4: eval_conflict_error: rule data.toolgate.x produced conflicting values: (detail hidden"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
}
