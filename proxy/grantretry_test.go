package proxy

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestGrantRetryAttaches: a call approved "and remembered" is still
// parked when its agent retries it. The grant would let an identical call
// run at once, but the retry is the parked call's: it attaches to it and
// gets its result, and the tool runs once. Once that result is delivered,
// an identical call is a new one, and the grant lets it run.
func TestGrantRetryAttaches(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []string
	}{
		{"Idempotency-Key", []string{"Idempotency-Key", "pay-17"}},
		{"identical", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var store *pending.MemoryStore
			pe := newParkEnv(t, func(c *Config) {
				store = pending.NewMemory(pending.Options{})
				c.Pending, c.Grants = store, store
				c.Hold = 50 * time.Millisecond
			})
			pe.store = store
			ctx := context.Background()
			body := `{"path":"a.txt","content":"pay invoice 17"}`
			send := func(extra ...string) (int, string, string) {
				h := append([]string{"Authorization", "Bearer agent-key"}, tc.key...)
				res := post(t, pe.url+"/tools/Write", body, append(h, extra...)...)
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				return res.StatusCode, res.Header.Get(headerDecision), string(b)
			}
			if status, _, _ := send("Prefer", "respond-async"); status != 202 {
				t.Fatalf("first: %d", status)
			}
			first := pe.nextParked(t)
			if _, err := store.Decide(ctx, first.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Grant(ctx, pending.Grant{
				Subject: "key:agent-42", Upstream: "files", Tool: "Write", Target: "a.txt", Approver: "alice", CallID: first.ID,
			}, time.Hour); err != nil {
				t.Fatal(err)
			}
			status, decision, got := send()
			if status != 200 || decision != outcomeApproved {
				t.Errorf("retry: %d %s %s, want the parked call's answer (200, approved)", status, decision, got)
			}
			pe.server.life.SweepOnce(ctx, 0)
			if n := len(pe.upstream.Requests()); n != 1 {
				t.Fatalf("the upstream ran the call %d times, want once", n)
			}
			if pc, _ := store.Get(ctx, first.ID); pc.State != pending.Executed || !pc.Delivered {
				t.Errorf("parked call %s, delivered %v; want executed and delivered", pc.State, pc.Delivered)
			}
			// Delivered: the next identical call is a new one, which the
			// grant lets run.
			if status, decision, got := send(); status != 200 || decision != outcomeAllow {
				t.Errorf("a new identical call: %d %s %s, want it run under the grant", status, decision, got)
			}
			if n := len(pe.upstream.Requests()); n != 2 {
				t.Errorf("the upstream got %d calls, want 2", n)
			}
		})
	}
}
