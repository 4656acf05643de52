package proxy

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/pending"
)

// TestGrantReusedIdempotencyKey: a call that reuses the Idempotency-Key
// of a parked call but sends other headers (or other arguments) is
// refused (409) even when a grant of its own covers it: a key names one
// call, and the upstream, which gets the key, would otherwise see it on
// two different requests (one that deduplicates on it would answer the
// parked call with the granted call's result).
func TestGrantReusedIdempotencyKey(t *testing.T) {
	g := newGrantTest(t)
	g.grant("X-Account", "prod") // a grant for prod calls
	ctx := context.Background()
	body := `{"path":"a.txt","content":"pay 17"}`
	if status, _, _, _ := g.send(body, "X-Account", "staging", "Idempotency-Key", "K", "Prefer", "respond-async"); status != 202 {
		t.Fatalf("staging call: %d", status)
	}
	// Reuse with other arguments (and headers), under the grant: refused at
	// the parent commit (retryOfParked found K, ask said KeyReused).
	if status, _, _, _ := g.send(`{"path":"a.txt","content":"pay 18"}`, "X-Account", "prod", "Idempotency-Key", "K"); status != 409 {
		t.Errorf("reused key, other arguments and headers, granted: %d, want 409", status)
	}
	// Reuse with other headers, under the grant: should be refused alike.
	status, decision, _, got := g.send(body, "X-Account", "prod", "Idempotency-Key", "K")
	if status != 409 {
		t.Errorf("reused key, other headers, granted: %d %s %s, want 409 as on the ask path", status, decision, got)
	}
	// The staging call approved and retried: it runs with the same key.
	waiting, _ := g.store.List(ctx, pending.Waiting, 10)
	for _, w := range waiting {
		if _, err := g.store.Decide(ctx, w.ID, pending.Decision{To: pending.Approved, By: "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	g.send(body, "X-Account", "staging", "Idempotency-Key", "K")
	byKey := map[string][]string{}
	for _, r := range g.env.upstream.Requests() {
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			byKey[k] = append(byKey[k], r.Header.Get("X-Account"))
		}
	}
	if accts := byKey["K"]; len(accts) > 1 {
		t.Errorf("the upstream got Idempotency-Key K with %d different requests (X-Account %v)", len(accts), accts)
	}
}
