package policy_test

import (
	"bytes"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestRulesFileReservedRego: policy test -rules refuses what serve
// refuses beside a rules file: a Rego rules_index or rules_checked.
func TestRulesFileReservedRego(t *testing.T) {
	for name, rule := range map[string]string{
		"rules_index":   "rules_index := {\"by_tool\": {}, \"wild\": [], \"tool_regex\": {}, \"target_regex\": {}}\n",
		"rules_checked": "rules_checked := true\n",
	} {
		t.Run(name, func(t *testing.T) {
			rules := testRulesFile(t)
			// serve refuses it
			if _, err := policy.New(t.Context(), policy.Options{
				Library: shipped.Library(), RulesFile: rules,
				Policies: fstest.MapFS{"p.rego": {Data: []byte("package toolgate\n\n" + rule)}},
			}); err == nil {
				t.Fatalf("serve loaded it")
			}
			tree := fstest.MapFS{
				"p.rego":      {Data: []byte("package toolgate\n\n" + rule)},
				"p_test.rego": {Data: []byte("package toolgate_test\n\ntest_one if { true }\n")},
			}
			var out bytes.Buffer
			sum, err := policy.RunTests(t.Context(), &out, map[string]fs.FS{"p": tree}, policy.TestOptions{Library: shipped.Library(), RulesFile: rules})
			if err == nil {
				t.Errorf("policy test -rules ran it (%+v); serve refuses the same policy and rules file", sum)
			}
		})
	}
}
