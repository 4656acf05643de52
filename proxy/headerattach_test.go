package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestRetryWithOtherHeaders: headers are not compared when a retry is
// matched to a parked call (clients send request IDs and trace context
// anew with every attempt). A retry that sends another header value
// attaches and gets the parked call's answer; what ran is the parked
// call's stored request, with the headers its approver was shown, once.
func TestRetryWithOtherHeaders(t *testing.T) {
	pe := newParkEnv(t, func(c *Config) { c.Hold = 50 * time.Millisecond })
	body := `{"path":"a","content":"x"}`
	res := post(t, pe.url+"/tools/Write", body, "X-Account", "staging", "Idempotency-Key", "k1", "Prefer", "respond-async")
	res.Body.Close()
	first := pe.nextParked(t)
	if _, err := pe.store.Decide(context.Background(), first.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	res = post(t, pe.url+"/tools/Write", body, "X-Account", "prod", "X-Request-Id", "attempt-2", "Idempotency-Key", "k1")
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get(headerCallID) != first.ID {
		t.Fatalf("a retry with other headers: %d as call %s, want the parked call's answer (%s)", res.StatusCode, res.Header.Get(headerCallID), first.ID)
	}
	got := pe.upstream.Requests()
	if len(got) != 1 {
		t.Fatalf("the upstream got %d calls, want one", len(got))
	}
	if h := got[0].Header; h.Get("X-Account") != "staging" || h.Get("X-Request-Id") != "" {
		t.Errorf("the upstream got X-Account %q, X-Request-Id %q; want the parked call's headers", h.Get("X-Account"), h.Get("X-Request-Id"))
	}
}
