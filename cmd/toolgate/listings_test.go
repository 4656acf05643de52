package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestReplicasShareListings: two replicas on one Redis. An agent lists the
// tools through A and calls read_file through B with the Mcp-Param header
// its inputSchema declares (MCP 2026-07-28): B holds the header to the
// argument as A's listing told, and forwards the call; a header that
// disagrees is refused by B (-32020) and never reaches the tool server.
func TestReplicasShareListings(t *testing.T) {
	redisURL := "redis://" + testRedis(t)
	var ran atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"path": map[string]any{"type": "string", "x-mcp-header": "Path"}},
	}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ran.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents"}}}, nil
	})
	up := testkit.NewUpstream(t, testkit.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})))
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
public_url: http://approvals.invalid
upstreams:
  - {name: files, url: ` + up.URL + `, protocol: mcp, prefix: /, mcp_path: /mcp}
identity:
  api_keys: [{key: agent-key-0123456789, subject: agent-42}]
policy:
  rules_file: ./rules.yaml
pending:
  store: redis
  redis_url: ` + redisURL + `
  redis_prefix: "` + newPrefix() + `"
approvals:
  secret: ` + testSecret + `
shutdown_grace: 2s
`,
		"rules.yaml": "rules:\n  - {id: r1, effect: allow, tool: read_file, target: \"*\"}\n",
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	b := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	post := func(base, method, body string, header ...string) (int, string) {
		t.Helper()
		res, raw := agentPost(t, base+"/mcp", body, append([]string{
			"Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method,
		}, header...)...)
		return res.StatusCode, raw
	}
	if code, raw := post(a.proxy, "tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta+`}}`); code != 200 || !strings.Contains(raw, "read_file") {
		t.Fatalf("tools/list through A: %d %s", code, raw)
	}
	call := func(path string) (int, string) {
		return post(b.proxy, "tools/call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"notes/a.txt"},`+meta+`}}`,
			"Mcp-Name", "read_file", "Mcp-Param-Path", path)
	}
	if code, raw := call("notes/a.txt"); code != 200 || !strings.Contains(raw, "contents") || ran.Load() != 1 {
		t.Fatalf("tools/call through B: %d %s (the tool ran %d times), want it forwarded", code, raw, ran.Load())
	}
	code, raw := call("/etc/shadow")
	var msg struct {
		Error struct{ Code int } `json:"error"`
	}
	_ = json.Unmarshal([]byte(raw), &msg)
	if code != 400 || msg.Error.Code != -32020 || ran.Load() != 1 {
		t.Errorf("a mismatching header through B: %d %s (the tool ran %d times), want 400, -32020 and no run", code, raw, ran.Load())
	}
}
