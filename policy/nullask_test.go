package policy_test

import (
	"testing"
	"testing/fstest"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestNullApproversAskRow: an ask row with approvers: null (yaml.Marshal
// of policy.Rule writes it) asks without approvers, as the loader reads
// it, rather than failing every call it matches as a policy error.
func TestNullApproversAskRow(t *testing.T) {
	rows := []policy.Rule{{ID: "w", Effect: "ask", Tool: "write_file", Target: "docs/**"}}
	table, err := yaml.Marshal(map[string]any{"toolgate": map[string]any{"rules": rows}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.New(t.Context(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true,
		Policies: fstest.MapFS{"data.yaml": {Data: table}},
	})
	if err != nil {
		t.Fatalf("refused at load: %v", err)
	}
	d, err := e.Decide(t.Context(), call("write_file", "docs/a.md"))
	if err != nil || d.Action != policy.Ask {
		t.Errorf("write_file docs/a.md is %v %v (%v): the ask row, approvers: null (none), asks", d.Action, d.RuleIDs(), err)
	}
}
