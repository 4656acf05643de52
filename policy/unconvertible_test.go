package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestUnconvertibleInputFailsInGo: a value of the call that OPA's input
// document cannot hold (a number past OPA's range, which reaches the
// policy with limits.lossy_numbers: allow) fails a decision evaluated in
// Rego, whatever reads it. The Go library, which never builds the
// document when the user's package has no rules, fails it alike: a deny
// as a policy error, not the allow its table would give.
func TestUnconvertibleInputFailsInGo(t *testing.T) {
	rules := writeRules(t, t.TempDir(), []string{`{id: r1, effect: allow, tool: read, target: "*"}`})
	opts := policy.Options{Library: shipped.Library(), RulesFile: rules}
	inRego := newEngine(t, opts)
	opts.NativeLibrary = true
	native := newEngine(t, opts)
	if !policy.NativeInUse(native) {
		t.Fatal("the native library is not in use")
	}
	big := json.Number("1e100000")
	for name, in := range map[string]*policy.Input{
		"mcp.id of a ping": {Kind: policy.KindMCP, MCP: &policy.MCP{Method: "ping", ID: big}},
		"mcp.params of a tools/call": {Kind: policy.KindMCP, MCP: &policy.MCP{
			Method: "tools/call", ID: json.Number("1"),
			Params: map[string]any{"_meta": map[string]any{"n": big}},
		}, Tool: policy.NewTool("read", map[string]any{"path": "a.txt"}, policy.DefaultTargetArgs)},
		"an argument": {Kind: policy.KindREST, Tool: policy.NewTool("read", map[string]any{"path": "a.txt", "n": big}, policy.DefaultTargetArgs)},
	} {
		t.Run(name, func(t *testing.T) {
			want, wantErr := inRego.Decide(t.Context(), in)
			got, gotErr := native.Decide(t.Context(), in)
			if wantErr == nil || gotErr == nil || !cmp.Equal(want, got) || got.Action != policy.Deny {
				t.Errorf("decisions differ\nRego:   %+v (err %v)\nnative: %+v (err %v); want both denied as a policy error", want, wantErr, got, gotErr)
			}
		})
	}
}
