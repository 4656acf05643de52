package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestEndedCallOtherHeaders: a call that finds a parked call but sends
// another value of a bound header (another X-Account) is refused with 409
// even once the parked call has ended (executed, its outcome not yet
// delivered) and the store has dropped its request: the headers are then
// compared by the digest the call's Info keeps. The call's own retry still
// gets its result, and the upstream acts once, for alice.
func TestEndedCallOtherHeaders(t *testing.T) {
	for _, storeName := range []string{"memory", "redis"} {
		for _, withKey := range []bool{false, true} {
			name := storeName + "/identical"
			if withKey {
				name = storeName + "/same Idempotency-Key"
			}
			t.Run(name, func(t *testing.T) {
				endedCallOtherHeaders(t, storeName, withKey)
			})
		}
	}
}

func endedCallOtherHeaders(t *testing.T, storeName string, withKey bool) {
	var store pending.Store = pending.NewMemory(pending.Options{})
	if storeName == "redis" {
		store = testRedisStore(t)
	}
	// The upstream answers with the account it acted for.
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Account"))
		mu.Unlock()
		io.WriteString(w, "statement of account "+r.Header.Get("X-Account"))
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	pe := newParkEnv(t, func(c *Config) {
		c.Pending = store
		c.Hold = 100 * time.Millisecond
		c.GrantKey = grantKeyForTests
		c.Upstreams[0].URL = u
	})
	pe.store = store
	ctx := context.Background()
	send := func(h ...string) (int, string, string) {
		if withKey {
			h = append(h, "Idempotency-Key", "k-1")
		}
		res := post(t, pe.url+"/tools/Write", `{"path":"a","content":"x"}`, h...)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, res.Header.Get(headerCallID), string(b)
	}
	// Alice's call parks; its agent does not wait.
	if status, _, _ := send("X-Account", "alice", "Prefer", "respond-async"); status != 202 {
		t.Fatalf("alice's call: %d", status)
	}
	first := pe.nextParked(t)
	if _, err := store.Decide(ctx, first.ID, pending.Decision{To: pending.Approved, By: "approver"}); err != nil {
		t.Fatal(err)
	}
	// Run by the sweeper: executed, its result kept for alice's retry.
	pe.server.life.SweepOnce(ctx, 0)
	if pc, err := store.Get(ctx, first.ID); err != nil || pc.State != pending.Executed || pc.Delivered {
		t.Fatalf("alice's call: %s delivered %v (%v), want executed, undelivered", pc.State, pc.Delivered, err)
	}
	// Bob's call: same arguments, another account.
	status, id, body := send("X-Account", "bob")
	if status != http.StatusConflict {
		t.Errorf("bob's call (X-Account: bob) finding alice's executed call: %d as call %s, answer %q; want 409, nothing of alice's call", status, id, body)
	}
	// Alice's own retry should still get her result.
	if status, id, body := send("X-Account", "alice"); status != 200 || id != first.ID {
		t.Errorf("alice's retry: %d as call %s, answer %q; want her call's result (200, %s)", status, id, body, first.ID)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "alice" {
		t.Errorf("the upstream acted for %q, want alice's call alone", got)
	}
}

// TestEndedCallOwnGrant: bob holds a grant of his own (bound to
// X-Account: bob). Alice's identical call, approved and executed while
// its agent was away, is undelivered: bob's call is no retry of it (other
// headers), so it runs under his grant rather than take alice's result.
func TestEndedCallOwnGrant(t *testing.T) {
	g := newGrantTest(t)
	g.grant("X-Account", "bob")
	g.env.upstream.Reset()
	ctx := context.Background()
	body := `{"path":"a.txt","content":"pay 17"}`
	status, _, aliceID, _ := g.send(body, "X-Account", "alice", "Prefer", "respond-async")
	if status != 202 {
		t.Fatalf("alice's call: %d", status)
	}
	if _, err := g.store.Decide(ctx, aliceID, pending.Decision{To: pending.Approved, By: "approver"}); err != nil {
		t.Fatal(err)
	}
	g.env.server.life.SweepOnce(ctx, 0)
	status, decision, id, got := g.send(body, "X-Account", "bob")
	if status != 200 || decision != outcomeAllow || id == aliceID {
		t.Errorf("bob's call under his own grant: %d %q as call %s (alice's is %s), answer %q; want it run under his grant", status, decision, id, aliceID, got)
	}
	reqs := g.env.upstream.Requests()
	if len(reqs) != 2 || reqs[1].Header.Get("X-Account") != "bob" {
		t.Errorf("the upstream got %d calls, want alice's then bob's", len(reqs))
	}
}
