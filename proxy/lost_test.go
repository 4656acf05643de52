package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/lifecycle"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// TestLostAnswerSaysWhatIsKnown: a call the store lost while it waited
// was sent nowhere (503, "nothing was forwarded"); one it lost once
// approved or executing may have been sent by an executor, here or on
// another replica, so the agent is told its outcome is unknown, never
// that nothing was forwarded: it would send the call again.
func TestLostAnswerSaysWhatIsKnown(t *testing.T) {
	for _, tc := range []struct {
		state   pending.State
		status  int
		outcome string
	}{
		{pending.Waiting, http.StatusServiceUnavailable, outcomeUnavailable},
		{pending.Approved, http.StatusGatewayTimeout, "unknown"},
		{pending.Executing, http.StatusGatewayTimeout, "unknown"},
	} {
		a := outcomeAnswer(lifecycle.Outcome{Kind: lifecycle.Lost, Call: pending.Call{ID: "ID", State: tc.state}}, policy.Decision{})
		forwarded := strings.Contains(a.detail, "nothing was forwarded")
		if a.status != tc.status || a.outcome != tc.outcome || forwarded != (tc.state == pending.Waiting) || a.callID != "ID" {
			t.Errorf("lost while %s: %d %s %q, want %d %s", tc.state, a.status, a.outcome, a.detail, tc.status, tc.outcome)
		}
		// An MCP tools/call learns it as a JSON-RPC message either way.
		m := &rpcResponder{msg: &mcpMessage{id: json.RawMessage("7"), isToolCall: true}}
		w := httptest.NewRecorder()
		m.render(w, a)
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(w.Body.Bytes(), &msg); err != nil || string(msg["jsonrpc"]) != `"2.0"` || string(msg["id"]) != "7" {
			t.Errorf("lost while %s, to an MCP client: HTTP %d %s %s", tc.state, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	}
}

// TestUnavailableSaysWhenToRetry: a 503 for a draining replica or a store
// that did not answer says when to come back (Retry-After), so a client
// that honours it neither hammers nor gives up.
func TestUnavailableSaysWhenToRetry(t *testing.T) {
	for _, k := range []lifecycle.Kind{lifecycle.NotParked, lifecycle.StoreFailed} {
		if a := outcomeAnswer(lifecycle.Outcome{Kind: k, Call: pending.Call{ID: "ID"}}, policy.Decision{}); a.status != http.StatusServiceUnavailable || a.retryAfter != storeRetryAfter {
			t.Errorf("%v: %d, Retry-After %q", k, a.status, a.retryAfter)
		}
	}
	env := newTestServer(t, seedEngineRules(t, "rules:\n  - {id: r, effect: allow, tool: Read, target: \"*\"}\n"))
	env.server.Drain()
	res := post(t, env.url+"/tools/Read", `{"path":"a"}`, "Authorization", "Bearer agent-key")
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" {
		t.Errorf("while draining: %d, Retry-After %q; want 503 and 1", res.StatusCode, res.Header.Get("Retry-After"))
	}
}

// TestMCPStoredAnswerWithoutRPC: an approved tools/call whose stored
// answer holds no JSON-RPC response (an upstream's error page, or the own
// result of an earlier release, which carries no own-result mark) reaches
// the MCP client as a JSON-RPC tool error, never as a body it cannot read;
// one that holds a response passes as stored.
func TestMCPStoredAnswerWithoutRPC(t *testing.T) {
	problemJSON := http.Header{"Content-Type": {"application/problem+json"}}
	for _, tc := range []struct {
		name    string
		res     pending.Result
		isError bool
	}{
		{"an earlier release's own result", pending.Result{Status: 504, Header: problemJSON, Body: []byte(`{"type":"urn:toolgate:problem:upstream-failed","status":504}`)}, true},
		{"an upstream's error page", pending.Result{Status: 502, Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte("<h1>Bad gateway</h1>")}, true},
		{"a JSON-RPC response", pending.Result{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)}, false},
	} {
		m := &rpcResponder{msg: &mcpMessage{id: json.RawMessage("7"), isToolCall: true}}
		w := httptest.NewRecorder()
		m.render(w, answer{kind: result, callID: "ID", result: tc.res})
		var msg struct {
			ID     json.RawMessage
			Result struct{ IsError bool }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &msg); err != nil || w.Code != http.StatusOK || string(msg.ID) != "7" || msg.Result.IsError != tc.isError {
			t.Errorf("%s: %d %s (%v), want a JSON-RPC response with id 7, isError %v", tc.name, w.Code, w.Body, err, tc.isError)
		}
	}
}

// TestApprovedCallCertificateRefused: an approved call to an upstream
// whose certificate does not verify was never sent (the request goes only
// over an established TLS session): it ends failed, 502 "nothing was
// sent", not unknown, and is not counted as executed.
func TestApprovedCallCertificateRefused(t *testing.T) {
	var got atomic.Int64
	tlsUp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { got.Add(1) }))
	t.Cleanup(tlsUp.Close)
	u, _ := url.Parse(tlsUp.URL)
	pe := newParkEnv(t, func(c *Config) {
		c.Upstreams[0].URL = u // the default transport: the test server's certificate is not trusted
		c.Hold = 10 * time.Millisecond
	})
	res := post(t, pe.url+"/tools/Write", `{"path":"notes/a.txt"}`, "Authorization", "Bearer agent-key", "Prefer", "respond-async")
	id := res.Header.Get(headerCallID)
	if res.StatusCode != http.StatusAccepted || id == "" {
		t.Fatalf("ask: %d", res.StatusCode)
	}
	if _, err := pe.store.Decide(context.Background(), id, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	pe.server.life.SweepOnce(context.Background(), 0)
	pc, err := pe.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if pc.State != pending.Failed || pc.Result == nil || pc.Result.Status != http.StatusBadGateway || got.Load() != 0 {
		t.Fatalf("call %s, result %+v, upstream handled %d; want failed, 502, none", pc.State, pc.Result, got.Load())
	}
}

// TestExecBudgetEndsBeforeTheLease: the exchange of a claimed call ends
// before its claim's lease, so an answer still arriving is recorded as
// truncated while the claim holds.
func TestExecBudgetEndsBeforeTheLease(t *testing.T) {
	for _, lease := range []time.Duration{32 * time.Second, 90 * time.Second, 6 * time.Second} {
		if b := execBudget(lease); b >= lease || b < lease/2 {
			t.Errorf("execBudget(%v) = %v", lease, b)
		}
	}
}

// TestLapsedClaimNotSent: an approved call is sent only while its claim's
// lease leaves room for the exchange, counted from when the claim was
// asked for (ClaimedAt), not from when the execution starts: an approval
// that claimed the call for a held request, run when that request's wait
// ends a hold later, may have outlived its lease, the call be unknown and
// a retry of it parked and run anew. Such a claim sends nothing; a fresh
// one sends.
func TestLapsedClaimNotSent(t *testing.T) {
	pe := newParkEnv(t)
	for _, c := range []struct {
		claimedAgo time.Duration
		want       pending.State
		sent       int
	}{
		{time.Hour, pending.Failed, 0},
		{0, pending.Executed, 1},
	} {
		before := len(pe.upstream.Requests())
		res := post(t, pe.url+"/tools/Write", `{"path":"notes/`+string(c.want)+`.txt"}`, "Authorization", "Bearer agent-key", "Prefer", "respond-async")
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("park: %d", res.StatusCode)
		}
		pc := pe.nextParked(t)
		ctx := context.Background()
		if _, err := pe.store.Decide(ctx, pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
			t.Fatal(err)
		}
		x := executor{pe.server}
		claimed, err := pe.store.Claim(ctx, pc.ID, x.Lease(pc))
		if err != nil {
			t.Fatal(err)
		}
		claimed.ClaimedAt = time.Now().Add(-c.claimedAgo)
		state, result := x.Execute(ctx, claimed)
		if sent := len(pe.upstream.Requests()) - before; state != c.want || sent != c.sent {
			t.Errorf("claimed %v ago: %s (%d %s), sent %d times; want %s, sent %d", c.claimedAgo, state, result.Status, result.Body, sent, c.want, c.sent)
		}
	}
}
