package proxy

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// paramsCall is a tools/call of write_note whose params carry, beside
// the arguments, the members given.
func paramsCall(id, arguments, others string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"write_note","arguments":` + arguments + others + `}}`
}

// TestMCPParamsInPolicyInput: a policy can decide on the members of a
// tools/call's params beside its name and arguments (input.mcp.params),
// which the upstream receives too: the documented example denies a _meta
// that names a path, and the same write without it runs.
func TestMCPParamsInPolicyInput(t *testing.T) {
	e, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), Policies: fstest.MapFS{
		"meta.rego": {Data: []byte(`package toolgate

deny contains {"id": "meta-paths", "message": "_meta may not name paths"} if {
	some k, _ in input.mcp.params._meta
	endswith(k, "_path")
}

allow if input.tool.name == "write_note"
`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	env := newMCPEnv(t, mcpRawEra, func(c *Config) { c.Decider = e })
	call := func(others string) string {
		t.Helper()
		_, _, raw := postMCP(t, env, paramsCall("1", `{"path":"notes/a.txt","content":"x"}`, others))
		return string(raw)
	}
	if raw := call(`,"_meta":{"acme/overwrite_path":"/etc/passwd"}`); !strings.Contains(raw, "_meta may not name paths") {
		t.Errorf("a _meta naming a path answered %s, want the deny", raw)
	}
	if n := env.up.invoked("write_note"); n != 0 {
		t.Fatalf("write_note ran %d times", n)
	}
	if raw := call(`,"_meta":{"progressToken":1,"acme/mode":"fast"}`); !strings.Contains(raw, "wrote notes/a.txt: x") {
		t.Errorf("a harmless _meta answered %s, want the tool's result", raw)
	}
}
