package pending

import (
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// With declared keys, a transition script names the keys it needs that
// were not declared before it writes anything, and fails outright on a key
// it would touch undeclared: what keeps a reshard from meeting a script
// half-way (redis_declare.go).
func TestRedisDeclaredKeys(t *testing.T) {
	s, other := declaredStores(t)
	ctx := t.Context()
	c := sampleCall()
	c.AttachKey = "ak-" + c.ID
	c = park(t, s, c, long)
	base := s.baseOf(c.ID)

	// The call's own keys and its shard's: the decision names the rest
	// and leaves the call waiting.
	keys := s.callKeys(base, c.ID, nil)
	v, err := s.run(ctx, fromWaitingScript, base, keys, c.ID, string(Approved), "alice", "", nonce(), int64(0), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"declare", base + "parked:" + c.Principal, base + "ended:" + c.Principal, base + "attach:" + c.AttachKey, base + "attach:" + c.ArgsKey}
	if !slices.Equal(v, want) {
		t.Fatalf("reply %q, want %q", v, want)
	}
	if got := get(t, s, c.ID); got.State != Waiting || len(got.Approvals) != 0 {
		t.Fatalf("the call is %s with %d approvals after a declare reply; want it untouched", got.State, len(got.Approvals))
	}

	// A shard index left out: the script fails on it rather than touch it.
	short := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == base+"state:approved" })
	for _, k := range want[1:] {
		short = append(short, k.(string))
	}
	_, err = s.run(ctx, fromWaitingScript, base, short, c.ID, string(Approved), "alice", "", nonce(), int64(0), "")
	if err == nil || !strings.Contains(err.Error(), "undeclared key "+base+"state:approved") {
		t.Fatalf("with state:approved undeclared: %v, want the script to refuse the key", err)
	}

	// runCall declares what the script names, and the decision is made.
	if _, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, c.ID); got.State != Approved {
		t.Fatalf("state %s, want approved", got.State)
	}

	// Another replica's sweeper learns the keys from the approved list,
	// and declares them in its claim at once.
	if listed := approved(t, other, 0); !slices.Contains(listed, c.ID) {
		t.Fatalf("Approved = %v, want %s", listed, c.ID)
	}
	if got := other.seen.get(c.ID); !slices.Equal(got, []string{base + "parked:" + c.Principal, base + "ended:" + c.Principal, base + "attach:" + c.AttachKey, base + "attach:" + c.ArgsKey}) {
		t.Errorf("after Approved, the claim would declare %q", got)
	}

	// A park whose attach key names another call: that call's keys are
	// named too, and the retry attaches to it.
	again := sampleCall()
	again.AttachKey = c.AttachKey
	again.ID = PlaceID("call-"+c.ID, c.Principal)
	got, attached, err := s.Park(ctx, again, long)
	if err != nil || !attached || got.ID != c.ID {
		t.Fatalf("Park of a retry: %s attached=%v %v; want attached to %s", got.ID, attached, err, c.ID)
	}
}

// TestRedisClusterSlotOnTheMove moves a shard's slot to another node the
// way a reshard does, and decides a call half-way through, once its key
// has moved and its shard's indexes have not: the decision is refused
// (the slot is on the move) rather than made on either node with half of
// the keys, and once the move ends the call is as it was, the move met
// no key on both sides, and the decision goes through.
func TestRedisClusterSlotOnTheMove(t *testing.T) {
	t.Parallel()
	nodes := testkit.RedisCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	s := newRedisStoreOn(t, rdb, Options{Shards: 16})
	ctx := t.Context()
	c := park(t, s, sampleCall(), long)
	base := s.baseOf(c.ID)
	slot := rdb.ClusterKeySlot(ctx, base).Val()

	from, err := rdb.MasterForKey(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	var to *redis.Client
	var all []*redis.Client
	for _, addr := range nodes {
		n := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { n.Close() })
		all = append(all, n)
		if addr != from.Options().Addr && to == nil {
			to = n
		}
	}
	fromID := from.Do(ctx, "CLUSTER", "MYID").Val().(string)
	toID := to.Do(ctx, "CLUSTER", "MYID").Val().(string)
	toHost, toPort, _ := strings.Cut(to.Options().Addr, ":")
	must := func(cmd *redis.Cmd) {
		t.Helper()
		if err := cmd.Err(); err != nil {
			t.Fatalf("%v: %v", cmd.Args(), err)
		}
	}
	must(to.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID))
	must(from.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID))
	must(from.Do(ctx, "MIGRATE", toHost, toPort, "", 0, 5000, "KEYS", base+"call:"+c.ID))

	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = s.Decide(dctx, c.ID, Decision{To: Approved, By: "alice"})
	cancel()
	if err == nil {
		t.Fatal("a decision was made while its call's slot was half moved")
	}
	t.Logf("half-way: %v", err)

	for {
		keys := from.ClusterGetKeysInSlot(ctx, int(slot), 100).Val()
		if len(keys) == 0 {
			break
		}
		must(from.Do(ctx, append([]any{"MIGRATE", toHost, toPort, "", 0, 5000, "KEYS"}, anys(keys)...)...))
	}
	for _, n := range all {
		must(n.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID))
	}

	if got := get(t, s, c.ID); got.State != Waiting || len(got.Approvals) != 0 {
		t.Fatalf("after the move the call is %s with %d approvals; want it waiting, untouched", got.State, len(got.Approvals))
	}
	if _, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatalf("Decide after the move: %v", err)
	}
	for st, want := range map[State]int{Waiting: 0, Approved: 1} {
		if n, err := s.Count(ctx, st); err != nil || n != want {
			t.Errorf("Count(%s) = %d, %v; want %d", st, n, err, want)
		}
	}
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// A park whose AttachKey names one call and whose ArgsKey another, on a
// replica that has met neither: both calls' keys are declared (the one it
// may attach to, or move, with its own), within the rounds runCall
// allows, and the park attaches to the first.
func TestRedisDeclaredParkTwoCalls(t *testing.T) {
	s, other := declaredStores(t)
	ctx := t.Context()
	y := sampleCall()
	y.AttachKey = "k2-" + rand.Text()
	y = park(t, s, y, long)
	x := sampleCall()
	x.AttachKey = "k1-" + rand.Text()
	x = park(t, s, x, long)

	z := sampleCall()
	z.AttachKey, z.ArgsKey = x.AttachKey, y.ArgsKey
	got, attached, err := other.Park(ctx, z, long)
	if err != nil || !attached || got.ID != x.ID {
		t.Fatalf("Park = %s attached=%v %v; want attached to %s", got.ID, attached, err, x.ID)
	}
}

// declaredStores returns two stores on one prefix of the test Redis, over
// 4 shards, declaring their scripts' keys as on a Cluster: two replicas,
// the second one having met no call yet.
func declaredStores(t *testing.T) (s, other *RedisStore) {
	t.Helper()
	rdb := newRedisClient(t)
	opts := Options{Shards: 4, Prefix: "toolgate-test:" + rand.Text() + ":"}
	s = newRedisStoreOn(t, rdb, opts)
	other, err := NewRedis(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	declareKeys(s)
	declareKeys(other)
	return s, other
}
