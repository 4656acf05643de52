package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestRetryWithOtherHeaders: a call that sends another value of a header
// approving sends (X-Account: prod where the parked call sent staging) is
// not a retry of the parked call: it is parked as a call of its own, not
// answered with the first one's result. With the first call's
// Idempotency-Key it is a reused key (409). The usual headers, which
// clients change from call to call (User-Agent), do not count: such a
// retry attaches.
func TestRetryWithOtherHeaders(t *testing.T) {
	pe := newParkEnv(t, func(c *Config) { c.Hold = 50 * time.Millisecond })
	body := `{"path":"a","content":"x"}`
	res := post(t, pe.url+"/tools/Write", body, "X-Account", "staging", "Idempotency-Key", "k1", "User-Agent", "agent/1", "Prefer", "respond-async")
	res.Body.Close()
	first := pe.nextParked(t)
	if _, err := pe.store.Decide(context.Background(), first.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	res = post(t, pe.url+"/tools/Write", body, "X-Account", "prod", "Prefer", "respond-async")
	res.Body.Close()
	if res.StatusCode != 202 || res.Header.Get(headerCallID) == first.ID {
		t.Fatalf("X-Account: prod answered %d as call %s, want parked anew (202), not call %s", res.StatusCode, res.Header.Get(headerCallID), first.ID)
	}
	if second := pe.nextParked(t); second.ID == first.ID {
		t.Errorf("parked as %s, the first call", second.ID)
	}
	res = post(t, pe.url+"/tools/Write", body, "X-Account", "prod", "Idempotency-Key", "k1")
	res.Body.Close()
	if res.StatusCode != 409 {
		t.Errorf("X-Account: prod with the first call's Idempotency-Key: %d, want 409", res.StatusCode)
	}
	res = post(t, pe.url+"/tools/Write", body, "X-Account", "staging", "User-Agent", "agent/2")
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get(headerCallID) != first.ID {
		t.Errorf("a retry with another User-Agent: %d as call %s, want the first call's answer (%s)", res.StatusCode, res.Header.Get(headerCallID), first.ID)
	}
	for _, r := range pe.upstream.Requests() {
		if r.Header.Get("X-Account") != "staging" {
			t.Errorf("the upstream got X-Account %q", r.Header.Get("X-Account"))
		}
	}
}
