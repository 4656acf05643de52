package main

import (
	"maps"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// TestForgedGrantAsks: whoever can write to Redis, without the approvals
// secret, tries to make a real grant cover calls nobody approved: a grant
// of their own for another tool (the real one's fields and seal copied),
// the real grant's scope keys of another tool and another caller pointed at
// it, a copy of it under another ID (which revoking it would leave), and
// the real grant widened to any target. None covers a call: each call asks,
// the log says which grant was not believed and why, and
// toolgate_grants_seal_broken_total counts each. The real grant, as it was
// made, covers its own call before and after.
func TestForgedGrantAsks(t *testing.T) {
	redisAddr := testRedis(t)
	up := testkit.NewUpstream(t, nil)
	cfg := writeMechConfig(t, up.URL, mechSetup{
		rules:   grantRules,
		pending: redisPending(redisAddr),
	})
	a := startReplica(t, cfg)
	g := askAndRemember(t, a.proxy, a.approvals, "deploy", "alpha", "subject+tool+target", "1h")
	r := toolCall(t, a.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "deploy alpha, granted", 200, "allow")
	allowedBy(t, a, r, g.ID)

	if gs := listGrants(t, a.approvals); len(gs) != 1 || gs[0].Sealed == nil || !*gs[0].Sealed {
		t.Fatalf("the real grant listed %+v, want it sealed", gs)
	}

	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	keys, err := rdb.Keys(ctx, "*grant2:"+g.ID).Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the grant's key: %v %v", keys, err)
	}
	base := strings.TrimSuffix(keys[0], "grant2:"+g.ID)
	real, err := rdb.HGetAll(ctx, keys[0]).Result()
	if err != nil || real["sl"] == "" || real["tl"] != "deploy" || real["sc"] != "key:agent-42\x00ops\x00deploy\x00=alpha" {
		t.Fatalf("the grant as stored: %q %v", real, err)
	}
	scope := func(subject, tool, target string) string { return subject + "\x00ops\x00" + tool + "\x00" + target }
	point := func(sc, id string) {
		t.Helper()
		if err := rdb.Set(ctx, base+"grantscope2:"+sc, id, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	write := func(id string, fields map[string]string) {
		t.Helper()
		if err := rdb.HSet(ctx, base+"grant2:"+id, fields).Err(); err != nil {
			t.Fatal(err)
		}
		point(fields["sc"], id)
	}
	asks := func(key, tool, target, what string) {
		t.Helper()
		toolCall(t, a.proxy, key, tool, targetBody(target), async...).want(t, what, 202, "ask")
	}

	// The real grant, untouched, lent to another tool and another caller
	// by their scope keys.
	point(scope("key:agent-42", "restart", "=alpha"), g.ID)
	asks("agent-key-0123456789", "restart", "alpha", "restart alpha under the real grant's ID")
	point(scope("key:agent-7", "deploy", "=alpha"), g.ID)
	asks("other-key-0123456789", "deploy", "alpha", "agent-7's deploy alpha under the real grant's ID")

	// A grant for restart: the real one's fields, seal and all, under an
	// ID and a scope of its own.
	forged := maps.Clone(real)
	forged["tl"], forged["sc"] = "restart", scope("key:agent-42", "restart", "=alpha")
	write(pending.NewGrantID(), forged)
	asks("agent-key-0123456789", "restart", "alpha", "restart alpha under a forged grant")

	// A copy of the real grant under another ID, which its revocation
	// would not delete, in place of it for its own scope.
	write(pending.NewGrantID(), real)
	asks("agent-key-0123456789", "deploy", "alpha", "deploy alpha under a copy of the grant")
	point(real["sc"], g.ID)
	r = toolCall(t, a.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "deploy alpha, the real grant back", 200, "allow")
	allowedBy(t, a, r, g.ID)

	// The real grant widened to any target of deploy.
	anyScope := scope("key:agent-42", "deploy", "*")
	if err := rdb.HSet(ctx, keys[0], "an", "1", "tg", "", "sc", anyScope).Err(); err != nil {
		t.Fatal(err)
	}
	point(anyScope, g.ID)
	asks("agent-key-0123456789", "deploy", "beta", "deploy beta under the widened grant")

	// The list reads the store's index of grants, which the forgeries
	// left alone: it shows the real grant, widened, as not sealed.
	if gs := listGrants(t, a.approvals); len(gs) != 1 || gs[0].ID != g.ID || gs[0].Sealed == nil || *gs[0].Sealed {
		t.Errorf("grants listed %+v, want %s alone, not sealed", gs, g.ID)
	}

	const forgeries = 5
	if got := value(t, scrape(t, a.admin), "toolgate_grants_seal_broken_total"); got != forgeries {
		t.Errorf("toolgate_grants_seal_broken_total %v, want %d", got, forgeries)
	}
	if n := strings.Count(a.stderr.String(), "a grant in the store is not believed"); n != forgeries {
		t.Errorf("%d warnings of a grant not believed, want %d:\n%s", n, forgeries, a.stderr.String())
	}
	for _, why := range []string{"does not match what it covers", "scope it does not cover"} {
		if !strings.Contains(a.stderr.String(), why) {
			t.Errorf("no warning says %q", why)
		}
	}
	for _, req := range up.Requests() {
		if req.Path != "/tools/deploy" || !strings.Contains(string(req.Body), `"alpha"`) {
			t.Errorf("the upstream received %s %s, which only a forged grant let through", req.Path, req.Body)
		}
	}
}
