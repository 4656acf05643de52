package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// cancelEnv is toolgate asking for every tools/call, in front of an MCP
// upstream that opens a session ("sess-1", "sess-2", …) on each initialize
// and answers a tools/call with tool (nil: 202), with agent-key and
// other-key; send posts one message (2025-03-26, which has batches) and
// returns the answer, its body read.
func cancelEnv(t *testing.T, hold time.Duration, tool func(http.ResponseWriter)) (up *testkit.Upstream, store pending.Store, parked chan pending.Call, send func(key, session, body string) *http.Response) {
	t.Helper()
	var sessions atomic.Int32
	up = testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(string(b), `"initialize"`):
			w.Header().Set("Mcp-Session-Id", fmt.Sprint("sess-", sessions.Add(1)))
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-03-26","capabilities":{},"serverInfo":{"name":"u","version":"1"}}}`)
		case tool != nil && strings.Contains(string(b), `"tools/call"`):
			tool(w)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	u, _ := url.Parse(up.URL)
	mem := pending.NewMemory(pending.Options{})
	parked = make(chan pending.Call, 4)
	askCalls := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		if in.MCP != nil && in.MCP.Method == "tools/call" {
			return policy.Decision{Action: policy.Ask, Reasons: []policy.Reason{{Message: "ask"}}}, nil
		}
		return policy.Decision{Action: policy.Allow}, nil
	})
	auth, err := identity.New(identity.Config{APIKeys: []identity.APIKey{
		{Key: "agent-key", Subject: "agent-42"}, {Key: "other-key", Subject: "agent-7"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	env := newTestServer(t, askCalls, func(c *Config) {
		c.Auth = auth
		c.Upstreams = []Upstream{{Name: "tools", URL: u, Protocol: "mcp", MCPPath: "/mcp"}}
		c.Pending, c.Hold, c.TTL = mem, hold, time.Minute
		c.OnPark = func(pc pending.Call) { parked <- pc }
	})
	send = func(key, session, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, env.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return &http.Response{}
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	return up, mem, parked, send
}

const (
	cancelTestCall = `{"jsonrpc":"2.0","id":201,"method":"tools/call","params":{"name":"write_note","arguments":{"path":"notes/a"}}}`
	cancelTestInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
)

func cancelOf(id string) string {
	return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"user"}}`
}

func callState(t *testing.T, store pending.Store, id string) pending.State {
	t.Helper()
	got, err := store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got.State
}

// TestMCPCancelHeld: in a session, a client's notifications/cancelled for
// a tools/call held parked cancels the call, as DELETE on its status URL
// does: the held request is answered, an approval finds nothing to run,
// and the upstream gets neither the call nor the cancel of a request it
// never received. A cancel of another request, or from another
// principal, cancels nothing; nor does one in a batch, which is refused.
func TestMCPCancelHeld(t *testing.T) {
	up, store, parked, send := cancelEnv(t, 10*time.Second, nil)
	session := send("agent-key", "", cancelTestInit).Header.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatal("no session")
	}
	held := make(chan *http.Response, 1)
	go func() { held <- send("agent-key", session, cancelTestCall) }()
	pc := <-parked
	send("agent-key", session, cancelOf("202"))
	send("agent-key", session, cancelOf(`"201"`))
	send("other-key", "", cancelOf("201"))
	if res := send("agent-key", session, "["+cancelOf("201")+"]"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("a batch cancelling the held request: %d, want 400", res.StatusCode)
	}
	if st := callState(t, store, pc.ID); st != pending.Waiting {
		t.Fatalf("after cancels of other requests the call is %s, want waiting", st)
	}
	before := len(up.Requests())
	if res := send("agent-key", session, cancelOf("201")); res.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel of the held request: %d, want 202", res.StatusCode)
	}
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the held request was not answered once its call was cancelled")
	}
	if st := callState(t, store, pc.ID); st != pending.Cancelled {
		t.Fatalf("after the client's cancel the call is %s, want cancelled", st)
	}
	if _, err := store.Decide(t.Context(), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err == nil {
		t.Error("a cancelled call was approved")
	}
	if n := len(up.Requests()); n != before {
		t.Errorf("the upstream got %d more requests after the cancel, want none", n-before)
	}
	for _, r := range up.Requests() {
		if strings.Contains(string(r.Body), "tools/call") {
			t.Errorf("the upstream got the cancelled call: %s", r.Body)
		}
	}
}

// TestMCPCancelNoSession: without a session every client of one API key
// numbers its requests alike, so a cancel is one client's of its own
// request: it goes to the upstream, and another client's parked call with
// that id stays parked.
func TestMCPCancelNoSession(t *testing.T) {
	up, store, parked, send := cancelEnv(t, 5*time.Second, nil)
	held := make(chan *http.Response, 1)
	go func() { held <- send("agent-key", "", cancelTestCall) }()
	pc := <-parked
	before := len(up.Requests())
	send("agent-key", "", cancelOf("201"))
	if st := callState(t, store, pc.ID); st != pending.Waiting || len(up.Requests()) != before+1 {
		t.Errorf("a cancel without a session: call %s, upstream got %d more requests; want waiting and the cancel forwarded", st, len(up.Requests())-before)
	}
	<-held
}

// TestMCPCancelSecondHolder: two requests with one session and JSON-RPC
// id held on one parked call (the second an identical retry): when the
// first one's hold ends, the second still cancels the call.
func TestMCPCancelSecondHolder(t *testing.T) {
	_, store, parked, send := cancelEnv(t, 2*time.Second, nil)
	session := send("agent-key", "", cancelTestInit).Header.Get("Mcp-Session-Id")
	first, second := make(chan *http.Response, 1), make(chan *http.Response, 1)
	go func() { first <- send("agent-key", session, cancelTestCall) }()
	pc := <-parked
	time.Sleep(time.Second)
	go func() { second <- send("agent-key", session, cancelTestCall) }() // attaches
	<-first
	if res := send("agent-key", session, cancelOf("201")); res.StatusCode != http.StatusAccepted || callState(t, store, pc.ID) != pending.Cancelled {
		t.Errorf("cancel while the retry is held: %d, call %s; want 202 and cancelled", res.StatusCode, callState(t, store, pc.ID))
	}
	<-second
}

// TestMCPCancelSharedCall: a call two sessions wait for (the second sent
// the identical call, which attached) is not cancelled by one of them:
// the other's client did not cancel it.
func TestMCPCancelSharedCall(t *testing.T) {
	_, store, parked, send := cancelEnv(t, 10*time.Second, nil)
	s1 := send("agent-key", "", cancelTestInit).Header.Get("Mcp-Session-Id")
	s2 := send("agent-key", "", cancelTestInit).Header.Get("Mcp-Session-Id")
	first, second := make(chan *http.Response, 1), make(chan *http.Response, 1)
	go func() { first <- send("agent-key", s1, cancelTestCall) }()
	pc := <-parked
	go func() { second <- send("agent-key", s2, strings.Replace(cancelTestCall, `"id":201`, `"id":301`, 1)) }()
	time.Sleep(500 * time.Millisecond) // the second attaches
	if res := send("agent-key", s2, cancelOf("301")); res.StatusCode != http.StatusAccepted || callState(t, store, pc.ID) != pending.Waiting {
		t.Errorf("session %s's cancel of a call %s waits for too: %d, call %s; want 202 and the call waiting", s2, s1, res.StatusCode, callState(t, store, pc.ID))
	}
	_, _ = store.Decide(t.Context(), pc.ID, pending.Decision{To: pending.Rejected, By: "alice"})
	<-first
	<-second
}

// TestMCPCancelRunningInBatch: a batch that cancels a request whose call
// was approved and runs is not refused: the cancel goes to the upstream,
// as it does alone.
func TestMCPCancelRunningInBatch(t *testing.T) {
	running, release := make(chan struct{}), make(chan struct{})
	_, store, parked, send := cancelEnv(t, 10*time.Second, func(w http.ResponseWriter) {
		close(running)
		<-release
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":201,"result":{"content":[]}}`)
	})
	session := send("agent-key", "", cancelTestInit).Header.Get("Mcp-Session-Id")
	held := make(chan *http.Response, 1)
	go func() { held <- send("agent-key", session, cancelTestCall) }()
	pc := <-parked
	if _, err := store.Decide(t.Context(), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	<-running
	defer func() { close(release); <-held }()
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}}`
	if res := send("agent-key", session, "["+cancelOf("201")+","+progress+"]"); res.StatusCode == http.StatusBadRequest {
		t.Error("a batch cancelling a call that runs was refused; alone its cancel goes to the upstream")
	}
}
