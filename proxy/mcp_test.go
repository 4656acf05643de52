package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// The MCP tests (docs/http-api.md, MCP upstreams) put toolgate between a real go-sdk MCP
// client and a real go-sdk MCP server, decided by the real policy engine.
// Every SDK call runs under a 5s context so that a broken proxy fails a
// test with what was received instead of hanging it.

const mcpTimeout = 5 * time.Second

// mcpCtx is a context for one SDK call.
func mcpCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpTimeout)
	t.Cleanup(cancel)
	return ctx
}

// mcpRequest is one HTTP request as the MCP upstream saw it.
type mcpRequest struct {
	Method    string // HTTP method
	Host      string
	Header    http.Header
	RPCMethod string // the JSON-RPC method of a POSTed message ("" otherwise, "batch" for an array)
	ToolName  string // params.name of a tools/call
	Body      []byte
}

// mcpUpstream is a real go-sdk MCP server with four tools, each of which
// records that it ran, behind a recording upstream.
type mcpUpstream struct {
	*testkit.Upstream
	url *url.URL

	mu    sync.Mutex
	calls map[string]int // tool name -> times its handler ran
}

func (u *mcpUpstream) ran(tool string) {
	u.mu.Lock()
	u.calls[tool]++
	u.mu.Unlock()
}

// invoked is how many times tool's handler ran.
func (u *mcpUpstream) invoked(tool string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[tool]
}

// invocations is every tool handler's count.
func (u *mcpUpstream) invocations() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]int{}
	maps.Copy(out, u.calls)
	return out
}

// got is every request the upstream received, with the JSON-RPC method
// and tool name read from its body.
func (u *mcpUpstream) got() []mcpRequest {
	var out []mcpRequest
	for _, r := range u.Requests() {
		rec := mcpRequest{Method: r.Method, Host: r.Host, Header: r.Header, Body: r.Body}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		switch t := bytes.TrimSpace(r.Body); {
		case len(t) > 0 && t[0] == '[':
			rec.RPCMethod = "batch"
		case len(t) > 0 && json.Unmarshal(t, &msg) == nil:
			rec.RPCMethod, rec.ToolName = msg.Method, msg.Params.Name
		}
		out = append(out, rec)
	}
	return out
}

// sawToolCall reports whether a tools/call of tool reached the upstream.
func (u *mcpUpstream) sawToolCall(tool string) bool {
	for _, r := range u.got() {
		if r.RPCMethod == "tools/call" && r.ToolName == tool {
			return true
		}
	}
	return false
}

type mcpPathArgs struct {
	Path string `json:"path"`
}

type mcpNoteArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

type mcpEchoArgs struct {
	Message string `json:"message"`
}

func mcpText(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// newMCPUpstream starts the MCP tool server at /mcp with the given
// transport options.
func newMCPUpstream(t *testing.T, opts mcp.StreamableHTTPOptions) *mcpUpstream {
	t.Helper()
	up := &mcpUpstream{calls: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v0.0.1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "read_file", Description: "read a file"},
		func(_ context.Context, _ *mcp.CallToolRequest, in mcpPathArgs) (*mcp.CallToolResult, any, error) {
			up.ran("read_file")
			return mcpText("contents of " + in.Path), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "write_note", Description: "write a note"},
		func(_ context.Context, _ *mcp.CallToolRequest, in mcpNoteArgs) (*mcp.CallToolResult, any, error) {
			up.ran("write_note")
			return mcpText("wrote " + in.Path + ": " + in.Content), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "delete_file", Description: "delete a file"},
		func(_ context.Context, _ *mcp.CallToolRequest, in mcpPathArgs) (*mcp.CallToolResult, any, error) {
			up.ran("delete_file")
			return mcpText("deleted " + in.Path), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echo a message"},
		func(_ context.Context, _ *mcp.CallToolRequest, in mcpEchoArgs) (*mcp.CallToolResult, any, error) {
			up.ran("echo")
			return mcpText("echo: " + in.Message), nil, nil
		})
	up.serve(t, srv, opts)
	return up
}

// serve starts srv at /mcp with the given transport options, behind the
// recording upstream.
func (up *mcpUpstream) serve(t *testing.T, srv *mcp.Server, opts mcp.StreamableHTTPOptions) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &opts))
	up.Upstream = testkit.NewUpstream(t, testkit.Handler(mux))
	// Registered after the upstream's Close, so it runs first: open SSE
	// streams would keep Close waiting.
	t.Cleanup(up.CloseClientConnections)
	up.url, _ = url.Parse(up.URL)
}

// mcpEngine is the real policy engine with the MCP rules table.
func mcpEngine(t testing.TB) *policy.Engine {
	t.Helper()
	return mcpEngineRules(t,
		`{id: m1, effect: allow, tool: read_file, target: "*"}`,
		`{id: m2, effect: allow, tool: echo, target: "*"}`,
		`{id: m3, effect: deny, tool: read_file, target: ".env", message: "dotenv files hold secrets"}`,
		`{id: m4, effect: ask, tool: write_note, target: "notes/*", message: "notes need a look"}`,
		`{id: m5, effect: deny, tool: delete_file, target: "*", message: "deleting files is never allowed"}`,
	)
}

// mcpEngineRules is the real policy engine with the shipped library and a
// rules table of rows.
func mcpEngineRules(t testing.TB, rows ...string) *policy.Engine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("rules:\n  - "+strings.Join(rows, "\n  - ")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, RulesFile: path})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mcpEra is one row of the matrix: the upstream's transport options and the
// protocol version the client asks for ("" lets the SDK negotiate: the
// 2026-07-28 stateless revision with a stateless server, the 2025-11-25
// session era with a stateful one).
type mcpEra struct {
	name          string
	opts          mcp.StreamableHTTPOptions
	clientVersion string
	wantVersion   string
}

// session reports whether the era keeps an Mcp-Session-Id.
func (e mcpEra) session() bool { return !e.opts.Stateless }

// legacy reports whether the negotiated protocol is older than 2026-07-28
// (initialize handshake, ping, GET stream).
func (e mcpEra) legacy() bool { return e.wantVersion < "2026-07-28" }

var mcpEras = []mcpEra{
	{"session/json", mcp.StreamableHTTPOptions{JSONResponse: true}, "", "2025-11-25"},
	{"session/sse", mcp.StreamableHTTPOptions{}, "", "2025-11-25"},
	{"stateless/json", mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}, "", "2026-07-28"},
	{"stateless/sse", mcp.StreamableHTTPOptions{Stateless: true}, "", "2026-07-28"},
	// An older client against a stateless server: initialize, no session.
	{"stateless/json/client-2025-11-25", mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}, "2025-11-25", "2025-11-25"},
	{"stateless/sse/client-2025-11-25", mcp.StreamableHTTPOptions{Stateless: true}, "2025-11-25", "2025-11-25"},
}

// mcpEnv is a toolgate in front of an MCP upstream.
type mcpEnv struct {
	url    string // toolgate's proxy URL
	up     *mcpUpstream
	server *Server
	store  pending.Store
	parked chan pending.Call
}

// newMCPEnv starts the MCP upstream for era and a toolgate deciding with
// the MCP rules table, with a memory store for asks (hold 2s).
func newMCPEnv(t *testing.T, era mcpEra, mutate ...func(*Config)) *mcpEnv {
	t.Helper()
	return newMCPEnvWith(t, newMCPUpstream(t, era.opts), mutate...)
}

// newMCPEnvWith is newMCPEnv in front of up.
func newMCPEnvWith(t *testing.T, up *mcpUpstream, mutate ...func(*Config)) *mcpEnv {
	t.Helper()
	env := &mcpEnv{
		up:     up,
		store:  pending.NewMemory(pending.Options{}),
		parked: make(chan pending.Call, 16),
	}
	te := newTestServer(t, mcpEngine(t), append([]func(*Config){func(c *Config) {
		c.Upstreams = []Upstream{{
			Name: "files", URL: env.up.url, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/",
			Timeout: mcpTimeout,
		}}
		c.MaxBodyBytes = 1 << 20
		c.Pending = env.store
		c.Hold = 2 * time.Second
		c.TTL = time.Minute
		c.OnPark = func(pc pending.Call) { env.parked <- pc }
		c.serverHook = func(s *Server) { env.server = s }
	}}, mutate...)...)
	env.url = te.url
	// Registered after toolgate's own cleanup, so it runs first: cutting
	// the upstream's connections ends any stream toolgate still relays.
	t.Cleanup(env.up.CloseClientConnections)
	return env
}

// nextParked waits up to wait for the next newly parked call. Safe from
// any goroutine.
func (env *mcpEnv) nextParked(wait time.Duration) (pending.Call, bool) {
	select {
	case pc := <-env.parked:
		return pc, true
	case <-time.After(wait):
		return pending.Call{}, false
	}
}

// mcpDecided is what a background approver did.
type mcpDecided struct {
	call pending.Call
	err  error
}

// decideNext decides the next call that parks, from a goroutine (an
// approver while the agent is held). It never touches t.
func (env *mcpEnv) decideNext(state pending.State, comment string) <-chan mcpDecided {
	out := make(chan mcpDecided, 1)
	go func() {
		pc, ok := env.nextParked(mcpTimeout)
		if !ok {
			out <- mcpDecided{err: errors.New("no call was parked")}
			return
		}
		_, err := env.store.Decide(context.Background(), pc.ID, pending.Decision{To: state, By: "alice", Comment: comment})
		out <- mcpDecided{pc, err}
	}()
	return out
}

// mcpWaitDecided waits for the background approver once the held call has
// answered res: the decision must already have been made.
func mcpWaitDecided(t *testing.T, ch <-chan mcpDecided, res *mcp.CallToolResult) pending.Call {
	t.Helper()
	select {
	case d := <-ch:
		if d.err != nil {
			t.Fatalf("deciding the parked call: %v; the held call answered %s", d.err, mcpDescribe(res))
		}
		return d.call
	case <-time.After(time.Second):
		t.Fatalf("the held call answered %s before any call was parked and decided", mcpDescribe(res))
		return pending.Call{}
	}
}

// mcpBearer adds the agent's credential to every request of the SDK client.
type mcpBearer struct{ base http.RoundTripper }

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer agent-key")
	return b.base.RoundTrip(r)
}

// connect connects a go-sdk client to toolgate's /mcp as agent-42.
func (env *mcpEnv) connect(t *testing.T, era mcpEra) *mcp.ClientSession {
	t.Helper()
	return env.connectWith(t, era, nil)
}

// connectWith is connect with the client's options.
func (env *mcpEnv) connectWith(t *testing.T, era mcpEra, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	tr := &http.Transport{ResponseHeaderTimeout: mcpTimeout}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, copts)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   env.url + "/mcp",
		HTTPClient: &http.Client{Transport: mcpBearer{tr}},
		MaxRetries: -1,
	}
	var opts *mcp.ClientSessionOptions
	if era.clientVersion != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: era.clientVersion}
	}
	cs, err := client.Connect(mcpCtx(t), transport, opts)
	if err != nil {
		t.Fatalf("connecting through toolgate: %v\nupstream saw: %s", err, describeMCP(env.up.got()))
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != era.wantVersion {
		t.Fatalf("negotiated protocol %q, want %q (the matrix row would not test its era)", got, era.wantVersion)
	}
	if era.session() && cs.ID() == "" {
		t.Fatalf("no Mcp-Session-Id reached the client in the session era")
	}
	return cs
}

func describeMCP(reqs []mcpRequest) string {
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString("\n  " + r.Method + " " + r.RPCMethod)
		if r.ToolName != "" {
			b.WriteString(" " + r.ToolName)
		}
		if s := r.Header.Get("Mcp-Session-Id"); s != "" {
			b.WriteString(" session=" + s)
		}
	}
	if b.Len() == 0 {
		return "nothing"
	}
	return b.String()
}

// mcpResultText is a tool result's text content, joined.
func mcpResultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func mcpDescribe(res *mcp.CallToolResult) string {
	if res == nil {
		return "<nil result>"
	}
	b, _ := json.Marshal(res)
	return string(b)
}

// mcpCall calls a tool through the session; a protocol error is fatal.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool %s %v: protocol error %v, want a tool result", name, args, err)
	}
	if res == nil {
		t.Fatalf("CallTool %s %v: nil result", name, args)
	}
	return res
}

// mcpWantResult checks res is the tool's own successful answer.
func mcpWantResult(t *testing.T, res *mcp.CallToolResult, text string) {
	t.Helper()
	if res.IsError || mcpResultText(res) != text {
		t.Fatalf("result %s, want the tool's own %q", mcpDescribe(res), text)
	}
}

// mcpMeta is a string from a result's _meta.
func mcpMeta(res *mcp.CallToolResult, key string) string {
	s, _ := res.Meta[key].(string)
	return s
}

// mcpCheckUpstream checks what every request that reached the
// upstream carried: its own Host, no agent credential, and in the session
// era the session ID on every request after the handshake.
func mcpCheckUpstream(t *testing.T, env *mcpEnv, era mcpEra, sessionID string) {
	t.Helper()
	for _, r := range env.up.got() {
		if r.Host != env.up.url.Host {
			t.Errorf("upstream saw %s %s with Host %q, want its own %q", r.Method, r.RPCMethod, r.Host, env.up.url.Host)
		}
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the agent's credential reached the upstream on %s %s", r.Method, r.RPCMethod)
		}
		if era.session() && r.RPCMethod != "initialize" && r.RPCMethod != "server/discover" {
			if got := r.Header.Get("Mcp-Session-Id"); got != sessionID {
				t.Errorf("upstream saw %s %s with Mcp-Session-Id %q, want %q", r.Method, r.RPCMethod, got, sessionID)
			}
		}
		if !era.legacy() && r.Method == http.MethodPost {
			if v := r.Header.Get("Mcp-Protocol-Version"); v != era.wantVersion {
				t.Errorf("upstream saw %s with Mcp-Protocol-Version %q, want %q", r.RPCMethod, v, era.wantVersion)
			}
			if m := r.Header.Get("Mcp-Method"); m != r.RPCMethod {
				t.Errorf("upstream saw %s with Mcp-Method %q: the header was not passed through", r.RPCMethod, m)
			}
		}
	}
}

// TestMCPAllowedCalls: allowed tools/call messages reach the real tool
// once and the client gets the tool's own result, in every era; several
// calls in a row show the session (Mcp-Session-Id) and the upstream's own
// Host pass through.
func TestMCPAllowedCalls(t *testing.T) {
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era)
			cs := env.connect(t, era)
			mcpWantResult(t, mcpCall(t, cs, "read_file", map[string]any{"path": "README.md"}), "contents of README.md")
			if n := env.up.invoked("read_file"); n != 1 {
				t.Fatalf("read_file ran %d times, want 1", n)
			}
			mcpWantResult(t, mcpCall(t, cs, "echo", map[string]any{"message": "hi"}), "echo: hi")
			if n := env.up.invoked("echo"); n != 1 {
				t.Fatalf("echo ran %d times, want 1", n)
			}
			// Another target under the same allow row.
			mcpWantResult(t, mcpCall(t, cs, "read_file", map[string]any{"path": "src/main.go"}), "contents of src/main.go")
			if got := env.up.invocations(); got["read_file"] != 2 || got["echo"] != 1 || len(got) != 2 {
				t.Fatalf("handlers ran %v, want read_file 2, echo 1", got)
			}
			mcpCheckUpstream(t, env, era, cs.ID())
		})
	}
}

// TestMCPDeniedCalls: a denied tools/call is answered by toolgate with a
// tool result the model can re-plan from (isError, "Denied by policy" and
// the reason, toolgate's call ID and decision in _meta); the tool never
// runs and the message never reaches the upstream; the session goes on.
func TestMCPDeniedCalls(t *testing.T) {
	cases := []struct {
		tool   string
		args   map[string]any
		reason string
	}{
		{"read_file", map[string]any{"path": ".env"}, "dotenv files hold secrets"},
		{"delete_file", map[string]any{"path": "README.md"}, "deleting files is never allowed"},
		{"write_note", map[string]any{"path": "etc/passwd", "content": "x"}, policy.NoRuleMatched},
	}
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era)
			cs := env.connect(t, era)
			for _, tc := range cases {
				res := mcpCall(t, cs, tc.tool, tc.args)
				text := mcpResultText(res)
				if !res.IsError || !strings.Contains(text, "Denied by policy") || !strings.Contains(text, tc.reason) {
					t.Errorf("%s %v: result %s, want isError with \"Denied by policy\" and %q", tc.tool, tc.args, mcpDescribe(res), tc.reason)
				}
				if mcpMeta(res, "toolgate/call_id") == "" || mcpMeta(res, "toolgate/decision") != "deny" {
					t.Errorf("%s %v: _meta %v, want toolgate/call_id set and toolgate/decision \"deny\"", tc.tool, tc.args, res.Meta)
				}
				// ECOSYSTEM.md §4.1/§4.2: every 2026-07-28 result carries
				// resultType; toolgate's own results too.
				if !era.legacy() && !strings.Contains(mcpDescribe(res), `"resultType":"complete"`) {
					t.Errorf("%s %v: result %s lacks \"resultType\":\"complete\" (2026-07-28 request)", tc.tool, tc.args, mcpDescribe(res))
				}
				if n := env.up.invoked(tc.tool); n != 0 {
					t.Errorf("%s %v: the handler ran %d times, want never", tc.tool, tc.args, n)
				}
				if env.up.sawToolCall(tc.tool) {
					t.Errorf("a tools/call of %s reached the upstream:%s", tc.tool, describeMCP(env.up.got()))
				}
			}
			if got := env.up.invocations(); len(got) != 0 {
				t.Fatalf("handlers ran %v, want none", got)
			}
			// The session still works after denials.
			mcpWantResult(t, mcpCall(t, cs, "echo", map[string]any{"message": "still here"}), "echo: still here")
			mcpCheckUpstream(t, env, era, cs.ID())
		})
	}
}

// TestMCPPlumbing: the handshake (initialize or server/discover),
// notifications, ping, the GET stream, tools/list and the closing DELETE
// all work through toolgate, which allows protocol plumbing.
func TestMCPPlumbing(t *testing.T) {
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era)
			cs := env.connect(t, era)
			methods := map[string]bool{}
			gets := 0
			for _, r := range env.up.got() {
				methods[r.RPCMethod] = true
				if r.Method == http.MethodGet {
					gets++
				}
			}
			if era.legacy() {
				if !methods["initialize"] || !methods["notifications/initialized"] {
					t.Errorf("initialize and notifications/initialized should reach the upstream; it saw:%s", describeMCP(env.up.got()))
				}
				// The client opens its GET stream during Connect (a
				// stateless server answers it 405).
				if gets == 0 {
					t.Errorf("the client's GET stream did not reach the upstream; it saw:%s", describeMCP(env.up.got()))
				}
				if err := cs.Ping(mcpCtx(t), nil); err != nil {
					t.Errorf("ping through toolgate: %v", err)
				}
			} else if !methods["server/discover"] {
				t.Errorf("server/discover should reach the upstream; it saw:%s", describeMCP(env.up.got()))
			}
			list, err := cs.ListTools(mcpCtx(t), nil)
			if err != nil {
				t.Fatalf("tools/list through toolgate: %v", err)
			}
			var names []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"read_file", "echo", "write_note"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list %v lacks %s", names, want)
				}
			}
			mcpWantResult(t, mcpCall(t, cs, "echo", map[string]any{"message": "after list"}), "echo: after list")
			mcpCheckUpstream(t, env, era, cs.ID())
			if n := len(env.up.invocations()); n != 1 {
				t.Errorf("handlers ran %v, want only echo", env.up.invocations())
			}
			if era.session() {
				id := cs.ID()
				if err := cs.Close(); err != nil {
					t.Logf("closing the session: %v", err)
				}
				deleted := slices.ContainsFunc(env.up.got(), func(r mcpRequest) bool {
					return r.Method == http.MethodDelete && r.Header.Get("Mcp-Session-Id") == id
				})
				if !deleted {
					t.Errorf("the session's DELETE did not reach the upstream; it saw:%s", describeMCP(env.up.got()))
				}
			}
		})
	}
}

// TestMCPToolsListFiltered: tools/list is filtered per caller
// (docs/policy.md, the list phase): delete_file, denied by a whole-tool deny row (target "*"), can
// never run and is hidden; read_file (denied only for .env), echo and
// write_note (ask) stay listed.
func TestMCPToolsListFiltered(t *testing.T) {
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era)
			cs := env.connect(t, era)
			list, err := cs.ListTools(mcpCtx(t), nil)
			if err != nil {
				t.Fatalf("tools/list through toolgate: %v", err)
			}
			var names []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if want := []string{"echo", "read_file", "write_note"}; !slices.Equal(names, want) {
				t.Fatalf("tools/list gave %v, want %v (delete_file hidden)", names, want)
			}
		})
	}
}

// TestMCPAskApprovedWhileHeld: write_note under notes/ asks; the client is
// held, an approver approves, the client gets the tool's own result and
// the tool runs once.
func TestMCPAskApprovedWhileHeld(t *testing.T) {
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era)
			cs := env.connect(t, era)
			approver := env.decideNext(pending.Approved, "fine")
			res := mcpCall(t, cs, "write_note", map[string]any{"path": "notes/a.txt", "content": "reviewed"})
			if pc := mcpWaitDecided(t, approver, res); pc.Tool != "write_note" || pc.Upstream != "files" {
				t.Errorf("parked call for tool %q upstream %q, want write_note on files", pc.Tool, pc.Upstream)
			}
			mcpWantResult(t, res, "wrote notes/a.txt: reviewed")
			if got := env.up.invocations(); got["write_note"] != 1 || len(got) != 1 {
				t.Fatalf("handlers ran %v, want write_note once", got)
			}
			mcpCheckUpstream(t, env, era, cs.ID())
		})
	}
}

// TestMCPAskPendingThenRetry: when the hold runs out the client gets an
// isError result saying approval is pending, with the call ID; after the
// approval the same call again attaches and gets the tool's own result;
// the tool runs exactly once, and once delivered an identical call is a new
// call.
func TestMCPAskPendingThenRetry(t *testing.T) {
	args := map[string]any{"path": "notes/a.txt", "content": "later"}
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			for _, sweep := range []bool{false, true} {
				name := "retry executes"
				if sweep {
					name = "sweeper executes, retry delivers"
				}
				t.Run(name, func(t *testing.T) {
					env := newMCPEnv(t, era, func(c *Config) { c.Hold = 100 * time.Millisecond })
					cs := env.connect(t, era)
					res := mcpCall(t, cs, "write_note", args)
					pc, ok := env.nextParked(time.Second)
					if !ok {
						t.Fatalf("nothing parked; the call answered %s", mcpDescribe(res))
					}
					text := mcpResultText(res)
					low := strings.ToLower(text)
					if !res.IsError || !strings.Contains(low, "approval") || !strings.Contains(low, "pending") || !strings.Contains(text, pc.ID) {
						t.Fatalf("result %s, want isError saying approval is pending with call ID %s", mcpDescribe(res), pc.ID)
					}
					if !strings.Contains(text, "/_toolgate/calls/"+pc.ID) || !strings.Contains(low, "retry") {
						t.Errorf("pending result %q should give the status URL /_toolgate/calls/%s and ask to retry the same call", text, pc.ID)
					}
					if id := mcpMeta(res, "toolgate/call_id"); id != "" && id != pc.ID {
						t.Errorf("_meta toolgate/call_id %q, want the parked call %q", id, pc.ID)
					}
					if n := env.up.invoked("write_note"); n != 0 || env.up.sawToolCall("write_note") {
						t.Fatalf("write_note ran %d times before approval:%s", n, describeMCP(env.up.got()))
					}
					if _, err := env.store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice", Comment: ""}); err != nil {
						t.Fatal(err)
					}
					if sweep {
						env.server.life.SweepOnce(mcpCtx(t), 0)
						if n := env.up.invoked("write_note"); n != 1 {
							t.Fatalf("the sweeper ran write_note %d times, want 1:%s", n, describeMCP(env.up.got()))
						}
					}
					res = mcpCall(t, cs, "write_note", args)
					mcpWantResult(t, res, "wrote notes/a.txt: later")
					if got := env.up.invocations(); got["write_note"] != 1 || len(got) != 1 {
						t.Fatalf("handlers ran %v, want write_note exactly once", got)
					}
					select {
					case again := <-env.parked:
						t.Fatalf("the retry parked a new call %s instead of attaching to %s", again.ID, pc.ID)
					default:
					}
					// Delivered: the identical call now is a new call.
					res = mcpCall(t, cs, "write_note", args)
					next, ok := env.nextParked(time.Second)
					if !ok || next.ID == pc.ID || !res.IsError || !strings.Contains(mcpResultText(res), next.ID) {
						t.Fatalf("after delivery: parked %v (%q), result %s; want a new pending call", ok, next.ID, mcpDescribe(res))
					}
					if n := env.up.invoked("write_note"); n != 1 {
						t.Fatalf("write_note ran %d times, want 1", n)
					}
					mcpCheckUpstream(t, env, era, cs.ID())
				})
			}
		})
	}
}

// TestMCPAskRejected: an approver rejects while the client is held; the
// client gets an isError result saying so and the tool never runs.
func TestMCPAskRejected(t *testing.T) {
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era)
			cs := env.connect(t, era)
			approver := env.decideNext(pending.Rejected, "not today")
			res := mcpCall(t, cs, "write_note", map[string]any{"path": "notes/b.txt", "content": "x"})
			mcpWaitDecided(t, approver, res)
			if !res.IsError || !strings.Contains(strings.ToLower(mcpResultText(res)), "rejected") {
				t.Fatalf("result %s, want isError saying the call was rejected", mcpDescribe(res))
			}
			if d := mcpMeta(res, "toolgate/decision"); d != "rejected" {
				t.Errorf("_meta toolgate/decision %q, want rejected", d)
			}
			if mcpMeta(res, "toolgate/call_id") == "" {
				t.Errorf("_meta %v lacks toolgate/call_id", res.Meta)
			}
			if got := env.up.invocations(); len(got) != 0 || env.up.sawToolCall("write_note") {
				t.Fatalf("handlers ran %v after a rejection:%s", got, describeMCP(env.up.got()))
			}
		})
	}
}

// Raw HTTP, no SDK: what toolgate refuses on its own.

var mcpRawEra = mcpEra{"stateless/json", mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}, "", "2026-07-28"}

// mcpRPC is a JSON-RPC response as toolgate or the upstream answered it.
type mcpRPC struct {
	ID     json.RawMessage `json:"id"`
	Result map[string]any  `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// postMCP POSTs body to toolgate's /mcp with the given header pairs and
// decodes the answer as one JSON-RPC message (from JSON or SSE).
func postMCP(t *testing.T, env *mcpEnv, body string, header ...string) (*http.Response, mcpRPC, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, env.url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := (&http.Client{Timeout: mcpTimeout}).Do(req)
	if err != nil {
		t.Fatalf("POST /mcp: %v", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var msg mcpRPC
	data := raw
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				data = []byte(strings.TrimSpace(d))
			}
		}
	}
	_ = json.Unmarshal(data, &msg)
	return res, msg, raw
}

// mcpWantRPCError checks a refusal: the status, a JSON-RPC error object (with
// code, when code is not 0) and nothing reached the upstream.
func mcpWantRPCError(t *testing.T, env *mcpEnv, res *http.Response, msg mcpRPC, raw []byte, status, code int) {
	t.Helper()
	if res.StatusCode != status {
		t.Errorf("status %d, want %d: %s", res.StatusCode, status, raw)
	}
	if msg.Error == nil {
		t.Errorf("body %s is not a JSON-RPC error object", raw)
	} else if code != 0 && msg.Error.Code != code {
		t.Errorf("JSON-RPC error code %d, want %d: %s", msg.Error.Code, code, raw)
	}
	if reqs := env.up.got(); len(reqs) != 0 {
		t.Errorf("the refused message reached the upstream:%s", describeMCP(reqs))
	}
	if got := env.up.invocations(); len(got) != 0 {
		t.Errorf("handlers ran %v, want none", got)
	}
}

// mcpMeta2026 is the per-request _meta of the 2026-07-28 revision.
const mcpMeta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// TestMCPBatchRefused: a JSON-RPC batch holding a tools/call is refused
// whole with a JSON-RPC error; nothing of it reaches the upstream.
func TestMCPBatchRefused(t *testing.T) {
	env := newMCPEnv(t, mcpRawEra)
	body := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"ping"}]`
	res, msg, raw := postMCP(t, env, body)
	mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, 0)
	// Hidden behind plumbing, in either order.
	env = newMCPEnv(t, mcpRawEra)
	body = `[{"jsonrpc":"2.0","id":2,"method":"ping"},` +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"a"}}}]`
	res, msg, raw = postMCP(t, env, body)
	mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, 0)
	// An initialize opens a session its principal's cap counts before it
	// is sent (TestSessionCapBeforeInitialize), and server/discover's
	// answer is toolgate's to complete: neither rides in a batch.
	for _, member := range []string{
		`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"server/discover"}`,
	} {
		env = newMCPEnv(t, mcpRawEra)
		res, msg, raw = postMCP(t, env, `[{"jsonrpc":"2.0","id":2,"method":"ping"},`+member+`]`)
		mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcInvalidRequest)
	}
}

// TestMCPRoutingHeadersWithoutMessage: Mcp-Method and Mcp-Name mirror one
// message, which a GET, a DELETE or a batch does not hold: on them either
// header is refused (-32020), so no intermediary routes on a method or a
// tool name no policy decided. Without them the same requests go through.
func TestMCPRoutingHeadersWithoutMessage(t *testing.T) {
	batch := `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`
	for _, header := range [][]string{{"Mcp-Name", "delete_file"}, {"Mcp-Method", "tools/call"}} {
		env := newMCPEnv(t, mcpRawEra)
		res, msg, raw := postMCP(t, env, batch, header...)
		mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcHeaderMismatch)
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			req, _ := http.NewRequest(method, env.url+"/mcp", nil)
			req.Header.Set("Authorization", "Bearer agent-key")
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set(header[0], header[1])
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), header[0]) {
				t.Errorf("%s with %s: %d %s, want 400 naming the header", method, header[0], res.StatusCode, raw)
			}
		}
		if reqs := env.up.got(); len(reqs) != 0 {
			t.Errorf("%s: the upstream received%s", header[0], describeMCP(reqs))
		}
	}
	env := newMCPEnv(t, mcpRawEra)
	if res, _, raw := postMCP(t, env, batch); res.StatusCode >= 400 || len(env.up.got()) != 1 {
		t.Errorf("the batch without the headers: %d %s, reached the upstream %d times", res.StatusCode, raw, len(env.up.got()))
	}
}

// TestMCPForeignMembersRefused: a message with a member JSON-RPC does not
// define is refused: it would reach the upstream (and be parked with the
// message) while neither the policy nor an approver saw it.
func TestMCPForeignMembersRefused(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}},"acme_run_as":"root"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","x":1}`,
		`{"jsonrpc":"2.0","id":7,"result":{},"extra":true}`,
		`[{"jsonrpc":"2.0","id":2,"method":"ping","sudo":true}]`,
	} {
		env := newMCPEnv(t, mcpRawEra)
		res, msg, raw := postMCP(t, env, body, "Mcp-Protocol-Version", "2025-11-25")
		mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcInvalidRequest)
		if !strings.Contains(string(raw), "is not a JSON-RPC member") {
			t.Errorf("%s: refusal %s does not name the member", body, raw)
		}
	}
}

// TestMCPEnvelopeChecked: a message whose "jsonrpc" is not "2.0" or whose
// id is not a string, a number or null is refused, alone or in a batch:
// neither member reaches the policy or an approver, so it would be parked
// and sent unseen. The same message with a proper envelope goes through.
func TestMCPEnvelopeChecked(t *testing.T) {
	call := func(envelope string) string {
		return `{` + envelope + `,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`
	}
	for _, body := range []string{
		call(`"jsonrpc":"1.0","id":1`),
		call(`"id":1`),
		call(`"jsonrpc":2,"id":1`),
		call(`"jsonrpc":"2.0","id":{"path":"/etc/shadow"}`),
		call(`"jsonrpc":"2.0","id":["a"]`),
		call(`"jsonrpc":"2.0","id":true`),
		`[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"1.0","id":3,"method":"ping"}]`,
		`[{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}]`,
	} {
		env := newMCPEnv(t, mcpRawEra)
		res, msg, raw := postMCP(t, env, body, "Mcp-Protocol-Version", "2025-11-25")
		mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcInvalidRequest)
		if !strings.Contains(string(raw), `\"jsonrpc\" must be`) && !strings.Contains(string(raw), `\"id\" must be`) {
			t.Errorf("%s: refusal %s does not say what is wrong", body, raw)
		}
	}
	for _, id := range []string{`1`, `"one"`, `1.5`} {
		env := newMCPEnv(t, mcpRawEra)
		res, _, raw := postMCP(t, env, call(`"jsonrpc":"2.0","id":`+id), "Mcp-Protocol-Version", "2025-11-25")
		if res.StatusCode != http.StatusOK || len(env.up.got()) != 1 {
			t.Errorf("id %s: %d %s, reached the upstream %d times, want 200 and once", id, res.StatusCode, raw, len(env.up.got()))
		}
	}
}

// TestMCPLongParamsNameRefused: approvers are shown a params member's
// name up to callinfo.MaxParamName bytes; a longer one, which two members
// could share cut, is refused. One as long as that goes through.
func TestMCPLongParamsNameRefused(t *testing.T) {
	for _, n := range []int{callinfo.MaxParamName + 1, callinfo.MaxParamName} {
		env := newMCPEnv(t, mcpRawEra)
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"` + strings.Repeat("x", n) + `":1}}`
		res, msg, raw := postMCP(t, env, body, "Mcp-Protocol-Version", "2025-11-25")
		if n > callinfo.MaxParamName {
			mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcInvalidParams)
		} else if res.StatusCode != http.StatusOK || len(env.up.got()) != 1 {
			t.Errorf("a name of %d bytes: %d %s", n, res.StatusCode, raw)
		}
	}
}

// TestMCPBatchMembersAreResponses: a batch member without a method is
// held to the rule a single message is (TestMCPResponsesAreResponses): a
// response, with exactly one of result and error and no params. A batch
// with any other such member is refused whole and nothing of it reaches
// the upstream; a batch of real responses is forwarded.
func TestMCPBatchMembersAreResponses(t *testing.T) {
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for name, member := range map[string]string{
		"params and result": `{"jsonrpc":"2.0","id":5,"params":{"name":"delete_file","arguments":{"path":"a"}},"result":{}}`,
		"params alone":      `{"jsonrpc":"2.0","id":5,"params":{"name":"delete_file","arguments":{"path":"a"}}}`,
		"result and error":  `{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"x"}}`,
		"neither":           `{"jsonrpc":"2.0","id":5}`,
		"method and result": `{"jsonrpc":"2.0","id":5,"method":"notifications/cancelled","result":{}}`,
	} {
		t.Run(name, func(t *testing.T) {
			env := newMCPEnv(t, mcpRawEra, func(c *Config) { c.Decider = allowAll })
			for _, body := range []string{"[" + ping + "," + member + "]", "[" + member + "," + ping + "]"} {
				res, msg, raw := postMCP(t, env, body)
				mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcInvalidRequest)
			}
		})
	}
	t.Run("responses are forwarded", func(t *testing.T) {
		env := newMCPEnv(t, mcpRawEra, func(c *Config) { c.Decider = allowAll })
		body := `[{"jsonrpc":"2.0","id":5,"result":{}},{"jsonrpc":"2.0","id":6,"error":{"code":-32601,"message":"no"}}]`
		res, _, raw := postMCP(t, env, body)
		if res.StatusCode == http.StatusBadRequest {
			t.Fatalf("a batch of responses was refused: %s", raw)
		}
		if reqs := env.up.got(); len(reqs) != 1 || reqs[0].RPCMethod != "batch" {
			t.Errorf("upstream saw:%s, want the batch", describeMCP(reqs))
		}
	})
}

// TestMCPHeaderMismatch: in the 2026-07-28 revision Mcp-Method and
// Mcp-Name must match the body, else 400 with JSON-RPC error -32020 and
// nothing forwarded; matching headers are forwarded.
func TestMCPHeaderMismatch(t *testing.T) {
	echo := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},` + mcpMeta2026 + `}}`
	cases := []struct {
		name, body string
		header     []string
	}{
		{
			"Mcp-Method tools/call, body ping",
			`{"jsonrpc":"2.0","id":7,"method":"ping","params":{` + mcpMeta2026 + `}}`,
			[]string{"Mcp-Method", "tools/call", "Mcp-Name", "echo"},
		},
		{
			"Mcp-Method ping, body tools/call",
			echo,
			[]string{"Mcp-Method", "ping"},
		},
		{
			"Mcp-Name echo, params.name delete_file",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"README.md"},` + mcpMeta2026 + `}}`,
			[]string{"Mcp-Method", "tools/call", "Mcp-Name", "echo"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newMCPEnv(t, mcpRawEra)
			res, msg, raw := postMCP(t, env, tc.body, append([]string{"Mcp-Protocol-Version", "2026-07-28"}, tc.header...)...)
			mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, -32020)
			if string(msg.ID) != "7" {
				t.Errorf("error id %s, want the request's 7", msg.ID)
			}
		})
	}
	t.Run("matching headers are forwarded", func(t *testing.T) {
		env := newMCPEnv(t, mcpRawEra)
		res, msg, raw := postMCP(t, env, echo, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo")
		if res.StatusCode != 200 || msg.Error != nil || string(msg.ID) != "7" || !strings.Contains(string(raw), "echo: hi") {
			t.Fatalf("status %d body %s, want the tool's result for id 7", res.StatusCode, raw)
		}
		if n := env.up.invoked("echo"); n != 1 {
			t.Fatalf("echo ran %d times, want 1", n)
		}
		if r := env.up.got(); len(r) != 1 || r[0].Header.Get("Mcp-Method") != "tools/call" || r[0].Header.Get("Mcp-Name") != "echo" {
			t.Fatalf("upstream saw:%s (want Mcp-Method and Mcp-Name passed through)", describeMCP(r))
		}
	})
	t.Run("older revision without headers is forwarded", func(t *testing.T) {
		env := newMCPEnv(t, mcpRawEra)
		body := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"message":"old"}}}`
		res, msg, raw := postMCP(t, env, body)
		if res.StatusCode != 200 || msg.Error != nil || !strings.Contains(string(raw), "echo: old") {
			t.Fatalf("status %d body %s, want the tool's result", res.StatusCode, raw)
		}
		if n := env.up.invoked("echo"); n != 1 {
			t.Fatalf("echo ran %d times, want 1", n)
		}
	})
}

// TestMCPDuplicateKeys: a message with duplicate keys (in arguments or
// anywhere else) is refused with 400 before the policy or the upstream
// sees it: the policy and the tool could read different values.
func TestMCPDuplicateKeys(t *testing.T) {
	cases := map[string]string{
		"in arguments":        `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README.md","path":".env"}}}`,
		"nested in arguments": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a","o":{"k":1,"k":2}}}}`,
		"in params":           `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"delete_file","arguments":{"path":"a"}}}`,
		"at the top":          `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"a"}}}`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			env := newMCPEnv(t, mcpRawEra)
			res, msg, raw := postMCP(t, env, body)
			mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, 0)
		})
	}
}

// TestMCPHiddenCharacters: a tools/call whose target holds DEL, a C1
// control, a bidi control, an invisible format character, a tag character
// or a variation selector that selects nothing, or whose key holds DEL or
// a C1 control, is an invalid-params error naming the character; so is a
// resources/read whose URI does. Nothing reaches the upstream. An emoji
// with U+FE0F, Hebrew and Persian names and a harmless percent-escape
// reach the tool; a percent-escape of ".", "/" or "\" does not.
func TestMCPHiddenCharacters(t *testing.T) {
	call := func(args string) string {
		return `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":` + args + `}}`
	}
	cases := map[string]struct{ body, want string }{
		"DEL":                {call(`{"path":"a\u007fb"}`), `target "a\x7fb" holds the control character U+007F`},
		"C1":                 {call(`{"path":"a\u0085b"}`), `target "a\u0085b" holds the control character U+0085`},
		"C1 in a key":        {call(`{"path":"a","o":{"k\u009f":1}}`), "argument key \"k\\u009f\" holds the control character U+009F"},
		"override":           {call(`{"path":"report\u202etxt.exe"}`), "bidi control character U+202E"},
		"zero-width":         {call(`{"file":[".e\u200bnv"]}`), "invisible format character U+200B"},
		"resource URI":       {`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///a\u2067b"}}`, "bidi control character U+2067"},
		"tags":               {call(`{"path":"a.txt\udb40\udc49\udb40\udc47"}`), `target "a.txt\U000e0049\U000e0047" holds the tag character U+E0049`},
		"selector":           {call(`{"path":"report\ufe0f.txt"}`), `target "report\ufe0f.txt" holds the variation selector U+FE0F`},
		"in an array":        {call(`{"file":["ok.md","x\ufe00"]}`), "variation selector U+FE00"},
		"tag in a URI":       {`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///a\udb40\udc41"}}`, "tag character U+E0041"},
		"Mongolian selector": {call(`{"path":"report\u180b.txt"}`), `target "report\u180b.txt" holds the variation selector U+180B`},
		"encoded dots":       {call(`{"path":"notes/%2e%2e/secrets/key"}`), `holds "%2e", a percent-encoded "."`},
		"encoded twice":      {call(`{"file":["ok.md","a%252Fb"]}`), `holds "%252F", a percent-encoded "/"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := newMCPEnv(t, mcpRawEra)
			res, msg, raw := postMCP(t, env, tc.body)
			mcpWantRPCError(t, env, res, msg, raw, http.StatusBadRequest, rpcInvalidParams)
			if msg.Error != nil && !strings.Contains(msg.Error.Message, tc.want) {
				t.Errorf("message %q, want it to name %s", msg.Error.Message, tc.want)
			}
		})
	}
	t.Run("legitimate names pass", func(t *testing.T) {
		env := newMCPEnv(t, mcpRawEra)
		cs := env.connect(t, mcpRawEra)
		names := []string{"\u2764\uFE0Fnotes.md", "\u263A\uFE0E.txt", "דוח.txt", "می\u200cخواهم.txt", "\u1824\u180B\u1837.txt", "My%20Report.pdf"}
		for _, p := range names {
			mcpWantResult(t, mcpCall(t, cs, "read_file", map[string]any{"path": p}), "contents of "+p)
		}
		if n := env.up.invoked("read_file"); n != len(names) {
			t.Fatalf("read_file ran %d times, want %d", n, len(names))
		}
	})
}

// TestMCPBadToolName: a tools/call whose params.name fails the tool-name
// grammar is refused and reaches nothing.
func TestMCPBadToolName(t *testing.T) {
	names := map[string]string{
		"empty":        `""`,
		"slash":        `"a/b"`,
		"dots only":    `".."`,
		"leading dot":  `".env"`,
		"space":        `"read file"`,
		"too long":     `"` + strings.Repeat("a", 129) + `"`,
		"non-ASCII":    `"réad_file"`,
		"not a string": `42`,
		"missing":      ``,
	}
	for name, jsonName := range names {
		t.Run(name, func(t *testing.T) {
			env := newMCPEnv(t, mcpRawEra)
			params := `"arguments":{"path":"README.md"}`
			if jsonName != "" {
				params = `"name":` + jsonName + `,` + params
			}
			body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{` + params + `}}`
			res, msg, raw := postMCP(t, env, body)
			if res.StatusCode != http.StatusBadRequest && msg.Error == nil {
				t.Errorf("status %d body %s, want a refusal (400 or a JSON-RPC error)", res.StatusCode, raw)
			}
			if reqs := env.up.got(); len(reqs) != 0 {
				t.Errorf("the call reached the upstream:%s", describeMCP(reqs))
			}
			if got := env.up.invocations(); len(got) != 0 {
				t.Errorf("handlers ran %v, want none", got)
			}
		})
	}
}

// TestMCPRawPlumbing: a notification, a ping and a GET are plumbing: they
// reach the upstream and its answer comes back.
func TestMCPRawPlumbing(t *testing.T) {
	env := newMCPEnv(t, mcpRawEra)
	res, _, raw := postMCP(t, env, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if res.StatusCode != http.StatusAccepted {
		t.Errorf("notification: status %d body %s, want the upstream's 202", res.StatusCode, raw)
	}
	res, msg, raw := postMCP(t, env, `{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
	if res.StatusCode != 200 || msg.Error != nil || string(msg.ID) != `"p1"` || msg.Result == nil {
		t.Errorf("ping: status %d body %s, want the upstream's empty result", res.StatusCode, raw)
	}
	req, _ := http.NewRequest(http.MethodGet, env.url+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	get, err := (&http.Client{Timeout: mcpTimeout}).Do(req)
	if err != nil {
		t.Fatalf("GET /mcp: %v", err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET to a stateless server: status %d, want the upstream's 405", get.StatusCode)
	}
	var seen []string
	for _, r := range env.up.got() {
		seen = append(seen, r.Method+" "+r.RPCMethod)
	}
	if want := []string{"POST notifications/initialized", "POST ping", "GET "}; !slices.Equal(seen, want) {
		t.Errorf("upstream saw %q, want %q", seen, want)
	}
}

// TestListedToolsBounded: however many tools an upstream lists, toolgate
// remembers at most maxListed names; a known name is updated all the same.
func TestListedToolsBounded(t *testing.T) {
	up := &upstream{}
	ann := map[string]any{"readOnlyHint": true}
	for i := range maxListed + 50 {
		up.rememberTool("tool"+strconv.Itoa(i), listedTool{annotations: ann})
	}
	up.rememberTool("tool0", listedTool{annotations: map[string]any{"readOnlyHint": false}})
	n := 0
	up.listed.Range(func(any, any) bool { n++; return true })
	if n != maxListed || up.listedNames.Load() != maxListed {
		t.Errorf("%d names remembered (counted %d), want %d", n, up.listedNames.Load(), maxListed)
	}
	if got, _ := up.listed.Load("tool0"); got.(listedTool).annotations["readOnlyHint"] != false {
		t.Error("a known name's annotations were not updated once the bound was reached")
	}
}

// TestToolsListKeepsToolsVerbatim: a listed tool the policy keeps reaches
// the agent byte for byte (numbers in its schema are not rounded, its keys
// not reordered); one that is not an object with a string name is hidden.
func TestToolsListKeepsToolsVerbatim(t *testing.T) {
	var server *Server
	allow := deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
		return policy.Decision{Action: policy.Allow}, nil
	})
	newTestServer(t, allow, func(c *Config) { c.serverHook = func(s *Server) { server = s } })
	tool := `{"name":"Read","inputSchema":{"type":"object","properties":{"n":{"maximum":9007199254740993}}},"annotations":{"readOnlyHint":true}}`
	body := `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + tool + `,7,{"name":1},{"Name":"x"},{"name":"y","NAME":"z"}]}}`
	c := &call{id: "c", up: server.upstreams[0], input: &policy.Input{Kind: policy.KindMCP, MCP: &policy.MCP{Method: "tools/list"}}}
	b, _ := server.filterListMessage(t.Context(), []byte(body), c)
	out := string(b)
	if !strings.Contains(out, `"tools":[`+tool+`]`) {
		t.Errorf("filtered answer %s, want exactly the one valid tool, verbatim", out)
	}
}

// TestMCPNullID: a request whose id is null is refused: MCP says an id
// is never null, and the SDKs refuse one.
func TestMCPNullID(t *testing.T) {
	env := newMCPEnv(t, mcpRawEra)
	body := `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},` + mcpMeta2026 + `}}`
	res, _, raw := postMCP(t, env, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo")
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("status %d: %s, want 400", res.StatusCode, raw)
	}
	if n := env.up.invoked("echo"); n != 0 {
		t.Errorf("echo ran %d times", n)
	}
}

// TestMCPDeniedNotification: a tools/call without an id is a JSON-RPC
// notification, which is never answered with a response: denied, it gets
// a 403 problem document, not a result with a null id.
func TestMCPDeniedNotification(t *testing.T) {
	env := newMCPEnv(t, mcpRawEra)
	body := `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"a"},` + mcpMeta2026 + `}}`
	res, _, raw := postMCP(t, env, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "delete_file")
	if res.StatusCode != http.StatusForbidden || res.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("status %d %s: %s, want a 403 problem", res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	if n := env.up.invoked("delete_file"); n != 0 {
		t.Errorf("delete_file ran %d times", n)
	}
}
