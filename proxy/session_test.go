package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// The session tests (docs/http-api.md, MCP upstreams): an Mcp-Session-Id
// belongs to the principal that initialised it; anyone else using it gets
// 404, as for an unknown session, and the upstream sees nothing.

// Two agents with API keys of their own.
const (
	sessionKeyA = "key-of-agent-a"
	sessionKeyB = "key-of-agent-b"
)

// twoAgents makes toolgate know agent-a and agent-b, and nobody else.
func twoAgents(t *testing.T) func(*Config) {
	t.Helper()
	auth, err := identity.New(identity.Config{APIKeys: []identity.APIKey{
		{Key: sessionKeyA, Subject: "agent-a"},
		{Key: sessionKeyB, Subject: "agent-b"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.Auth = auth }
}

// sessionEras are the rows of the matrix that keep a session.
func sessionEras() []mcpEra {
	var out []mcpEra
	for _, era := range mcpEras {
		if era.session() {
			out = append(out, era)
		}
	}
	return out
}

// bearer adds an API key to every request of the SDK client.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connectAs connects a go-sdk client to toolgate's /mcp with key.
func (env *mcpEnv) connectAs(t *testing.T, key string) *mcp.ClientSession {
	t.Helper()
	tr := &http.Transport{ResponseHeaderTimeout: mcpTimeout}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(mcpCtx(t), &mcp.StreamableClientTransport{
		Endpoint:   env.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key, tr}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatalf("connecting through toolgate: %v\nupstream saw: %s", err, describeMCP(env.up.got()))
	}
	t.Cleanup(func() { _ = cs.Close() })
	if cs.ID() == "" {
		t.Fatal("no Mcp-Session-Id reached the client")
	}
	return cs
}

// sessionRequest sends one raw request to toolgate's /mcp with key and the
// session ID, and returns the status and body of the answer. A POST
// carries body; GET and DELETE carry none.
func sessionRequest(t *testing.T, env *mcpEnv, key, method, sessionID, body string) (int, string) {
	t.Helper()
	status, _, answer := sessionExchange(t, env, key, method, sessionID, body)
	return status, answer
}

// sessionExchange is sessionRequest with the answer's header.
func sessionExchange(t *testing.T, env *mcpEnv, key, method, sessionID, body string) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), mcpTimeout)
	defer cancel()
	var rd io.Reader
	if method == http.MethodPost {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, env.url+"/mcp", rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s /mcp: %v", method, err)
	}
	defer res.Body.Close()
	// A stream that was let through would not end by itself: read what
	// came with the headers only.
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return res.StatusCode, res.Header, "(an SSE stream)"
	}
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(raw)
}

// sessionProbes are the requests another agent tries in a session: a
// message (a tool call), the GET stream, and the session's end.
var sessionProbes = []struct{ method, body string }{
	{http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"from b"}}}`},
	{http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
	{http.MethodGet, ""},
	{http.MethodDelete, ""},
}

// wantUnknownSession checks a refusal of a session: 404, a JSON-RPC error
// for a message.
func wantUnknownSession(t *testing.T, what string, status int, body string) {
	t.Helper()
	if status != http.StatusNotFound {
		t.Errorf("%s: status %d body %s, want 404", what, status, body)
		return
	}
	if !strings.Contains(body, "Unknown session") {
		t.Errorf("%s: body %s, want it to say the session is unknown", what, body)
	}
}

// seenFrom is what reached the upstream from subject.
func seenFrom(env *mcpEnv, subject string) []mcpRequest {
	var out []mcpRequest
	for _, r := range env.up.got() {
		if r.Header.Get("X-Toolgate-Subject") == subject {
			out = append(out, r)
		}
	}
	return out
}

// TestMCPSessionBelongsToItsOpener: agent-b sending agent-a's session ID
// (a tool call, a notification, GET, DELETE) gets 404 and the upstream
// sees none of it; agent-a's session goes on; agent-b's own initialize
// gets a session of its own, which agent-a cannot use either.
func TestMCPSessionBelongsToItsOpener(t *testing.T) {
	for _, era := range sessionEras() {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era, twoAgents(t))
			a := env.connectAs(t, sessionKeyA)
			mcpWantResult(t, mcpCall(t, a, "echo", map[string]any{"message": "hi"}), "echo: hi")

			for _, p := range sessionProbes {
				status, body := sessionRequest(t, env, sessionKeyB, p.method, a.ID(), p.body)
				wantUnknownSession(t, "agent-b "+p.method+" in agent-a's session", status, body)
			}
			if seen := seenFrom(env, "agent-b"); len(seen) != 0 {
				t.Errorf("agent-b's requests in agent-a's session reached the upstream:%s", describeMCP(seen))
			}
			if n := env.up.invoked("echo"); n != 1 {
				t.Errorf("echo ran %d times, want once (agent-a's call)", n)
			}

			// agent-a's session is untouched: the DELETE did not end it.
			mcpWantResult(t, mcpCall(t, a, "read_file", map[string]any{"path": "README.md"}), "contents of README.md")

			b := env.connectAs(t, sessionKeyB)
			if b.ID() == a.ID() {
				t.Fatalf("agent-b's initialize got agent-a's session %s", a.ID())
			}
			mcpWantResult(t, mcpCall(t, b, "echo", map[string]any{"message": "b"}), "echo: b")
			status, body := sessionRequest(t, env, sessionKeyA, http.MethodPost, b.ID(), sessionProbes[0].body)
			wantUnknownSession(t, "agent-a in agent-b's session", status, body)
			if got := env.up.invocations(); got["echo"] != 2 || got["read_file"] != 1 {
				t.Errorf("handlers ran %v, want echo twice (a and b), read_file once", got)
			}
			for _, r := range env.up.got() {
				if s := r.Header.Get("Mcp-Session-Id"); s != "" && s != map[string]string{"agent-a": a.ID(), "agent-b": b.ID()}[r.Header.Get("X-Toolgate-Subject")] {
					t.Errorf("upstream saw %s %s from %s in session %s", r.Method, r.RPCMethod, r.Header.Get("X-Toolgate-Subject"), s)
				}
			}
		})
	}
}

// TestMCPUnknownSession: a session toolgate never bound is refused (404)
// to everyone, whether or not the upstream knows it, and nothing reaches
// the upstream; so are several session headers, or one no upstream could
// have handed out.
func TestMCPUnknownSession(t *testing.T) {
	env := newMCPEnv(t, sessionEras()[0], twoAgents(t))
	// A session opened at the upstream past toolgate: the upstream knows
	// it, toolgate does not.
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "v0.0.1"}, nil).
		Connect(mcpCtx(t), &mcp.StreamableClientTransport{Endpoint: env.up.URL + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	env.up.Reset()
	ids := []string{direct.ID(), "no-such-session", "sess ion", "s\xe9ssion", strings.Repeat("s", pending.MaxSessionIDBytes+1)}
	for _, id := range ids {
		for _, p := range sessionProbes {
			status, body := sessionRequest(t, env, sessionKeyA, p.method, id, p.body)
			wantUnknownSession(t, p.method+" with session "+strings.ToValidUTF8(id[:min(len(id), 20)], "?"), status, body)
		}
	}
	if reqs := env.up.got(); len(reqs) != 0 {
		t.Errorf("requests with unknown sessions reached the upstream:%s", describeMCP(reqs))
	}
	// Two session headers, one of them the caller's own session: which one
	// an upstream reads is its business, so neither is let through.
	a := env.connectAs(t, sessionKeyA)
	before := len(env.up.got())
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, env.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sessionKeyA)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Add("Mcp-Session-Id", a.ID())
	req.Header.Add("Mcp-Session-Id", "no-such-session")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	wantUnknownSession(t, "two session headers", res.StatusCode, string(raw))
	if reqs := env.up.got()[before:]; len(reqs) != 0 {
		t.Errorf("a request with two session headers reached the upstream:%s", describeMCP(reqs))
	}
}

// sessionStore is a memory store whose session methods can be made to
// fail.
type sessionStore struct {
	pending.Store
	failTouch, failBind bool
}

var errSessionDown = errors.New("session store down")

func (s *sessionStore) TouchSession(ctx context.Context, id, principal string, ttl time.Duration) (string, error) {
	if s.failTouch {
		return "", errSessionDown
	}
	return s.Store.TouchSession(ctx, id, principal, ttl)
}

func (s *sessionStore) BindSession(ctx context.Context, id, principal string, ttl time.Duration) (string, error) {
	if s.failBind {
		return "", errSessionDown
	}
	return s.Store.BindSession(ctx, id, principal, ttl)
}

// TestMCPSessionStoreDown: when the store cannot check a session, the
// request is refused (503) and reaches nothing; when it cannot bind a new
// one, the initialize answer is not passed on (503), so no client holds a
// session toolgate did not record.
func TestMCPSessionStoreDown(t *testing.T) {
	store := &sessionStore{Store: pending.NewMemory(pending.Options{})}
	env := newMCPEnv(t, sessionEras()[0], twoAgents(t), func(c *Config) { c.Pending = store })
	a := env.connectAs(t, sessionKeyA)
	before := len(env.up.got())

	store.failTouch = true
	status, header, body := sessionExchange(t, env, sessionKeyA, http.MethodPost, a.ID(), sessionProbes[0].body)
	if status != http.StatusServiceUnavailable || header.Get("Retry-After") != storeRetryAfter {
		t.Errorf("store down, checking a session: status %d, Retry-After %q, body %s; want 503 and %s", status, header.Get("Retry-After"), body, storeRetryAfter)
	}
	if reqs := env.up.got()[before:]; len(reqs) != 0 {
		t.Errorf("a request whose session could not be checked reached the upstream:%s", describeMCP(reqs))
	}

	store.failTouch, store.failBind = false, true
	status, header, body = sessionExchange(t, env, sessionKeyB, http.MethodPost, "",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	if status != http.StatusServiceUnavailable || strings.Contains(body, `"serverInfo"`) || header.Get("Retry-After") != storeRetryAfter {
		t.Errorf("store down, binding a session: status %d, Retry-After %q, body %s; want 503, %s and no initialize result", status, header.Get("Retry-After"), body, storeRetryAfter)
	}
}

// TestMCPSessionsCappedPerCaller: a caller past its cap of sessions gets
// 429 and no session from initialize; another caller still opens one.
func TestMCPSessionsCappedPerCaller(t *testing.T) {
	env := newMCPEnv(t, sessionEras()[0], twoAgents(t), func(c *Config) {
		c.Pending = pending.NewMemory(pending.Options{MaxSessionsPerPrincipal: 2})
	})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for i := range 2 {
		if res, _, raw := postMCP(t, env, init, "Authorization", "Bearer "+sessionKeyA); res.StatusCode != http.StatusOK || res.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("agent-a's initialize %d: status %d, body %s", i, res.StatusCode, raw)
		}
	}
	res, _, raw := postMCP(t, env, init, "Authorization", "Bearer "+sessionKeyA)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Mcp-Session-Id") != "" || res.Header.Get("Retry-After") == "" {
		t.Errorf("agent-a's third initialize: status %d, session %q, Retry-After %q, body %s, want 429 and no session",
			res.StatusCode, res.Header.Get("Mcp-Session-Id"), res.Header.Get("Retry-After"), raw)
	}
	if res, _, raw := postMCP(t, env, init, "Authorization", "Bearer "+sessionKeyB); res.StatusCode != http.StatusOK || res.Header.Get("Mcp-Session-Id") == "" {
		t.Errorf("agent-b's initialize beside agent-a at its cap: status %d, body %s", res.StatusCode, raw)
	}
}

// TestMCPSessionNotBoundWithoutStore: a toolgate without a store binds
// nothing (documented): the upstream alone keeps its sessions.
func TestMCPSessionNotBoundWithoutStore(t *testing.T) {
	env := newMCPEnv(t, sessionEras()[0], twoAgents(t), func(c *Config) { c.Pending = nil })
	a := env.connectAs(t, sessionKeyA)
	status, body := sessionRequest(t, env, sessionKeyB, http.MethodPost, a.ID(), sessionProbes[0].body)
	if status != http.StatusOK {
		t.Errorf("no store: status %d body %s, want the upstream's answer", status, body)
	}
}

// TestMCPSessionHandedOutTwice: an upstream that hands out a session ID
// already bound to another principal does not get it to the caller.
func TestMCPSessionHandedOutTwice(t *testing.T) {
	up := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Mcp-Session-Id", "the-one-session")
		w.Header().Set("Content-Type", "application/json")
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&msg)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{}}`)
	})
	u, _ := url.Parse(up.URL)
	env := newMCPEnv(t, sessionEras()[0], twoAgents(t), func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: u, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
	})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	res, _, raw := postMCP(t, env, init, "Authorization", "Bearer "+sessionKeyA)
	if res.StatusCode != http.StatusOK || res.Header.Get("Mcp-Session-Id") != "the-one-session" {
		t.Fatalf("agent-a's initialize: status %d, session %q, body %s", res.StatusCode, res.Header.Get("Mcp-Session-Id"), raw)
	}
	res, _, raw = postMCP(t, env, init, "Authorization", "Bearer "+sessionKeyB)
	if res.StatusCode != http.StatusBadGateway || res.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("agent-b's initialize answered with agent-a's session: status %d, session %q, body %s",
			res.StatusCode, res.Header.Get("Mcp-Session-Id"), raw)
	}
	// It says why, and not whose session it is.
	if !strings.Contains(string(raw), "an MCP session that cannot be yours") || strings.Contains(string(raw), "agent-a") {
		t.Errorf("agent-b's refusal says %s; want the session named as not theirs, and no owner", raw)
	}
	owner, err := env.store.SessionOwner(t.Context(), "the-one-session")
	if err != nil || owner != "key:agent-a" {
		t.Errorf("the session's owner is %q, %v; want agent-a still", owner, err)
	}
}

// TestMCPEndpointNearMisses: on an MCP upstream, a plain HTTP call the
// upstream's router may take for its MCP endpoint (mcp_path in another
// case, or with a trailing slash, dots or spaces) or one naming an MCP session is refused,
// even under a policy that allows every plain HTTP call there: its
// message would go unread and its session unchecked.
func TestMCPEndpointNearMisses(t *testing.T) {
	env := newMCPEnv(t, mcpEras[0], func(c *Config) { c.Decider = allowAll })
	send := func(path string, hdr ...string) int {
		req, _ := http.NewRequest(http.MethodGet, env.url+path, nil)
		req.Header.Set("Authorization", "Bearer agent-key")
		req.Header.Set("Accept", "text/event-stream")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, tc := range []struct {
		path string
		hdr  []string
	}{
		{"/mcp/", nil},
		{"/MCP", nil},
		{"/Mcp/", nil},
		{"/mcp.", nil},
		{"/mcp%20", nil},
		{"/MCP. ./", nil},
		{"/health", []string{"Mcp-Session-Id", "victim-session-123"}},
	} {
		before := len(env.up.Requests())
		if code := send(tc.path, tc.hdr...); code != http.StatusBadRequest {
			t.Errorf("GET %s %v: status %d, want 400", tc.path, tc.hdr, code)
		}
		if n := len(env.up.Requests()); n != before {
			t.Errorf("GET %s %v reached the upstream", tc.path, tc.hdr)
		}
	}
	// A plain call elsewhere, without a session, is the policy's to decide.
	before := len(env.up.Requests())
	send("/health")
	if n := len(env.up.Requests()); n != before+1 {
		t.Errorf("GET /health: the allowed plain call did not reach the upstream")
	}
}

// TestMCPResponsesAreResponses: a message without a method is a JSON-RPC
// response, with exactly one of result and error and no params, and one
// with a method has neither; anything else (a call with its method left
// out, read by a lenient server as a call, or a ping that carries a
// result) is refused before it reaches the upstream.
func TestMCPResponsesAreResponses(t *testing.T) {
	env := newMCPEnv(t, mcpEras[0], func(c *Config) { c.Decider = allowAll })
	for body, want := range map[string]int{
		`{"jsonrpc":"2.0","id":3,"params":{"name":"delete_file","arguments":{"path":"a"}}}`: http.StatusBadRequest,
		`{"jsonrpc":"2.0","id":3}`:                                    http.StatusBadRequest,
		`{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1}}`:     http.StatusBadRequest,
		`{"jsonrpc":"2.0","id":3,"result":{},"params":{"name":"rm"}}`: http.StatusBadRequest,
		// A request that carries a result too: an upstream that looks
		// for a response first reads the answer to its own request.
		`{"jsonrpc":"2.0","id":"srv-1","method":"ping","result":{"action":"accept"}}`:            http.StatusBadRequest,
		`{"jsonrpc":"2.0","id":"srv-1","method":"notifications/initialized","error":{"code":1}}`: http.StatusBadRequest,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no"}}`:                        http.StatusAccepted,
	} {
		before := len(env.up.Requests())
		req, _ := http.NewRequest(http.MethodPost, env.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer agent-key")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		reached := len(env.up.Requests()) != before
		if want == http.StatusBadRequest && (res.StatusCode != want || reached) {
			t.Errorf("%s: status %d, reached the upstream %v; want 400 and not", body, res.StatusCode, reached)
		}
		if want != http.StatusBadRequest && res.StatusCode == http.StatusBadRequest {
			t.Errorf("%s: refused, want it forwarded as a response", body)
		}
	}
}

// TestSessionCapBeforeInitialize: a caller at its cap of sessions gets 429
// for an initialize before it reaches the upstream. Refused only when its
// answer came back, each initialize still made the upstream open a
// session that nobody could use or end: a caller in a loop filled the
// upstream with them.
func TestSessionCapBeforeInitialize(t *testing.T) {
	const capPer, extra = 2, 20
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v0.0.1"}, nil)
	up := &mcpUpstream{calls: map[string]int{}}
	up.serve(t, srv, mcp.StreamableHTTPOptions{JSONResponse: true})
	env := newMCPEnvWith(t, up, twoAgents(t), func(c *Config) {
		c.Pending = pending.NewMemory(pending.Options{MaxSessionsPerPrincipal: capPer})
	})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	refused := 0
	for range capPer + extra {
		if res, _, _ := postMCP(t, env, init, "Authorization", "Bearer "+sessionKeyA); res.StatusCode == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused != extra {
		t.Fatalf("refused %d initializes, want %d", refused, extra)
	}
	// Nor in a batch, where the session era's first revision (no
	// Mcp-Protocol-Version header) takes one: it is refused whole.
	batch := `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}]`
	for range extra {
		if res, _, raw := postMCP(t, env, batch, "Authorization", "Bearer "+sessionKeyA); res.StatusCode != http.StatusBadRequest {
			t.Fatalf("a batched initialize past the cap: %d %s, want 400", res.StatusCode, raw)
		}
	}
	inits := 0
	for _, r := range env.up.got() {
		if r.RPCMethod == "initialize" {
			inits++
		}
	}
	live := 0
	for range srv.Sessions() {
		live++
	}
	if inits != capPer || live != capPer {
		t.Errorf("the upstream got %d initializes and holds %d sessions; want %d of each", inits, live, capPer)
	}
	// Another caller is not held back.
	if res, _, _ := postMCP(t, env, init, "Authorization", "Bearer "+sessionKeyB); res.StatusCode != http.StatusOK {
		t.Errorf("agent-b's initialize: %d", res.StatusCode)
	}
}

// TestEndedSessionsLeaveTheCap: a session its client ends (DELETE, as the
// SDK's ClientSession.Close sends) is forgotten: it no longer counts
// against its principal's cap, and its ID is unknown from then on. While
// the sessions are open, the cap holds.
func TestEndedSessionsLeaveTheCap(t *testing.T) {
	const capPer = 3
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v0.0.1"}, nil)
	up := &mcpUpstream{calls: map[string]int{}}
	up.serve(t, srv, mcp.StreamableHTTPOptions{JSONResponse: true})
	env := newMCPEnvWith(t, up, twoAgents(t), func(c *Config) {
		c.Pending = pending.NewMemory(pending.Options{MaxSessionsPerPrincipal: capPer})
	})
	initialize := func() int {
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		res, _, _ := postMCP(t, env, init, "Authorization", "Bearer "+sessionKeyA)
		return res.StatusCode
	}
	var open []*mcp.ClientSession
	for range capPer {
		open = append(open, env.connectAs(t, sessionKeyA))
	}
	if code := initialize(); code != http.StatusTooManyRequests {
		t.Fatalf("an initialize past the cap with every session open: %d, want 429", code)
	}
	ended := open[0].ID()
	for _, cs := range open {
		if err := cs.Close(); err != nil { // DELETE /mcp with its session
			t.Fatal(err)
		}
	}
	if code := initialize(); code != http.StatusOK {
		t.Fatalf("an initialize once every session was ended: %d, want 200", code)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if res, _, raw := postMCP(t, env, ping, "Authorization", "Bearer "+sessionKeyA, "Mcp-Session-Id", ended); res.StatusCode != http.StatusNotFound {
		t.Errorf("a request in an ended session: %d %s, want 404", res.StatusCode, raw)
	}
}
