package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestConfirmRetryOfEndedCall: a 2026-07-28 call its requester may
// confirm parks and is answered input_required. The requester confirms on
// the page; the sweeper runs the approved call before the client's retry
// (carrying inputResponses["toolgate.confirm"] and the requestState)
// arrives. That retry is the call's own, and gets the call's result: the
// ended call is compared by its headers' digest, which the confirmation's
// answer (params) is not in.
func TestConfirmRetryOfEndedCall(t *testing.T) {
	for _, storeName := range []string{"memory", "redis"} {
		t.Run(storeName, func(t *testing.T) {
			var rs pending.Store
			if storeName == "redis" {
				rs = testRedisStore(t)
			}
			env := newMCPEnv(t, extEra, func(c *Config) {
				c.Decider = confirmEngine(t)
				c.Hold = 100 * time.Millisecond
				c.ConfirmURL = func(pc pending.Call) string { return "https://approvals.example/confirm/" + pc.ID + "?token=t" }
				if rs != nil {
					c.Pending = rs
				}
			})
			if rs != nil {
				env.store = rs
			}
			ec := &extClient{t: t, env: env, auth: true, caps: capsElicit}
			r := ec.writeNote("confirm/a")
			pc, ok := env.nextParked(time.Second)
			if !ok || r["resultType"] != "input_required" {
				t.Fatalf("first call answered %v (parked %v), want input_required", r, ok)
			}
			ctx := mcpCtx(t)
			if _, err := env.store.Decide(ctx, pc.ID, pending.Decision{To: pending.Approved, By: "requester:agent-42", Counts: []int{0}}); err != nil {
				t.Fatal(err)
			}
			env.server.life.SweepOnce(ctx, 0)
			if got, err := env.store.Get(ctx, pc.ID); err != nil || got.State != pending.Executed || got.Delivered {
				t.Fatalf("call is %s delivered %v (%v), want executed, undelivered", got.State, got.Delivered, err)
			}
			res, msg, raw := ec.post("tools/call", "write_note", `{"name":"write_note","arguments":{"path":"confirm/a","content":"hi"},"inputResponses":{"toolgate.confirm":{"action":"accept"}},"requestState":"`+pc.ID+`"}`)
			if res.StatusCode != http.StatusOK || msg.Error != nil || msg.Result == nil || resultText(msg.Result) != "wrote confirm/a: hi" {
				t.Errorf("the requester's confirmed retry of its executed call: status %d body %s; want the call's result", res.StatusCode, raw)
			}
			if n := env.up.invoked("write_note"); n != 1 {
				t.Errorf("write_note ran %d times, want 1", n)
			}
		})
	}
}

// earlierReleaseStore hands back an attached call's Info as a replica of an
// earlier release wrote it: without headers_digest. Everything else is
// the real store.
type earlierReleaseStore struct{ pending.Store }

func (s earlierReleaseStore) Park(ctx context.Context, c pending.Call, ttl time.Duration) (pending.Call, bool, error) {
	stored, attached, err := s.Store.Park(ctx, c, ttl)
	if attached && err == nil {
		var m map[string]json.RawMessage
		if json.Unmarshal(stored.Info, &m) == nil {
			delete(m, "headers_digest")
			stored.Info, _ = json.Marshal(m)
		}
	}
	return stored, attached, err
}

// TestEndedCallFromEarlierRelease: alice's call (X-Account: alice) was
// parked by an earlier release, whose Info keeps no digest of its headers;
// it was approved and executed, its outcome undelivered, its request
// dropped. Bob's call has the same arguments but no X-Account: nothing
// tells his headers from hers, so he is refused (409), as alice's own
// retry is; the upstream acted once, for alice.
func TestEndedCallFromEarlierRelease(t *testing.T) {
	for _, storeName := range []string{"memory", "redis"} {
		t.Run(storeName, func(t *testing.T) {
			var inner pending.Store = pending.NewMemory(pending.Options{})
			if storeName == "redis" {
				inner = testRedisStore(t)
			}
			send, acted := aliceExecuted(t, earlierReleaseStore{inner}, false)
			if status, id, body := send(); status != http.StatusConflict {
				t.Errorf("bob's call (no X-Account) finding alice's executed call: %d as call %s, answer %q; want 409", status, id, body)
			}
			if status, id, body := send("X-Account", "alice"); status != http.StatusConflict {
				t.Errorf("alice's retry of her call, whose headers cannot be compared: %d as call %s, answer %q; want 409", status, id, body)
			}
			if got := acted(); len(got) != 1 || got[0] != "alice" {
				t.Errorf("the upstream acted for %q, want alice alone", got)
			}
		})
	}
}

// TestRotatedSecretGrantedRetry: bob's call (X-Account: bob) parks, is
// approved and executed while its agent is away (outcome undelivered).
// The approvals secret then rotates (a new GrantKey), and a grant for the
// same scope and headers is remembered under the new key. Bob's identical
// retry may be his executed call's, whose digest the new key cannot
// judge: it asks, and is refused (409), rather than run under the grant a
// second time.
func TestRotatedSecretGrantedRetry(t *testing.T) {
	g := newGrantTest(t)
	ctx := context.Background()
	body := `{"path":"a.txt","content":"pay 17"}`
	status, _, first, _ := g.send(body, "X-Account", "bob", "Prefer", "respond-async")
	if status != 202 {
		t.Fatalf("bob's call: %d", status)
	}
	if _, err := g.store.Decide(ctx, first, pending.Decision{To: pending.Approved, By: "approver"}); err != nil {
		t.Fatal(err)
	}
	g.env.server.life.SweepOnce(ctx, 0)
	if pc, err := g.store.Get(ctx, first); err != nil || pc.State != pending.Executed || pc.Delivered {
		t.Fatalf("bob's call: %s delivered %v (%v), want executed, undelivered", pc.State, pc.Delivered, err)
	}
	// approvals.secret rotated (a replica started with the new one):
	// grants and digests are keyed anew.
	g.env.server.cfg.GrantKey = []byte("fedcba9876543210fedcba9876543210")
	g.env.server.headersKeyID = headersKeyID(g.env.server.cfg.GrantKey)
	g.grant("X-Account", "bob")
	g.env.upstream.Reset()
	status, decision, id, got := g.send(body, "X-Account", "bob")
	if n := len(g.env.upstream.Requests()); n != 0 {
		t.Errorf("bob's retry of his executed call %s: %d %q as call %s, answer %q; the upstream acted %d more time(s), want none (attach, or 409)", first, status, decision, id, got, n)
	}
}
