package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// retryEnv is a toolgate that asks about every call, holding 100 ms, with
// a grant key as serve derives it; send posts the same Write call with
// the headers h and answers its status and call ID.
func retryEnv(t *testing.T) (*parkEnv, func(h ...string) (int, string)) {
	t.Helper()
	pe := newParkEnv(t, func(c *Config) {
		c.Hold = 100 * time.Millisecond
		c.GrantKey = grantKeyForTests
	})
	send := func(h ...string) (int, string) {
		t.Helper()
		res := post(t, pe.url+"/tools/Write", `{"path":"a","content":"x"}`, h...)
		res.Body.Close()
		return res.StatusCode, res.Header.Get(headerCallID)
	}
	return pe, send
}

// parkApproved sends the call with the headers h, answered at once (202),
// and approves the call it parked.
func parkApproved(t *testing.T, pe *parkEnv, send func(h ...string) (int, string), h ...string) pending.Call {
	t.Helper()
	if status, _ := send(append(h, "Prefer", "respond-async")...); status != 202 {
		t.Fatalf("first call: %d", status)
	}
	first := pe.nextParked(t)
	if _, err := pe.store.Decide(context.Background(), first.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	return first
}
