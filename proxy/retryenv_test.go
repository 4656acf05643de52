package proxy

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// grantKeyForTests stands for the key serve derives from the approvals
// secret (GrantKey): with it, a credential header's value counts too.
var grantKeyForTests = []byte("0123456789abcdef0123456789abcdef")

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

// grantTest is a toolgate that asks about every Write, with a grant key as
// serve derives it, and the memory store that keeps its calls and grants.
type grantTest struct {
	t     *testing.T
	env   *testEnv
	store *pending.MemoryStore
}

func newGrantTest(t *testing.T) *grantTest {
	t.Helper()
	store := pending.NewMemory(pending.Options{})
	env := newTestServer(t, seedEngineRules(t, "rules:\n  - {id: r3, effect: ask, tool: Write, target: \"*\"}\n"), func(c *Config) {
		c.Pending, c.Grants, c.Hold = store, store, 100*time.Millisecond
		c.GrantKey = grantKeyForTests
	})
	return &grantTest{t: t, env: env, store: store}
}

// send posts a Write call with body and the headers h as the agent, and
// answers its status, decision, call ID and body.
func (g *grantTest) send(body string, h ...string) (status int, decision, callID, answer string) {
	g.t.Helper()
	res := post(g.t, g.env.url+"/tools/Write", body, append([]string{"Authorization", "Bearer agent-key"}, h...)...)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header.Get(headerDecision), res.Header.Get(headerCallID), string(b)
}

// grant parks a call on a.txt that sends the headers h, cancels it, and
// remembers its scope as approving it would, bound to what it sent; it
// returns that call.
func (g *grantTest) grant(h ...string) pending.Call {
	g.t.Helper()
	status, _, id, _ := g.send(`{"path":"a.txt","content":"zero"}`, append(h, "Prefer", "respond-async")...)
	if status != 202 {
		g.t.Fatalf("the call a grant is made from: %d", status)
	}
	ctx := context.Background()
	p0, err := g.store.Get(ctx, id)
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.store.Cancel(ctx, p0.ID); err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.store.Grant(ctx, pending.Grant{
		Subject: p0.Principal, Upstream: p0.Upstream, Tool: p0.Tool, Target: "a.txt",
		Extras: callinfo.Decode(p0.Info).GrantExtras, Approver: "alice", CallID: p0.ID,
	}, time.Hour); err != nil {
		g.t.Fatal(err)
	}
	return p0
}

// grantFromFirstCall is a grantTest with a grant made from a call sending
// first, and a sender of later calls (status, decision, call ID).
func grantFromFirstCall(t *testing.T, first ...string) (*pending.MemoryStore, func(body string, h ...string) (int, string, string)) {
	t.Helper()
	g := newGrantTest(t)
	g.grant(first...)
	return g.store, func(body string, h ...string) (int, string, string) {
		t.Helper()
		status, decision, id, _ := g.send(body, h...)
		return status, decision, id
	}
}
