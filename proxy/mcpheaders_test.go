package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newParamUpstream is a stateless go-sdk MCP server (2026-07-28) whose
// read_file mirrors three arguments into Mcp-Param headers (x-mcp-header):
// path, count and the nested opts.region; echo mirrors none.
func newParamUpstream(t *testing.T) *mcpUpstream {
	t.Helper()
	up := &mcpUpstream{calls: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v0.0.1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"path":  map[string]any{"type": "string", "x-mcp-header": "Path"},
			"count": map[string]any{"type": "integer", "x-mcp-header": "Count"},
			"opts": map[string]any{"type": "object", "properties": map[string]any{
				"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
			}},
		},
	}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		up.ran("read_file")
		var in mcpPathArgs
		_ = json.Unmarshal(req.Params.Arguments, &in)
		return mcpText("contents of " + in.Path), nil
	})
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"message": map[string]any{"type": "string"}},
	}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		up.ran("echo")
		return mcpText("echo"), nil
	})
	up.serve(t, srv, extEra.opts)
	return up
}

// TestMCPParamHeadersSDK: the go-sdk client mirrors read_file's arguments
// into Mcp-Param headers from the listing it got through toolgate (a path
// that is not ASCII in the Base64 sentinel); toolgate lets them through to
// the upstream, which checks them too.
func TestMCPParamHeadersSDK(t *testing.T) {
	env := newMCPEnvWith(t, newParamUpstream(t))
	cs := env.connect(t, extEra)
	if _, err := cs.ListTools(mcpCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	res := mcpCall(t, cs, "read_file", map[string]any{"path": "notes/café.txt", "count": 3, "opts": map[string]any{"region": "eu-west"}})
	mcpWantResult(t, res, "contents of notes/café.txt")
	var h http.Header
	for _, r := range env.up.got() {
		if r.RPCMethod == "tools/call" {
			h = r.Header
		}
	}
	want := map[string]string{"Mcp-Param-Path": "=?base64?bm90ZXMvY2Fmw6kudHh0?=", "Mcp-Param-Count": "3", "Mcp-Param-Region": "eu-west"}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("upstream saw %s %q, want %q", k, got, v)
		}
	}

	// The same call with its path header changed on the way.
	env.up.Reset()
	h.Set("Mcp-Param-Path", "/etc/shadow")
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"notes/café.txt"},` + mcpMeta2026 + `}}`
	var pairs []string
	for _, k := range []string{"Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Mcp-Param-Path"} {
		pairs = append(pairs, k, h.Get(k))
	}
	res2, msg, raw := postMCP(t, env, body, pairs...)
	if res2.StatusCode != http.StatusBadRequest || msg.Error == nil || msg.Error.Code != rpcHeaderMismatch {
		t.Errorf("status %d body %s, want 400 and %d", res2.StatusCode, raw, rpcHeaderMismatch)
	}
	if got := env.up.got(); len(got) != 0 || env.up.invoked("read_file") != 1 {
		t.Errorf("the refused call reached the upstream:%s", describeMCP(got))
	}
}

// TestMCPParamHeaders: every Mcp-Param header must mirror, as MCP
// 2026-07-28 encodes it, the argument the tool's listed inputSchema ties it
// to; any other is refused with 400 and -32020 before the policy, and
// nothing reaches the upstream.
func TestMCPParamHeaders(t *testing.T) {
	call := func(tool, args string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + mcpMeta2026 + `}}`
	}
	note := call("read_file", `{"path":"notes/a.txt","count":3,"opts":{"region":"eu-west"}}`)
	head := func(tool string, pairs ...string) []string {
		return append([]string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool}, pairs...)
	}
	listed := func(t *testing.T) *mcpEnv {
		t.Helper()
		env := newMCPEnvWith(t, newParamUpstream(t))
		res, msg, raw := postMCP(t, env, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+mcpMeta2026+`}}`,
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list")
		if res.StatusCode != http.StatusOK || msg.Result == nil {
			t.Fatalf("tools/list: status %d body %s", res.StatusCode, raw)
		}
		env.up.Reset()
		return env
	}
	refused := []struct {
		name, body string
		header     []string
	}{
		{"a path the body does not hold", note, head("read_file", "Mcp-Param-Path", "/etc/shadow")},
		{"another path in the Base64 sentinel", note, head("read_file", "Mcp-Param-Path", "=?base64?L2V0Yy9zaGFkb3c=?=")},
		{"a sentinel that is not Base64", note, head("read_file", "Mcp-Param-Path", "=?base64?bm90ZXMvYS50eHQ?=")},
		{"a header of another case", note, head("read_file", "MCP-PARAM-PATH", "/etc/shadow")},
		{"a nested argument that differs", note, head("read_file", "Mcp-Param-Region", "us-east")},
		{"an integer that differs", note, head("read_file", "Mcp-Param-Count", "4")},
		{"an integer not in plain decimal", note, head("read_file", "Mcp-Param-Count", "+3")},
		{"a header for an absent argument", call("read_file", `{"path":"notes/a.txt"}`), head("read_file", "Mcp-Param-Region", "eu-west")},
		{"a header for a null argument", call("read_file", `{"path":"notes/a.txt","count":null}`), head("read_file", "Mcp-Param-Count", "null")},
		{"a header the schema does not declare", note, head("read_file", "Mcp-Param-Tenant", "acme")},
		{"a header for a tool that declares none", call("echo", `{"message":"hi"}`), head("echo", "Mcp-Param-Message", "hi")},
		{
			"a header on a message that is no tools/call", `{"jsonrpc":"2.0","id":7,"method":"ping","params":{` + mcpMeta2026 + `}}`,
			[]string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "ping", "Mcp-Param-Path", "notes/a.txt"},
		},
		{"an Mcp-Name in the sentinel naming another tool", note, head("=?base64?ZWNobw==?=")},
		// Look-alikes of the sentinel, the same text in the body: a router
		// that decodes without regard to case, or leniently, reads another
		// path than the one the policy saw.
		{"a sentinel in upper case", call("read_file", `{"path":"=?BASE64?L2V0Yy9zaGFkb3c=?="}`), head("read_file", "Mcp-Param-Path", "=?BASE64?L2V0Yy9zaGFkb3c=?=")},
		{"a sentinel not closed", call("read_file", `{"path":"=?base64?L2V0Yy9zaGFkb3c="}`), head("read_file", "Mcp-Param-Path", "=?base64?L2V0Yy9zaGFkb3c=")},
		// A value past printable ASCII goes in the sentinel: raw, a router
		// reads its bytes in a charset of its own, not as the body's UTF-8.
		{"a non-ASCII value sent raw, the same in the body", call("read_file", `{"path":"notes/café.txt"}`), head("read_file", "Mcp-Param-Path", "notes/café.txt")},
		{"a tab in a value sent raw, the same in the body", call("read_file", `{"path":"notes/a\tb.txt"}`), head("read_file", "Mcp-Param-Path", "notes/a\tb.txt")},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			env := listed(t)
			res, msg, raw := postMCP(t, env, tc.body, tc.header...)
			mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcHeaderMismatch)
			if string(msg.ID) != "7" {
				t.Errorf("error id %s, want the request's 7", msg.ID)
			}
		})
	}
	t.Run("a tool toolgate saw no listing of", func(t *testing.T) {
		env := newMCPEnvWith(t, newParamUpstream(t))
		res, msg, raw := postMCP(t, env, note, head("read_file", "Mcp-Param-Path", "notes/a.txt")...)
		mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcHeaderMismatch)
		if !strings.Contains(msg.Error.Message, "tools/list") {
			t.Errorf("message %q does not say to list the tools", msg.Error.Message)
		}
	})
	t.Run("on a GET", func(t *testing.T) {
		env := listed(t)
		req, _ := http.NewRequest(http.MethodGet, env.url+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Param-Path", "/etc/shadow")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || len(env.up.got()) != 0 {
			t.Errorf("status %d, upstream saw:%s; want 400 and nothing", res.StatusCode, describeMCP(env.up.got()))
		}
	})

	t.Run("matching headers are forwarded", func(t *testing.T) {
		env := listed(t)
		body := call("read_file", `{"path":" café ","count":3.0,"opts":{"region":"eu-west"}}`)
		res, _, raw := postMCP(t, env, body, head("=?base64?cmVhZF9maWxl?=",
			"Mcp-Param-Path", "=?base64?IGNhZsOpIA==?=", "Mcp-Param-Count", "3", "Mcp-Param-Region", "eu-west")...)
		// The go-sdk server compares Mcp-Name without decoding it (its
		// answer is its own); what matters is that toolgate forwarded.
		got := env.up.got()
		if len(got) != 1 || got[0].ToolName != "read_file" || got[0].Header.Get("Mcp-Param-Path") != "=?base64?IGNhZsOpIA==?=" {
			t.Fatalf("status %d body %s; upstream saw:%s, want the call with its headers", res.StatusCode, raw, describeMCP(got))
		}
	})
}

// TestMCPNameSentinel: an Mcp-Name that is not plain ASCII comes in the
// Base64 sentinel, and is decoded before it is compared with the body;
// sent raw, it is refused.
func TestMCPNameSentinel(t *testing.T) {
	env := newMCPEnvWith(t, newParamUpstream(t), func(c *Config) { c.Decider = allowAll })
	body := `{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"résumé",` + mcpMeta2026 + `}}`
	h := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "prompts/get"}
	res, _, raw := postMCP(t, env, body, append(h, "Mcp-Name", "=?base64?csOpc3Vtw6k=?=")...)
	if got := env.up.got(); len(got) != 1 || got[0].RPCMethod != "prompts/get" {
		t.Fatalf("status %d body %s; upstream saw:%s, want the prompts/get", res.StatusCode, raw, describeMCP(got))
	}
	env.up.Reset()
	res, msg, raw := postMCP(t, env, body, append(h, "Mcp-Name", "=?base64?cmVzdW1l?=")...) // "resume"
	mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcHeaderMismatch)
	// The same name sent raw: not in the form MCP sends it, refused.
	res, msg, raw = postMCP(t, env, body, append(h, "Mcp-Name", "résumé")...)
	mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcHeaderMismatch)
}

// TestParamHeaders: the x-mcp-header declarations toolgate reads of an
// inputSchema.
func TestParamHeaders(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         map[string][]string
	}{
		{"none", `{"type":"object","properties":{"a":{"type":"string"}}}`, nil},
		{"no schema", ``, nil},
		{
			"top level and nested", `{"properties":{"a":{"x-mcp-header":"A"},"o":{"properties":{"b":{"x-mcp-header":"Deep-B"}}}}}`,
			map[string][]string{"a": {"a"}, "deep-b": {"o", "b"}},
		},
		{"not through properties alone", `{"properties":{"l":{"items":{"properties":{"x":{"x-mcp-header":"X"}}}}},"$defs":{"d":{"x-mcp-header":"D"}}}`, nil},
		{"names equal but for case: none honoured", `{"properties":{"a":{"x-mcp-header":"Region"},"b":{"x-mcp-header":"region"}}}`, map[string][]string{}},
		{"a property named x-mcp-header", `{"properties":{"x-mcp-header":{"type":"string"}}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := paramHeaders(json.RawMessage(tc.schema)); !cmp.Equal(got, tc.want) {
				t.Errorf("paramHeaders(%s) = %v, want %v", tc.schema, got, tc.want)
			}
		})
	}
}
