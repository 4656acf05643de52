package proxy

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// TestGrantReusedIdempotencyKey: a call that reuses the Idempotency-Key
// of a parked call but sends other headers (or other arguments) is
// refused (409) even when a grant of its own covers it: a key names one
// call, and the upstream, which gets the key, would otherwise see it on
// two different requests (one that deduplicates on it would answer the
// parked call with the granted call's result).
func TestGrantReusedIdempotencyKey(t *testing.T) {
	store := pending.NewMemory(pending.Options{})
	env := newTestServer(t, seedEngineRules(t, "rules:\n  - {id: r3, effect: ask, tool: Write, target: \"*\"}\n"), func(c *Config) {
		c.Pending, c.Grants, c.Hold = store, store, 100*time.Millisecond
		c.GrantKey = grantKeyForTests
	})
	ctx := context.Background()
	send := func(body string, h ...string) (int, string, string) {
		t.Helper()
		res := post(t, env.url+"/tools/Write", body, append([]string{"Authorization", "Bearer agent-key"}, h...)...)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, res.Header.Get(headerDecision), string(b)
	}
	// A grant for prod calls, from a prod call.
	if status, _, _ := send(`{"path":"a.txt","content":"zero"}`, "X-Account", "prod", "Prefer", "respond-async"); status != 202 {
		t.Fatalf("prod call: %d", status)
	}
	calls, err := store.List(ctx, pending.Waiting, 10)
	if err != nil || len(calls) != 1 {
		t.Fatalf("listed %d waiting calls, %v", len(calls), err)
	}
	p0 := calls[0]
	if _, err := store.Cancel(ctx, p0.ID); err != nil {
		t.Fatal(err)
	}
	body := `{"path":"a.txt","content":"pay 17"}`
	if status, _, _ := send(body, "X-Account", "staging", "Idempotency-Key", "K", "Prefer", "respond-async"); status != 202 {
		t.Fatalf("staging call: %d", status)
	}
	if _, err := store.Grant(ctx, pending.Grant{
		Subject: p0.Principal, Upstream: p0.Upstream, Tool: p0.Tool, Target: "a.txt",
		Extras: callinfo.Decode(p0.Info).GrantExtras, Approver: "alice", CallID: p0.ID,
	}, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Reuse with other arguments (and headers), under the grant: refused at
	// the parent commit (retryOfParked found K, ask said KeyReused).
	if status, _, _ := send(`{"path":"a.txt","content":"pay 18"}`, "X-Account", "prod", "Idempotency-Key", "K"); status != 409 {
		t.Errorf("reused key, other arguments and headers, granted: %d, want 409", status)
	}
	// Reuse with other headers, under the grant: should be refused alike.
	status, decision, got := send(body, "X-Account", "prod", "Idempotency-Key", "K")
	if status != 409 {
		t.Errorf("reused key, other headers, granted: %d %s %s, want 409 as on the ask path", status, decision, got)
	}
	// The staging call approved and retried: it runs with the same key.
	waiting, _ := store.List(ctx, pending.Waiting, 10)
	for _, w := range waiting {
		if _, err := store.Decide(ctx, w.ID, pending.Decision{To: pending.Approved, By: "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	send(body, "X-Account", "staging", "Idempotency-Key", "K")
	byKey := map[string][]string{}
	for _, r := range env.upstream.Requests() {
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			byKey[k] = append(byKey[k], r.Header.Get("X-Account"))
		}
	}
	if accts := byKey["K"]; len(accts) > 1 {
		t.Errorf("the upstream got Idempotency-Key K with %d different requests (X-Account %v)", len(accts), accts)
	}
}
