package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
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
				var store pending.Store = pending.NewMemory(pending.Options{})
				if storeName == "redis" {
					store = testRedisStore(t)
				}
				send, acted := aliceExecuted(t, store, withKey)
				if status, id, body := send("X-Account", "bob"); status != http.StatusConflict {
					t.Errorf("bob's call (X-Account: bob) finding alice's executed call: %d as call %s, answer %q; want 409, nothing of alice's call", status, id, body)
				}
				if status, _, body := send("X-Account", "alice"); status != 200 || body != "statement of account alice" {
					t.Errorf("alice's retry: %d, answer %q; want her call's result", status, body)
				}
				if got := acted(); len(got) != 1 || got[0] != "alice" {
					t.Errorf("the upstream acted for %q, want alice's call alone", got)
				}
			})
		}
	}
}

// aliceExecuted parks alice's call (X-Account: alice) in store, its agent
// gone (Prefer: respond-async), has it approved and run by the sweeper:
// executed, its outcome undelivered, its stored request dropped. send
// sends the same call with the headers h (and an Idempotency-Key, when
// withKey, as alice's had), and acted says for whom the upstream acted.
func aliceExecuted(t *testing.T, store pending.Store, withKey bool) (send func(h ...string) (status int, id, body string), acted func() []string) {
	t.Helper()
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
	send = func(h ...string) (int, string, string) {
		if withKey {
			h = append(h, "Idempotency-Key", "k-1")
		}
		res := post(t, pe.url+"/tools/Write", `{"path":"a","content":"x"}`, h...)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, res.Header.Get(headerCallID), string(b)
	}
	if status, _, _ := send("X-Account", "alice", "Prefer", "respond-async"); status != 202 {
		t.Fatalf("alice's call: %d", status)
	}
	first := pe.nextParked(t)
	ctx := context.Background()
	if _, err := store.Decide(ctx, first.ID, pending.Decision{To: pending.Approved, By: "approver"}); err != nil {
		t.Fatal(err)
	}
	pe.server.life.SweepOnce(ctx, 0)
	if pc, err := store.Get(ctx, first.ID); err != nil || pc.State != pending.Executed || pc.Delivered {
		t.Fatalf("alice's call: %s delivered %v (%v), want executed, undelivered", pc.State, pc.Delivered, err)
	}
	return send, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
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
