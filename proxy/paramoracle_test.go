package proxy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestParamHeaderHidesHiddenTools: the Mcp-Param-* check runs before a
// call is decided, so it answers a tool the policy hides from the caller's
// tools/list (deny row, target "*") exactly as a tool that does not exist:
// a caller cannot find the hidden tool, nor the names of its arguments
// that an Mcp-Param header mirrors.
func TestParamHeaderHidesHiddenTools(t *testing.T) {
	up := &mcpUpstream{calls: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v0.0.1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}},
	}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return mcpText("echo"), nil })
	srv.AddTool(&mcp.Tool{Name: "admin_reset", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{
			"tenant": map[string]any{"type": "string", "x-mcp-header": "Tenant"},
		},
	}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return mcpText("reset"), nil })
	up.serve(t, srv, extEra.opts)

	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(`rules:
  - {id: e, effect: allow, tool: echo, target: "*"}
  - {id: hide, effect: deny, tool: admin_reset, target: "*"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, RulesFile: path})
	if err != nil {
		t.Fatal(err)
	}
	env := newMCPEnvWith(t, up, func(c *Config) { c.Decider = eng })

	// The agent lists the tools: admin_reset is hidden from it.
	_, _, raw := postMCP(t, env, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+mcpMeta2026+`}}`,
		"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list")
	if strings.Contains(string(raw), "admin_reset") {
		t.Fatalf("tools/list shows the hidden tool: %s", raw)
	}
	probe := func(tool, header string) string {
		body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},` + mcpMeta2026 + `}}`
		_, msg, raw := postMCP(t, env, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool, header, "x")
		if msg.Error == nil {
			return string(raw)
		}
		b, _ := json.Marshal(msg.Error)
		return string(b)
	}
	hidden := probe("admin_reset", "Mcp-Param-Tenant")
	absent := probe("no_such_tool", "Mcp-Param-Tenant")
	t.Logf("hidden tool: %s", hidden)
	t.Logf("absent tool: %s", strings.ReplaceAll(absent, "no_such_tool", "<name>"))
	if strings.ReplaceAll(absent, "no_such_tool", "admin_reset") != hidden {
		t.Errorf("a tool hidden by the tools/list filter answers otherwise than a tool that does not exist, before any decision: it exists, and has an argument %q", "tenant")
	}
}
