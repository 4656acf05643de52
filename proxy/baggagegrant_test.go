package proxy

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// TestGrantBoundToBaggage: Baggage (W3C) carries application key/values
// that upstreams and meshes act on (tenant, routing keys such as
// sd-routing-key), and the approver is shown it: a grant made from a call
// that sent one Baggage does not cover a call that sends another.
func TestGrantBoundToBaggage(t *testing.T) {
	store := pending.NewMemory(pending.Options{})
	env := newTestServer(t, seedEngineRules(t, "rules:\n  - {id: r3, effect: ask, tool: Write, target: \"*\"}\n"), func(c *Config) {
		c.Pending, c.Grants, c.Hold = store, store, 100*time.Millisecond
		c.GrantKey = grantKeyForTests
	})
	ctx := context.Background()
	send := func(body string, h ...string) (int, string) {
		t.Helper()
		res := post(t, env.url+"/tools/Write", body, append([]string{"Authorization", "Bearer agent-key"}, h...)...)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, res.Header.Get(headerDecision)
	}
	if status, _ := send(`{"path":"a.txt","content":"zero"}`, "Baggage", "tenant=sandbox,sd-routing-key=sandbox-1", "Prefer", "respond-async"); status != 202 {
		t.Fatalf("first call: %d", status)
	}
	calls, err := store.List(ctx, pending.Waiting, 10)
	if err != nil || len(calls) != 1 {
		t.Fatalf("listed %d waiting calls, %v", len(calls), err)
	}
	p0 := calls[0]
	shown := false
	for _, h := range callinfo.Decode(p0.Info).Headers.List {
		shown = shown || h.Name == "Baggage" && h.Value == "tenant=sandbox,sd-routing-key=sandbox-1"
	}
	if !shown {
		t.Fatalf("the approver is not shown the Baggage")
	}
	if _, err := store.Grant(ctx, pending.Grant{
		Subject: p0.Principal, Upstream: p0.Upstream, Tool: p0.Tool, Target: "a.txt",
		Extras: callinfo.Decode(p0.Info).GrantExtras, Approver: "alice", CallID: p0.ID,
	}, time.Hour); err != nil {
		t.Fatal(err)
	}
	status, decision := send(`{"path":"a.txt","content":"one"}`, "Baggage", "tenant=prod")
	if status == 200 && decision == outcomeAllow {
		t.Errorf("a call sending Baggage tenant=prod ran under a grant approved for tenant=sandbox (upstream got %q)",
			env.upstream.Requests()[0].Header.Get("Baggage"))
	}
}

// TestBaggageRetryRefused: likewise a call sending Baggage tenant=prod
// that finds a parked call sending tenant=sandbox is refused (409), as
// X-Account: prod is, not answered with its outcome.
func TestBaggageRetryRefused(t *testing.T) {
	pe, send := retryEnv(t)
	first := parkApproved(t, pe, send, "Baggage", "tenant=sandbox")
	if status, id := send("Baggage", "tenant=prod"); status != 409 {
		t.Errorf("a call with Baggage tenant=prod that finds parked call %s (tenant=sandbox): %d as call %s, want 409", first.ID, status, id)
	}
}
