package proxy

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestMCPToolsListMarksMayAsk: in the filtered tools/list answer a tool
// the list phase decides ask carries "toolgate/may_ask": true in its
// _meta, beside the upstream's own _meta members; allowed tools are
// unmarked and denied ones hidden, in every era (JSON and SSE answers).
func TestMCPToolsListMarksMayAsk(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	err := os.WriteFile(rules, []byte(`rules:
  - {id: l1, effect: allow, tool: read_file, target: "*"}
  - {id: l2, effect: allow, tool: write_note, target: "*"}
  - {id: l3, effect: ask, tool: write_note, target: "notes/*", message: "notes need a look"}
  - {id: l4, effect: ask, tool: send_mail, target: "*", message: "mail needs a look"}
  - {id: l5, effect: deny, tool: delete_file, target: "*", message: "never"}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, RulesFile: rules})
	if err != nil {
		t.Fatal(err)
	}
	tools := []*mcp.Tool{
		{Name: "read_file", Meta: mcp.Meta{"vendor.example/icon": "book"}},
		{Name: "write_note", Meta: mcp.Meta{"vendor.example/icon": "pen", "vendor.example/limits": map[string]any{"max": float64(3)}}},
		{Name: "send_mail"},
		{Name: "delete_file", Meta: mcp.Meta{"vendor.example/icon": "bin"}},
	}
	want := map[string]mcp.Meta{
		"read_file":  {"vendor.example/icon": "book"},
		"write_note": {"vendor.example/icon": "pen", "vendor.example/limits": map[string]any{"max": float64(3)}, "toolgate/may_ask": true},
		"send_mail":  {"toolgate/may_ask": true},
	}
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			env := &mcpEnv{up: newListUpstream(t, era.opts, tools)}
			env.url = newTestServer(t, engine, func(c *Config) {
				c.Upstreams = []Upstream{{Name: "files", URL: env.up.url, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
				c.MaxBodyBytes = 1 << 20
				c.Pending = pending.NewMemory(pending.Options{}) // asks can be approved
			}).url
			list, err := env.connect(t, era).ListTools(mcpCtx(t), nil)
			if err != nil {
				t.Fatalf("tools/list through toolgate: %v", err)
			}
			got := map[string]mcp.Meta{}
			for _, tool := range list.Tools {
				got[tool.Name] = tool.Meta
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("listed tools' _meta (-want +got):\n%s", diff)
			}
		})
	}
}

// newListUpstream is a go-sdk MCP server at /mcp listing tools (which do
// nothing).
func newListUpstream(t *testing.T, opts mcp.StreamableHTTPOptions, tools []*mcp.Tool) *mcpUpstream {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "lister", Version: "v0.0.1"}, nil)
	for _, tool := range tools {
		mcp.AddTool(srv, tool, func(context.Context, *mcp.CallToolRequest, mcpPathArgs) (*mcp.CallToolResult, any, error) {
			return mcpText("ok"), nil, nil
		})
	}
	return serveMCPAt(t, srv, opts)
}

// serveMCPAt serves srv at /mcp of a recording upstream.
func serveMCPAt(t *testing.T, srv *mcp.Server, opts mcp.StreamableHTTPOptions) *mcpUpstream {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &opts))
	up := &mcpUpstream{calls: map[string]int{}}
	up.Upstream = testkit.NewUpstream(t, testkit.Handler(mux))
	t.Cleanup(up.CloseClientConnections)
	up.url, _ = url.Parse(up.URL)
	return up
}

// TestToolsListMarkKeepsTools: marking a tool that may ask changes its
// _meta and nothing else: the tool's other members stay as the upstream
// wrote them, _meta's members too (toolgate's key comes first); a _meta
// that is not an object is left alone, and so is an allowed tool.
func TestToolsListMarkKeepsTools(t *testing.T) {
	var server *Server
	askAskers := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		if strings.HasPrefix(in.Tool.Name, "ask_") {
			return policy.Decision{Action: policy.Ask}, nil
		}
		return policy.Decision{Action: policy.Allow}, nil
	})
	newTestServer(t, askAskers, func(c *Config) {
		c.Pending = pending.NewMemory(pending.Options{}) // an ask can be approved: marked, not hidden
		c.serverHook = func(s *Server) { server = s }
	})
	for _, tc := range []struct{ name, tool, want string }{
		{"no _meta", `{"name":"ask_a","inputSchema":{"maximum":9007199254740993},"description":"a"}`, `{"name":"ask_a","inputSchema":{"maximum":9007199254740993},"description":"a","_meta":{"toolgate/may_ask":true}}`},
		{"_meta with members", `{"_meta":{"z/k":[1,2],"a/k":{"n":9007199254740993}},"name":"ask_b"}`, `{"_meta":{"toolgate/may_ask":true,"z/k":[1,2],"a/k":{"n":9007199254740993}},"name":"ask_b"}`},
		{"empty _meta", `{"name":"ask_c","_meta":{}}`, `{"name":"ask_c","_meta":{"toolgate/may_ask":true}}`},
		{"_meta with the key", `{"name":"ask_d","_meta":{"toolgate/may_ask":false,"b/k":1}}`, `{"name":"ask_d","_meta":{"b/k":1,"toolgate/may_ask":true}}`},
		{"_meta twice", `{"name":"ask_e","_meta":"x","_meta":{"k/k":1}}`, `{"name":"ask_e","_meta":"x","_meta":{"toolgate/may_ask":true,"k/k":1}}`},
		{"_meta null", `{"name":"ask_f","_meta":null}`, `{"name":"ask_f","_meta":null}`},
		{"_meta a string", `{"name":"ask_g","_meta":"x"}`, `{"name":"ask_g","_meta":"x"}`},
		{"_meta an array", `{"name":"ask_h","_meta":[{"toolgate/may_ask":false}]}`, `{"name":"ask_h","_meta":[{"toolgate/may_ask":false}]}`},
		{"allowed", `{"name":"read","_meta":{"k/k":1}}`, `{"name":"read","_meta":{"k/k":1}}`},
	} {
		body := `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + tc.tool + `]}}`
		c := &call{id: "c", up: server.upstreams[0], input: &policy.Input{Kind: policy.KindMCP, MCP: &policy.MCP{Method: "tools/list"}}}
		b, _ := server.filterListMessage(t.Context(), []byte(body), c)
		if out := string(b); !strings.Contains(out, `"tools":[`+tc.want+`]`) {
			t.Errorf("%s: filtered answer %s, want the tool as %s", tc.name, b, tc.want)
		}
	}
}

// TestMCPStreamListFiltered: a tools/list answer on the server's GET
// stream (a stream resumed with Last-Event-ID replays the answers of
// earlier requests as the upstream first wrote them) is filtered for the
// caller, event by event, as the answer to a tools/list POST is; the
// stream's other events go on as they came.
func TestMCPStreamListFiltered(t *testing.T) {
	engine := readNotDelete(t)
	const stream = "event: prime\nid: s1_0\ndata: \n\n" +
		"id: s1_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"cacheScope\":\"public\",\"tools\":[{\"name\":\"read_file\",\"inputSchema\":{\"type\":\"object\"}},\n" +
		"data: {\"name\":\"delete_file\",\"description\":\"SECRET admin tool\",\"inputSchema\":{\"type\":\"object\"}}]}}\n\n" +
		": keep-alive\n\n" +
		"id: s1_2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"delete_file\"}}\n\n"
	var gotLastID string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotLastID = r.Header.Get("Last-Event-ID")
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	env := newTestServer(t, engine, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
	})
	req, _ := http.NewRequest(http.MethodGet, env.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer agent-key")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "s1_0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || gotLastID != "s1_0" {
		t.Fatalf("status %d, the upstream got Last-Event-ID %q\n%s", res.StatusCode, gotLastID, body)
	}
	evs := sseEvents(body)
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4 (prime, the list, the comment, the notification)\n%s", len(evs), body)
	}
	if strings.Contains(evs[1].data, "delete_file") || !strings.Contains(evs[1].data, `"read_file"`) || !slices.Contains(evs[1].other, "id: s1_1") {
		t.Errorf("the list event was not filtered for the caller: %q %q", evs[1].other, evs[1].data)
	}
	if !strings.Contains(evs[1].data, `"cacheScope":"private"`) {
		t.Errorf("a list filtered for one caller keeps a public cache scope: %s", evs[1].data)
	}
	if evs[3].data != `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"delete_file"}}` || evs[2].other[0] != ": keep-alive" {
		t.Errorf("other events changed: %+v", evs)
	}
}

// TestMCPToolsListEncoded: an agent's Accept-Encoding does not reach the
// upstream of an MCP answer toolgate reads, so a compressing upstream's
// tools/list is still filtered; one encoded anyway is refused, never
// handed on unread.
func TestMCPToolsListEncoded(t *testing.T) {
	engine := readNotDelete(t)
	const list = `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read_file","inputSchema":{"type":"object"}},{"name":"delete_file","description":"SECRET admin tool","inputSchema":{"type":"object"}}]}}`
	var always atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if always.Load() {
			w.Header().Set("Content-Encoding", "br") // not one the transport undoes
			_, _ = io.WriteString(w, list)
			return
		}
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			_, _ = io.WriteString(w, list)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, list)
		_ = zw.Close()
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	env := newTestServer(t, engine, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
	})
	ask := func() (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, env.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer agent-key")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Accept-Encoding", "gzip")
		res, err := http.DefaultTransport.RoundTrip(req) // no transparent decoding: the bytes as sent
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body io.Reader = res.Body
		if res.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		return res.StatusCode, string(b)
	}
	if status, body := ask(); status != http.StatusOK || strings.Contains(body, "delete_file") || !strings.Contains(body, "read_file") {
		t.Errorf("tools/list asked with Accept-Encoding: gzip: %d %s, want read_file alone", status, body)
	}
	always.Store(true) // an encoding toolgate cannot read: refused
	if status, body := ask(); status != http.StatusBadGateway || strings.Contains(body, "delete_file") {
		t.Errorf("a list encoded unasked: %d %s, want 502", status, body)
	}
}

// readNotDelete is the real engine with a rules table that allows
// read_file and denies delete_file: a tools/list filtered by it keeps
// read_file alone.
func readNotDelete(t *testing.T) *policy.Engine {
	t.Helper()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n  - {id: l1, effect: allow, tool: read_file, target: \"*\"}\n  - {id: l5, effect: deny, tool: delete_file, target: \"*\", message: never}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	engine, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, RulesFile: rules})
	if err != nil {
		t.Fatal(err)
	}
	return engine
}
