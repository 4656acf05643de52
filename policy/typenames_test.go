package policy_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestErrorsNameRegoTypes: a rule that gives what the engine cannot read
// is an error that names the value's type as Rego's authors know it (a
// number, an object), not as Go spells it (json.Number).
func TestErrorsNameRegoTypes(t *testing.T) {
	for src, want := range map[string]string{
		"package toolgate\n\ndeny contains n if { n := 5; input.tool }\n":                            "a reason must be a string or an object, not a number",
		"package toolgate\n\ndeny contains {\"message\": \"m\", \"approvers\": [1]} if input.tool\n": `"approvers" must be an object, not an array`,
		"package toolgate\n\nimport rego.v1\n\nallow := x if { x := {\"a\": input.tool.name} }\n":    "must be a boolean or a set of reasons, not an object",
	} {
		e := newEngine(t, policy.Options{Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}}, ErrorDetail: true})
		_, err := e.Decide(t.Context(), call("read_file", "a"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to say %q", src, err, want)
		}
	}
}

// TestDecisionRuleAsFunction: a decision rule written as a function
// (deny(x) := …) is refused as the policy loads, naming its file and line
// and what toolgate reads, rather than a place in toolgate's own query.
func TestDecisionRuleAsFunction(t *testing.T) {
	_, err := policy.New(t.Context(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true,
		Policies: fstest.MapFS{"p.rego": {Data: []byte("package toolgate\n\ndeny(x) := true if x\n")}},
	})
	if err == nil || !strings.Contains(err.Error(), "p.rego:3: deny is a function") {
		t.Fatalf("loaded with %v; want it refused naming p.rego:3", err)
	}
}
