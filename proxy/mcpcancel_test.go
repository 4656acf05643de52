package proxy

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// TestMCPCancelHeld: a client's notifications/cancelled for a tools/call
// held parked cancels the call, as DELETE on its status URL does: the
// held request is answered, an approval finds nothing to run, and the
// upstream gets neither the call nor the cancel of a request it never
// received. A cancel from another principal, or for another request,
// cancels nothing.
func TestMCPCancelHeld(t *testing.T) {
	up := testkit.NewUpstream(t, nil)
	u, _ := url.Parse(up.URL)
	store := pending.NewMemory(pending.Options{})
	parked := make(chan pending.Call, 1)
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
		c.Pending, c.Hold, c.TTL = store, 10*time.Second, time.Minute
		c.OnPark = func(pc pending.Call) { parked <- pc }
	})
	send := func(key, session, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, env.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	held := make(chan *http.Response, 1)
	go func() {
		held <- send("agent-key", "", `{"jsonrpc":"2.0","id":201,"method":"tools/call","params":{"name":"write_note","arguments":{"path":"notes/a"}}}`)
	}()
	pc := <-parked
	cancel := func(id string) string {
		return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"user"}}`
	}
	// Another request's cancel, and the same id from another principal, go
	// to the upstream as any notification does, and cancel nothing.
	send("agent-key", "", cancel("202"))
	send("other-key", "", cancel("201"))
	if got, _ := store.Get(t.Context(), pc.ID); got.State != pending.Waiting {
		t.Fatalf("after cancels of other requests the call is %s, want waiting", got.State)
	}
	before := len(up.Requests())
	if res := send("agent-key", "", cancel("201")); res.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel of the held request: %d, want 202", res.StatusCode)
	}
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the held request was not answered once its call was cancelled")
	}
	if got, _ := store.Get(t.Context(), pc.ID); got.State != pending.Cancelled {
		t.Fatalf("after the client's cancel the call is %s, want cancelled", got.State)
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
