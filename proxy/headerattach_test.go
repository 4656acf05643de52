package proxy

import (
	"testing"
)

// TestRetryWithOtherHeaders: a call that finds a parked call (by its
// Idempotency-Key, or as identical) but sends other values of the headers
// approving sends (X-Account, a credential) is not its retry: it is
// refused (409), not attached and answered with the other call's outcome,
// and with a key of its own it parks as a call of its own. The usual
// headers, which clients send anew with every attempt (User-Agent,
// X-Request-Id, Sentry-Trace), do not count: such a retry attaches, and the
// parked call runs once, as it was parked.
func TestRetryWithOtherHeaders(t *testing.T) {
	pe, send := retryEnv(t)
	first := parkApproved(t, pe, send, "X-Account", "staging", "X-Api-Key", "tenant-A", "Idempotency-Key", "k1")
	for _, tc := range []struct {
		name string
		h    []string
	}{
		{"another account, the same key", []string{"X-Account", "prod", "X-Api-Key", "tenant-A", "Idempotency-Key", "k1"}},
		{"another account, no key", []string{"X-Account", "prod", "X-Api-Key", "tenant-A"}},
		{"another credential, no key", []string{"X-Account", "staging", "X-Api-Key", "tenant-B"}},
	} {
		if status, id := send(tc.h...); status != 409 {
			t.Errorf("%s: %d as call %s, want 409", tc.name, status, id)
		}
	}
	if status, id := send("X-Account", "prod", "X-Api-Key", "tenant-A", "Idempotency-Key", "k2", "Prefer", "respond-async"); status != 202 || id == first.ID {
		t.Errorf("another account with a key of its own: %d as call %s, want parked anew", status, id)
	} else if second := pe.nextParked(t); second.ID == first.ID {
		t.Errorf("parked as the first call %s", first.ID)
	}
	status, id := send("X-Account", "staging", "X-Api-Key", "tenant-A", "User-Agent", "agent/2", "X-Request-Id", "attempt-2", "Sentry-Trace", "abc-1")
	if status != 200 || id != first.ID {
		t.Errorf("a retry with other usual headers: %d as call %s, want the first call's answer (%s)", status, id, first.ID)
	}
	got := pe.upstream.Requests()
	if len(got) != 1 {
		t.Fatalf("the upstream got %d calls, want one", len(got))
	}
	if h := got[0].Header; h.Get("X-Account") != "staging" || h.Get("X-Api-Key") != "tenant-A" || h.Get("X-Request-Id") != "" {
		t.Errorf("the upstream got %v; want the parked call's headers", h)
	}
}

// TestGrantedCallWithOtherHeaders: a call covered by a grant of its own
// (bound to X-Account: prod) is not a retry of an identical parked call
// that sends X-Account: staging: it runs under its grant, as itself.
func TestGrantedCallWithOtherHeaders(t *testing.T) {
	g := newGrantTest(t)
	g.grant("X-Account", "prod") // what a grant for prod calls is bound to
	body := `{"path":"a.txt","content":"pay 17"}`
	if status, _, _, _ := g.send(body, "X-Account", "staging", "Prefer", "respond-async"); status != 202 {
		t.Fatalf("staging call: %d", status)
	}
	status, decision, _, got := g.send(body, "X-Account", "prod")
	if status != 200 || decision != outcomeAllow {
		t.Errorf("the granted prod call: %d %s %s, want it run under its grant", status, decision, got)
	}
	if reqs := g.env.upstream.Requests(); len(reqs) != 1 || reqs[0].Header.Get("X-Account") != "prod" {
		t.Errorf("the upstream got %d calls, want the prod call alone", len(reqs))
	}
}
