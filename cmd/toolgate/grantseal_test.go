package main

import (
	"maps"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestForgedGrantAsks: whoever can write to Redis writes a remembered
// grant of their own, copying a real grant's fields and seal to another
// tool, and widens the real grant to any target: neither covers a call.
// The calls ask, the log says which grant was not believed and why, and
// toolgate_grants_seal_broken_total counts both; the real grant, as it
// was made, still covers its own call.
func TestForgedGrantAsks(t *testing.T) {
	redisAddr := testRedis(t)
	up := testkit.NewUpstream(t, nil)
	cfg := writeMechConfig(t, up.URL, mechSetup{
		rules:   grantRules,
		pending: "  store: redis\n  redis_url: redis://" + redisAddr + "\n  redis_prefix: \"" + newPrefix() + "\"\n",
	})
	a := startReplica(t, cfg)
	g := askAndRemember(t, a.proxy, a.approvals, "deploy", "alpha", "subject+tool+target", "1h")
	r := toolCall(t, a.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "deploy alpha, granted", 200, "allow")
	allowedBy(t, a, r, g.ID)

	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	keys, err := rdb.Keys(ctx, "*grant:"+g.ID).Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the grant's key: %v %v", keys, err)
	}
	base := strings.TrimSuffix(keys[0], "grant:"+g.ID)
	real, err := rdb.HGetAll(ctx, keys[0]).Result()
	if err != nil || real["sl"] == "" || real["tl"] != "deploy" || !strings.HasSuffix(real["sc"], "\x00deploy\x00=alpha") {
		t.Fatalf("the grant as stored: %q %v", real, err)
	}

	// A grant for restart: the real one's fields, seal and all, under an
	// ID and a scope of its own.
	forged := maps.Clone(real)
	forged["tl"] = "restart"
	forged["sc"] = strings.Replace(real["sc"], "\x00deploy\x00", "\x00restart\x00", 1)
	if err := rdb.HSet(ctx, base+"grant:FORGED", forged).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, base+"grantscope:"+forged["sc"], "FORGED", 0).Err(); err != nil {
		t.Fatal(err)
	}
	toolCall(t, a.proxy, "agent-key-0123456789", "restart", targetBody("alpha"), async...).want(t, "restart alpha under a forged grant", 202, "ask")
	if !strings.Contains(a.stderr.String(), "FORGED") {
		t.Errorf("no log of the forged grant:\n%s", a.stderr.String())
	}

	// The real grant widened to any target of deploy.
	anyScope := strings.TrimSuffix(real["sc"], "=alpha") + "*"
	if err := rdb.HSet(ctx, keys[0], "an", "1", "tg", "", "sc", anyScope).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, base+"grantscope:"+anyScope, g.ID, 0).Err(); err != nil {
		t.Fatal(err)
	}
	toolCall(t, a.proxy, "agent-key-0123456789", "deploy", targetBody("beta"), async...).want(t, "deploy beta under the widened grant", 202, "ask")
	if n := strings.Count(a.stderr.String(), "a grant in the store is not believed"); n != 2 {
		t.Errorf("%d warnings of a grant not believed, want 2:\n%s", n, a.stderr.String())
	}

	if got := value(t, scrape(t, a.admin), "toolgate_grants_seal_broken_total"); got != 2 {
		t.Errorf("toolgate_grants_seal_broken_total %v, want 2", got)
	}
	if n := reached(up, `"target":"beta"`) + reached(up, "restart"); n != 0 {
		t.Errorf("the upstream received %d calls the forged grants would have let through", n)
	}
	if !strings.Contains(a.stderr.String(), "does not match what it covers") {
		t.Errorf("the log does not say why:\n%s", a.stderr.String())
	}
}
