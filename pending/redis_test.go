package pending

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/toolgate/toolgate/internal/testkit"
)

// redisAddr returns a Redis to test against: $TOOLGATE_TEST_REDIS_ADDR if
// set (CI starts redis-server on 127.0.0.1), else a throwaway container if
// a Docker engine is healthy, else the test is skipped — except in CI
// (CI=true), where a missing Redis fails the test rather than passing it
// silently.
func redisAddr(tb testing.TB) string {
	tb.Helper()
	if addr := os.Getenv("TOOLGATE_TEST_REDIS_ADDR"); addr != "" {
		return addr
	}
	if testing.Short() {
		testkit.Unavailable(tb, "no TOOLGATE_TEST_REDIS_ADDR and -short: skipping Redis")
	}
	if err := dockerHealthy(); err != nil {
		testkit.Unavailable(tb, "no TOOLGATE_TEST_REDIS_ADDR and no Docker engine: %v", err)
	}
	ctr, err := testcontainers.Run(tb.Context(), "redis:7-alpine",
		testcontainers.WithExposedPorts("6379/tcp"),
		testcontainers.WithWaitStrategy(wait.ForListeningPort("6379/tcp")))
	testcontainers.CleanupContainer(tb, ctr)
	if err != nil {
		tb.Fatal(err)
	}
	ep, err := ctr.PortEndpoint(tb.Context(), "6379/tcp", "")
	if err != nil {
		tb.Fatal(err)
	}
	return ep
}

// dockerHealthy is testcontainers.SkipIfProviderIsNotHealthy without the
// skip, so that CI can fail instead.
func dockerHealthy() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("testcontainers panicked looking for Docker")
		}
	}()
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	return p.Health(context.Background())
}

// newRedisClient returns a client of the test Redis, closed at the end.
func newRedisClient(tb testing.TB) *redis.Client {
	tb.Helper()
	return dialRedis(tb, &redis.Options{Addr: redisAddr(tb)})
}

// dialRedis returns a client with opts, answering PING, closed at the end.
func dialRedis(tb testing.TB, opts *redis.Options) *redis.Client {
	tb.Helper()
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	tb.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(tb.Context()).Err(); err != nil {
		tb.Fatalf("test Redis: %v", err)
	}
	return rdb
}

// newRedisStoreOn returns a store with its own random prefix (keys of
// earlier runs are still alive in a shared Redis), closed at the end. The
// index keys, which have no TTL, are deleted at the end.
func newRedisStoreOn(tb testing.TB, rdb redis.UniversalClient, opts Options) *RedisStore {
	tb.Helper()
	if opts.Prefix == "" {
		opts.Prefix = "toolgate-test:" + rand.Text() + ":"
	}
	s, err := NewRedis(rdb, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Close()
		for _, base := range s.bases { // one slot per DEL
			rdb.Del(context.Background(), shardKeys(base)...)
		}
		rdb.Del(context.Background(), s.base+"layout")
	})
	return s
}

// redisStores finds the test Redis once, for a whole contract test: with
// no Redis the test skips (or, under CI=true, fails) as a whole, before any
// subtest runs, instead of passing with every subtest skipped. The stores
// it makes sleep to let time pass.
func redisStores(t *testing.T) newStoreFunc {
	t.Helper()
	addr := redisAddr(t)
	dialRedis(t, &redis.Options{Addr: addr})
	return func(t *testing.T, with ...func(*Options)) (Store, func(time.Duration)) {
		t.Helper()
		rdb := dialRedis(t, &redis.Options{Addr: addr})
		return newRedisStoreOn(t, rdb, contractOptions(with)), time.Sleep
	}
}

func TestRedisStore(t *testing.T)     { testStore(t, redisStores(t)) }
func TestRedisStoreRace(t *testing.T) { testStoreRace(t, redisStores(t)) }

// TestRedisStoreDeclared runs the store contract on one Redis with the
// scripts declaring every key they touch, as on a Cluster
// (redis_declare.go), over 4 shards: a script that touched a key it did
// not declare fails (call, in the prelude), here as on a Cluster.
func TestRedisStoreDeclared(t *testing.T) { testStore(t, declaring(redisStores(t))) }

// declaring makes newStore's stores declare their scripts' keys, as
// on a Cluster, over 4 shards, then applies then to each.
func declaring(newStore newStoreFunc, then ...func(*RedisStore)) newStoreFunc {
	return func(t *testing.T, with ...func(*Options)) (Store, func(time.Duration)) {
		t.Helper()
		s, sleep := newStore(t, append(with, func(o *Options) { o.Shards = 4 })...)
		declareKeys(s.(*RedisStore))
		for _, f := range then {
			f(s.(*RedisStore))
		}
		return s, sleep
	}
}

// declareKeys makes s declare its scripts' keys, as on a Cluster.
func declareKeys(s *RedisStore) {
	s.cluster = true
	s.shardKeys = make(map[string][]string, len(s.bases))
	for _, b := range s.bases {
		s.shardKeys[b] = shardKeys(b)
	}
}

// TestRedisStoreSentinel and TestRedisStoreCluster run the store contract
// on the other topologies toolgate takes, each started by the test from
// redis-server: a primary with a replica and three sentinels (the store
// on a Sentinel client), and a three-primary Redis Cluster.
func TestRedisStoreSentinel(t *testing.T) {
	t.Parallel() // a Redis of its own: alongside the rest
	master, sentinels, _, _ := testkit.RedisSentinel(t)
	testStore(t, func(t *testing.T, with ...func(*Options)) (Store, func(time.Duration)) {
		t.Helper()
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: sentinels, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return newRedisStoreOn(t, rdb, contractOptions(with)), time.Sleep
	})
}

func TestRedisStoreCluster(t *testing.T) {
	t.Parallel()
	nodes := testkit.RedisCluster(t)
	testStore(t, func(t *testing.T, with ...func(*Options)) (Store, func(time.Duration)) {
		t.Helper()
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		opts := contractOptions(with)
		opts.Shards = 16 // calls spread over the primaries (redis_shards.go)
		return newRedisStoreOn(t, rdb, opts), time.Sleep
	})
}

// waitSubscribed waits until n clients listen on the store's channel.
func waitSubscribed(t *testing.T, rdb *redis.Client, s *RedisStore, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		m, err := rdb.PubSubNumSub(t.Context(), s.channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		if m[s.channel] >= n {
			return
		}
	}
	t.Fatalf("no subscriber on %s", s.channel)
}

// waitAsync starts s.Wait(id, from) and returns the channel its result
// arrives on, stamped with the time it returned.
func waitAsync(t *testing.T, s Store, id string, from State) <-chan waitResult {
	return waitWith(t, s.Wait, id, from)
}

// waitWith is waitAsync with the wait to call (Wait or WaitHeld).
func waitWith(t *testing.T, wait func(context.Context, string, State) (Call, error), id string, from State) <-chan waitResult {
	t.Helper()
	out := make(chan waitResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
		defer cancel()
		c, err := wait(ctx, id, from)
		out <- waitResult{c, err, time.Now()}
	}()
	return out
}

type waitResult struct {
	c   Call
	err error
	at  time.Time
}

// Two replicas share a Redis: one holds the agent's request, the other
// takes the approval. The holder wakes through pub/sub, well before its
// poll would notice.
func TestRedisReplicasWake(t *testing.T) {
	prefix := "toolgate-test:" + rand.Text() + ":"
	opts := Options{Prefix: prefix, PollInterval: 10 * time.Second}
	rdbA, rdbB := newRedisClient(t), newRedisClient(t)
	a := newRedisStoreOn(t, rdbA, opts)
	b := newRedisStoreOn(t, rdbB, opts)

	c := park(t, a, sampleCall(), long)
	res := waitAsync(t, a, c.ID, Waiting)
	waitSubscribed(t, rdbB, a, 1)
	time.Sleep(20 * time.Millisecond) // let Wait read the call first

	if _, err := b.Decide(t.Context(), c.ID, Decision{To: Approved, By: "alice", Comment: ""}); err != nil {
		t.Fatal(err)
	}
	decided := time.Now()
	r := <-res
	if r.err != nil || r.c.State != Approved {
		t.Fatalf("Wait on replica A = %s, %v; want approved", r.c.State, r.err)
	}
	if d := r.at.Sub(decided); d > 50*time.Millisecond {
		t.Errorf("replica A woke %v after replica B's approval, want ≤ 50ms", d)
	}
	if a.WakeupsViaPubSub() != 1 || a.WakeupsViaPoll() != 0 {
		t.Errorf("wake-ups: pub/sub %d, poll %d; want 1 via pub/sub", a.WakeupsViaPubSub(), a.WakeupsViaPoll())
	}
}

// Pub/sub loses what is published while the subscriber is away
// (docs/security.md, R12); the waiter still sees the approval by polling.
func TestRedisPubSubCut(t *testing.T) {
	const poll = 300 * time.Millisecond
	addr := redisAddr(t)
	// The Redis may be shared with other tests: the test cuts its own
	// store's subscription only, found by the client name, and a bystander's
	// subscription must survive the cut.
	name := "toolgate-test-" + rand.Text()
	rdb := dialRedis(t, &redis.Options{Addr: addr, ClientName: name})
	bystander := dialRedis(t, &redis.Options{Addr: addr, ClientName: name + "-bystander"})
	sub := bystander.Subscribe(t.Context(), "toolgate-test-bystander:"+rand.Text())
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(t.Context()); err != nil {
		t.Fatal(err)
	}
	bystanderID := pubSubClientID(t, rdb, name+"-bystander")

	s := newRedisStoreOn(t, rdb, Options{PollInterval: poll})
	c := park(t, s, sampleCall(), long)
	res := waitAsync(t, s, c.ID, Waiting)
	waitSubscribed(t, rdb, s, 1)
	time.Sleep(20 * time.Millisecond)

	cutAndApprove(t, rdb, s, name, c.ID)
	approvedAt := time.Now()
	if !hasClient(t, rdb, bystanderID) {
		t.Errorf("the bystander's subscription (client %d) was cut too", bystanderID)
	}
	r := <-res
	if r.err != nil || r.c.State != Approved {
		t.Fatalf("Wait = %s, %v; want approved", r.c.State, r.err)
	}
	if d := r.at.Sub(approvedAt); d > poll+200*time.Millisecond {
		t.Errorf("the waiter saw the approval %v later, want ≤ the poll interval %v + 200ms", d, poll)
	}
	if s.WakeupsViaPoll() != 1 || s.WakeupsViaPubSub() != 0 {
		t.Errorf("wake-ups: pub/sub %d, poll %d; want 1 via poll", s.WakeupsViaPubSub(), s.WakeupsViaPoll())
	}

	// The subscription came back: the next wake-up is via pub/sub again.
	waitSubscribed(t, rdb, s, 1)
	d := park(t, s, sampleCall(), long)
	res = waitAsync(t, s, d.ID, Waiting)
	time.Sleep(20 * time.Millisecond)
	decide(t, s, d.ID, Rejected)
	if r := <-res; r.err != nil || r.c.State != Rejected {
		t.Fatalf("Wait = %s, %v; want rejected", r.c.State, r.err)
	}
	if s.WakeupsViaPubSub() != 1 {
		t.Errorf("wake-ups via pub/sub after resubscribing: %d, want 1", s.WakeupsViaPubSub())
	}
}

// cutAndApprove kills the subscription of s (its client named name) and
// approves id in one transaction, so that the approval is published while
// nobody listens: go-redis reconnects and resubscribes, but that message
// is gone.
func cutAndApprove(t *testing.T, rdb *redis.Client, s *RedisStore, name, id string) {
	t.Helper()
	sub := pubSubClientID(t, rdb, name)
	pipe := rdb.TxPipeline()
	kill := pipe.ClientKillByFilter(t.Context(), "ID", strconv.FormatInt(sub, 10), "TYPE", "pubsub")
	fromWaitingScript.Eval(t.Context(), pipe, []string{s.callKey(id)},
		s.base, s.resultTTL.Milliseconds(), s.channel, id, string(Approved), "alice", "", nonce())
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := kill.Val(); n != 1 {
		t.Fatalf("CLIENT KILL closed %d connections, want the store's subscription", n)
	}
}

// clients returns CLIENT LIST TYPE typ as one map of fields per client.
func clients(t *testing.T, rdb *redis.Client, typ string) []map[string]string {
	t.Helper()
	out, err := rdb.Do(t.Context(), "CLIENT", "LIST", "TYPE", typ).Text()
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]string
	for line := range strings.Lines(out) {
		m := map[string]string{}
		for f := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(f, "=")
			m[k] = v
		}
		list = append(list, m)
	}
	return list
}

// pubSubClientID returns the ID of the one pub/sub connection named name.
func pubSubClientID(t *testing.T, rdb *redis.Client, name string) int64 {
	t.Helper()
	var ids []int64
	for _, c := range clients(t, rdb, "pubsub") {
		if c["name"] == name {
			id, err := strconv.ParseInt(c["id"], 10, 64)
			if err != nil {
				t.Fatalf("CLIENT LIST id %q: %v", c["id"], err)
			}
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("pub/sub connections named %s: %v, want one", name, ids)
	}
	return ids[0]
}

// hasClient reports whether a pub/sub connection with the given ID is open.
func hasClient(t *testing.T, rdb *redis.Client, id int64) bool {
	t.Helper()
	for _, c := range clients(t, rdb, "pubsub") {
		if c["id"] == strconv.FormatInt(id, 10) {
			return true
		}
	}
	return false
}

// Every key the store writes has a TTL, so nothing outlives its retention
// if sweeps stop (docs/security.md, INV-8). The attach keys are named by
// the keys as given, hex digests too (which the call stores packed), and
// go away with the delivery.
func TestRedisKeyTTLs(t *testing.T) {
	digest := func() string { return fmt.Sprintf("%x", sha256.Sum256([]byte(rand.Text()))) }
	same := digest()
	for name, keys := range map[string][2]string{
		"names":          {"key-" + rand.Text(), "args-" + rand.Text()},
		"digests":        {digest(), digest()},
		"one digest":     {same, same},
		"digest, a name": {"key-" + rand.Text(), digest()},
	} {
		t.Run(name, func(t *testing.T) { testRedisKeyTTLs(t, keys[0], keys[1]) })
	}
}

func testRedisKeyTTLs(t *testing.T, attach, args string) {
	rdb := newRedisClient(t)
	const rttl = time.Hour
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: rttl})
	ctx := t.Context()
	c := sampleCall()
	c.AttachKey, c.ArgsKey = attach, args
	c = park(t, s, c, time.Minute)
	if c.AttachKey != attach || c.ArgsKey != args {
		t.Errorf("the parked call's keys read back as %q, %q; want %q, %q", c.AttachKey, c.ArgsKey, attach, args)
	}

	ttl := func(key string) time.Duration {
		t.Helper()
		d, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	callKey, attachKey, argsKey := s.callKey(c.ID), s.base+"attach:"+c.AttachKey, s.base+"attach:"+c.ArgsKey
	for _, k := range []string{callKey, attachKey, argsKey} {
		if d := ttl(k); d <= rttl || d > rttl+time.Minute {
			t.Errorf("after Park, TTL(%s) = %v, want ttl + ResultTTL = %v", k, d, rttl+time.Minute)
		}
	}
	decide(t, s, c.ID, Approved)
	c, err := s.Claim(ctx, c.ID, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl(callKey); d <= rttl+9*time.Minute {
		t.Errorf("after Claim with a 10m lease, TTL = %v, want lease + ResultTTL", d)
	}
	if _, err := s.Finish(ctx, c.ID, c.Fence, Executed, Result{Status: 200}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{callKey, attachKey, argsKey} {
		if d := ttl(k); d <= 0 || d > rttl {
			t.Errorf("after Finish, TTL(%s) = %v, want ResultTTL %v", k, d, rttl)
		}
	}
	if first, _, err := s.Deliver(ctx, c.ID); err != nil || !first {
		t.Fatalf("Deliver = %v, %v", first, err)
	}
	if n := rdb.Exists(ctx, attachKey, argsKey).Val(); n != 0 {
		t.Errorf("%d attach keys outlived the delivery", n)
	}
}

// Index entries of calls whose keys expired unswept are dropped, so the
// indexes stay bounded by the calls that exist; an index whose calls are
// all gone goes away with them (its TTL).
func TestRedisIndexesBounded(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: 100 * time.Millisecond})
	ctx := t.Context()
	for range 3 {
		park(t, s, sampleCall(), 50*time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // ttl + ResultTTL: the keys are gone, nobody swept
	for _, k := range []string{"state:waiting", "unannounced"} {
		if n := rdb.Exists(ctx, s.base+k).Val(); n != 0 {
			t.Errorf("%s outlived all its calls", k)
		}
	}

	// An index that lives on, for a call that does, loses the entries of
	// the others at the next park.
	kept := park(t, s, sampleCall(), long)
	for range 3 {
		park(t, s, sampleCall(), 50*time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if n := rdb.ZCard(ctx, s.base+"state:waiting").Val(); n != 4 {
		t.Fatalf("state:waiting has %d entries, want the 3 stale ones and %s", n, kept.ID)
	}
	live := park(t, s, sampleCall(), long) // cleans up stale entries
	for _, k := range []string{"state:waiting", "unannounced"} {
		got, err := rdb.ZRange(ctx, s.base+k, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if want := sortedIDs(kept.ID, live.ID); !slices.Equal(got, want) {
			t.Errorf("%s = %v after a park, want only %v", k, got, want)
		}
	}
}

// The caps count deadline indexes under the store's hash tag (waiting,
// approved) and one sorted set per principal, which have TTLs and empty as
// the calls leave waiting and approved: nothing is left behind by
// principals that come and go. A call is in one deadline index at a time,
// scored by its deadline.
func TestRedisParkedIndexes(t *testing.T) {
	rdb := newRedisClient(t)
	const rttl = time.Hour
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: rttl, MaxParkedPerPrincipal: 5})
	ctx := t.Context()
	const principal = "jwt:https://idp.example.com#alice"
	all, mine := s.base+"state:waiting", s.base+"parked:"+principal
	var parked []Call
	for range 2 {
		c := sampleCall()
		c.Principal = principal
		parked = append(parked, park(t, s, c, time.Minute))
	}
	for _, k := range []string{all, mine} {
		if n := rdb.ZCard(ctx, k).Val(); n != 2 {
			t.Errorf("ZCARD %s = %d, want 2", k, n)
		}
		// extended by the second park: an eighth past what it asked
		if d := rdb.PTTL(ctx, k).Val(); d <= rttl || d > (rttl+time.Minute)*9/8 {
			t.Errorf("PTTL %s = %v, want the calls' ttl + ResultTTL, and at most an eighth more", k, d)
		}
	}
	if got := rdb.ZScore(ctx, all, parked[0].ID).Val(); got != float64(parked[0].ExpiresAt.UnixMilli()) {
		t.Errorf("state:waiting scores %s at %v, want its expiry %d", parked[0].ID, got, parked[0].ExpiresAt.UnixMilli())
	}
	decide(t, s, parked[0].ID, Rejected)
	approved, err := s.Decide(ctx, parked[1].ID, Decision{To: Approved, By: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if n := rdb.ZCard(ctx, mine).Val(); n != 1 {
		t.Errorf("after a rejection and an approval, ZCARD %s = %d, want 1", mine, n)
	}
	if n := rdb.ZCard(ctx, all).Val(); n != 0 {
		t.Errorf("state:waiting holds %d calls after both left waiting", n)
	}
	if got := rdb.ZScore(ctx, s.base+"due", approved.ID).Val(); got != float64(approved.ExpiresAt.UnixMilli()) {
		t.Errorf("due scores the approved call at %v, want its expiry %d", got, approved.ExpiresAt.UnixMilli())
	}
	claimed, err := s.Claim(ctx, parked[1].ID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := rdb.ZScore(ctx, s.base+"leases", claimed.ID).Val(); got != float64(claimed.LeaseUntil.UnixMilli()) {
		t.Errorf("leases scores the claimed call at %v, want its lease end %d", got, claimed.LeaseUntil.UnixMilli())
	}
	if n := rdb.Exists(ctx, all, s.base+"due", mine).Val(); n != 0 {
		t.Errorf("%d parked indexes are left with no call waiting or approved", n)
	}
}

// go-redis retries a command whose reply was lost, although Redis ran it
// (docs/security.md, R02 and R16). A retried write is recognised by its
// nonce and answers as the first run did, so the executor that claimed a
// call still knows it did.
func TestRedisRetriedWrites(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{})
	ctx := t.Context()
	c := park(t, s, sampleCall(), long)

	twice := func(sc *redis.Script, args ...any) (first, second Call) {
		t.Helper()
		for i, c := range []*Call{&first, &second} {
			v, err := s.run(ctx, sc, s.base, []string{s.callKey(args[0].(string))}, args...)
			if err != nil {
				t.Fatal(err)
			}
			code, got, err := reply(args[0].(string), v)
			if err != nil || (code != "ok" && code != "first") {
				t.Fatalf("run %d: %q, %v", i+1, code, err)
			}
			*c = got
		}
		return first, second
	}
	n := nonce()
	a, b := twice(fromWaitingScript, c.ID, string(Approved), "alice", "", n, int64(30000))
	if a.State != Approved || b.State != Approved || a.DecidedAt != b.DecidedAt {
		t.Errorf("retried Decide: %s then %s", a.State, b.State)
	}
	a, b = twice(claimScript, c.ID, int64(60000), nonce())
	if a.Fence != 1 || b.Fence != 1 || b.State != Executing {
		t.Errorf("retried Claim: fences %d, %d, want one claim", a.Fence, b.Fence)
	}
	// an approval that claims, retried, is one approval and one claim
	d := park(t, s, sampleCall(), long)
	a, b = twice(fromWaitingScript, d.ID, string(Approved), "alice", "", nonce(), int64(30000), "", int64(60000))
	if a.State != Executing || b.State != Executing || a.Fence != 1 || b.Fence != 1 || len(b.Approvals) != 1 || len(b.Request) == 0 {
		t.Errorf("retried Decide with a claim: %s fence %d, then %s fence %d with %d approvals; want one claim, the call whole",
			a.State, a.Fence, b.State, b.Fence, len(b.Approvals))
	}
	a, b = twice(finishScript, c.ID, "1", string(Executed), nonce(), "rs", 200)
	if a.State != Executed || b.State != Executed {
		t.Errorf("retried Finish: %s then %s", a.State, b.State)
	}
	// a retry answers as the first run did: the call without the result
	// the finish sent (RedisStore.finish puts it back)
	if diff := cmp.Diff(a, b); diff != "" || a.Result != nil {
		t.Errorf("retried Finish (-first +retry):\n%s; result %v", diff, a.Result)
	}
	twice(deliverScript, c.ID, nonce())

	// Without the nonce, the same steps are refused as they must be.
	if _, err := s.Claim(ctx, c.ID, time.Minute); !isState(err, Executed) {
		t.Errorf("another Claim = %v, want a StateError", err)
	}
	if first, _, err := s.Deliver(ctx, c.ID); err != nil || first {
		t.Errorf("another Deliver = %v, %v; want not first", first, err)
	}
}

// TestRedisRetriedLapsedFinish: a retry of the Finish that found the lease
// run out (its reply lost) answers lapsed again, so the end it made is
// still reported once.
func TestRedisRetriedLapsedFinish(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{})
	ctx := t.Context()
	c := park(t, s, sampleCall(), long)
	if _, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice", Comment: ""}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, c.ID, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // past the lease, by Redis' clock
	n := nonce()
	for i := range 2 {
		v, err := s.runOn(ctx, finishScript, c.ID, strconv.FormatInt(claimed.Fence, 10), string(Executed), n, "rs", 200)
		if err != nil {
			t.Fatal(err)
		}
		code, got, _ := reply(c.ID, v)
		if code != "lapsed" || got.State != Unknown {
			t.Fatalf("finish run %d: %q %s, want lapsed unknown", i+1, code, got.State)
		}
	}
	if _, err := s.Finish(ctx, c.ID, claimed.Fence, Executed, Result{Status: 200}); !errors.Is(err, ErrFenced) || errors.Is(err, ErrLapsed) {
		t.Fatalf("another executor's Finish = %v, want fenced, not lapsed", err)
	}
}

// TestRedisRetryAfterMove: a retried write is recognised only while the
// call is still where that write put it. A claim whose lease ran out (the
// call is unknown now, a move that keeps the claim's nonce) retried is a
// conflict, not a claim the executor would act on.
func TestRedisRetryAfterMove(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{})
	ctx := t.Context()
	c := park(t, s, sampleCall(), long)
	if _, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice", Comment: ""}); err != nil {
		t.Fatal(err)
	}
	n := nonce()
	claim := func() string {
		v, err := s.runOn(ctx, claimScript, c.ID, int64(1), n)
		if err != nil {
			t.Fatal(err)
		}
		code, _, err := reply(c.ID, v)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	if code := claim(); code != "ok" {
		t.Fatalf("claim: %q", code)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := s.Expire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, c.ID); got.State != Unknown {
		t.Fatalf("after the lease: %s, want unknown", got.State)
	}
	if code := claim(); code != "conflict" {
		t.Errorf("the claim retried after its lease ran out: %q, want conflict", code)
	}
}

// With Redis unreachable, parking fails at once with an error that is
// neither "no such call" nor a conflict: the proxy answers 503
// (docs/security.md, R01).
func TestRedisUnreachable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:1",
		DialTimeout:           200 * time.Millisecond,
		ReadTimeout:           200 * time.Millisecond,
		WriteTimeout:          200 * time.Millisecond,
		MaxRetries:            1,
		DialerRetries:         1,
		ContextTimeoutEnabled: true,
	})
	defer rdb.Close()
	s, err := NewRedis(rdb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err = s.Park(ctx, sampleCall(), time.Minute)
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		t.Errorf("Park = %v, want an outage error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Park took %v to fail", d)
	}
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping succeeded")
	}
	if _, err := s.Get(ctx, "x"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Get = %v, want an outage error", err)
	}
}

func TestNewRedisPrefix(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, p := range []string{"{x}:", "a{b", "}", ":"} {
		if _, err := NewRedis(rdb, Options{Prefix: p}); err == nil {
			t.Errorf("NewRedis(prefix %q) succeeded", p)
		}
	}
	s, err := NewRedis(rdb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.callKey("id"), "{toolgate}:call:id"; got != want {
		t.Errorf("call key = %q, want %q", got, want)
	}
	if s.channel != "toolgate:events" {
		t.Errorf("channel = %q", s.channel)
	}
	if _, err := NewRedis(nil, Options{}); err == nil {
		t.Error("NewRedis(nil) succeeded")
	}
}

// The store never lists the keyspace: no KEYS or SCAN, in Go or in Lua.
func TestRedisNoKeyspaceScans(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lua, _ := filepath.Glob("*.lua")
	files = append(files, lua...)
	bad := regexp.MustCompile(`(?i)['"](KEYS|SCAN|HSCAN|SSCAN|ZSCAN)['"]|\.(Keys|Scan|ScanType|HScan|SScan|ZScan)\(`)
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if bad.MatchString(line) {
				t.Errorf("%s:%d scans the keyspace: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}

// BenchmarkRedisParkDecideClaimFinish measures the life of one approved
// call, four round trips, and the memory of a parked call. redis-µs/call is
// the time Redis spent in the four scripts (INFO commandstats; other
// clients of the same Redis add to it): its capacity, not the replica's.
func BenchmarkRedisParkDecideClaimFinish(b *testing.B) {
	b.Run("one key declared", func(b *testing.B) { benchParkDecideClaimFinish(b, false) })
	// as on a Cluster (redis_declare.go)
	b.Run("every key declared", func(b *testing.B) { benchParkDecideClaimFinish(b, true) })
}

func benchParkDecideClaimFinish(b *testing.B, declared bool) {
	rdb := newRedisClient(b)
	s := newRedisStoreOn(b, rdb, Options{ResultTTL: time.Minute})
	if declared {
		declareKeys(s)
	}
	ctx := b.Context()
	res := Result{Status: 200, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`)}
	before, commands := scriptMicros(b, rdb), commandCount(b, rdb)
	for b.Loop() {
		c, _, err := s.Park(ctx, sampleCall(), time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice", Comment: ""}); err != nil {
			b.Fatal(err)
		}
		c, err = s.Claim(ctx, c.ID, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Finish(ctx, c.ID, c.Fence, Executed, res); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(scriptMicros(b, rdb)-before)/float64(b.N), "redis-µs/call")
	b.ReportMetric(float64(commandCount(b, rdb)-commands)/float64(b.N), "redis-commands/call")
	usage, data := parkedCallMemory(b, rdb, s)
	b.ReportMetric(float64(usage), "B/parked-call")
	b.ReportMetric(float64(usage-data), "B/overhead")
}

// TestRedisMemoryPerCall measures the Redis memory of a parked call with a
// 200-byte request and realistic digests. The target is 1 KiB for the
// store's own overhead: MEMORY USAGE of the call's key minus the bytes the
// caller handed over (request, info, digests, names, attach key).
func TestRedisMemoryPerCall(t *testing.T) {
	rdb := newRedisClient(t)
	// A prefix as long as the default one: key names count.
	s := newRedisStoreOn(t, rdb, Options{Prefix: "tg" + rand.Text()[:6] + ":"})
	parked, data := parkedCallMemory(t, rdb, s)
	t.Logf("parked call with a 200 B request: MEMORY USAGE %d B; caller data %d B; store overhead %d B",
		parked, data, parked-data)
	if parked-data > 1024 {
		t.Errorf("a parked call costs %d bytes beyond its data, want ≤ 1024", parked-data)
	}

	// Everything a call costs (key, attach key, index entries, expiry
	// entries), from used_memory over many calls; only logged, as other
	// clients of the same Redis add noise.
	const n = 2000
	before := usedMemory(t, rdb)
	for range n {
		parkedCallMemory(t, rdb, s)
	}
	t.Logf("used_memory grew by %d B per parked call (%d calls; indexes, attach keys and expiry entries included)",
		(usedMemory(t, rdb)-before)/n, n)
}

// parkedCallMemory parks a realistic call with a 200-byte request and
// returns MEMORY USAGE of its key (all fields counted) and the number of
// bytes of the call's own data.
func parkedCallMemory(tb testing.TB, rdb *redis.Client, s *RedisStore) (usage, data int64) {
	tb.Helper()
	c := sampleCall()
	c.Request = []byte(strings.Repeat("r", 200))
	c.Info = []byte(`{"tool":"notes.delete","subject":"agent@example.com","args":{"id":42}}`)
	// digests as the proxy makes them: 64 hex digits
	c.RequestDigest = strings.Repeat("0", 64)
	c.ArgsDigest = strings.Repeat("1", 64)
	c.AttachKey = strings.ToLower(rand.Text() + rand.Text() + rand.Text())[:64]
	c.ArgsKey = strings.ToLower(rand.Text() + rand.Text() + rand.Text())[:64]
	if _, _, err := s.Park(tb.Context(), c, time.Minute); err != nil {
		tb.Fatal(err)
	}
	for _, k := range []string{s.callKey(c.ID)} {
		n, err := rdb.MemoryUsage(tb.Context(), k, 0).Result()
		if err != nil {
			tb.Fatal(err)
		}
		usage += n
	}
	for _, f := range []string{c.ID, c.AttachKey, c.ArgsKey, c.ArgsDigest, c.Subject, c.Upstream, c.Tool, string(c.Request), c.RequestDigest, string(c.Info), string(c.Brief)} {
		data += int64(len(f))
	}
	return usage, data
}

// scriptMicros is the time Redis has spent in scripts run by SHA since
// its statistics were last reset (INFO commandstats, cmdstat_evalsha).
func scriptMicros(tb testing.TB, rdb *redis.Client) int64 {
	tb.Helper()
	for field := range strings.SplitSeq(infoValue(tb, rdb, "commandstats", "cmdstat_evalsha"), ",") {
		if v, ok := strings.CutPrefix(field, "usec="); ok {
			return parseInt(tb, v)
		}
	}
	return 0 // no script run yet
}

// commandCount is how many commands Redis has run, those of scripts
// included (INFO commandstats; other clients of the same Redis add theirs).
func commandCount(tb testing.TB, rdb *redis.Client) int64 {
	tb.Helper()
	info, err := rdb.Info(tb.Context(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for k, v := range infoFields(info) {
		if calls, ok := strings.CutPrefix(v, "calls="); ok && strings.HasPrefix(k, "cmdstat_") {
			calls, _, _ = strings.Cut(calls, ",")
			n += parseInt(tb, calls)
		}
	}
	return n
}

func usedMemory(tb testing.TB, rdb *redis.Client) int64 {
	tb.Helper()
	v := infoValue(tb, rdb, "memory", "used_memory")
	if v == "" {
		tb.Fatal("no used_memory in INFO")
	}
	return parseInt(tb, v)
}

// infoValue returns what follows "name:" in section of INFO, or "".
func infoValue(tb testing.TB, rdb *redis.Client, section, name string) string {
	tb.Helper()
	info, err := rdb.Info(tb.Context(), section).Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func parseInt(tb testing.TB, v string) int64 {
	tb.Helper()
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// TestRedisEveryKeyExpires: after calls moved through every kind of
// transition, every key of the store has a TTL (the layout key aside): an
// index whose calls are gone goes away with them, sweeper or not.
func TestRedisEveryKeyExpires(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: time.Minute})
	ctx := t.Context()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	decide(t, s, park(t, s, sampleCall(), long).ID, Rejected)
	park(t, s, sampleCall(), long)
	c := park(t, s, sampleCall(), long)
	decide(t, s, c.ID, Approved)
	claimed, err := s.Claim(ctx, c.ID, long)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, c.ID, claimed.Fence, Executed, Result{Status: 200}); err != nil {
		t.Fatal(err)
	}
	park(t, s, sampleCall(), 10*time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if _, err := s.Expire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, s.base+"*").Result() // a test's own prefix: KEYS is fine here
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 10 {
		t.Fatalf("only %d keys under %s: %v", len(keys), s.base, keys)
	}
	for _, k := range keys {
		if k == s.base+"layout" {
			continue
		}
		if d := rdb.PTTL(ctx, k).Val(); d <= 0 {
			t.Errorf("key %s has no TTL (%v)", k, d)
		}
	}
}

func sortedIDs(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// TestRedisClusterWakeSharded: on a Cluster a transition is published on
// its shard's channel (SPUBLISH), not across the cluster bus, and a
// replica holding the agent wakes through it.
func TestRedisClusterWakeSharded(t *testing.T) {
	t.Parallel()
	nodes := testkit.RedisCluster(t)
	client := func() *redis.ClusterClient {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	opts := Options{Prefix: "toolgate-test:" + rand.Text() + ":", PollInterval: 10 * time.Second, Shards: 16}
	a := newRedisStoreOn(t, client(), opts)
	b := newRedisStoreOn(t, client(), opts)
	c := park(t, a, sampleCall(), long)

	// What the test listens on: the call's shard channel and the global one.
	watch := client()
	shard := watch.SSubscribe(t.Context(), a.baseOf(c.ID)+"events")
	defer shard.Close()
	global := watch.Subscribe(t.Context(), a.channel)
	defer global.Close()
	for _, ps := range []*redis.PubSub{shard, global} {
		if _, err := ps.Receive(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	res := waitAsync(t, a, c.ID, Waiting)
	time.Sleep(200 * time.Millisecond) // let Wait subscribe and read the call
	if _, err := b.Decide(t.Context(), c.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.c.State != Approved {
		t.Fatalf("Wait on replica A = %s, %v; want approved", r.c.State, r.err)
	}
	if a.WakeupsViaPubSub() != 1 || a.WakeupsViaPoll() != 0 {
		t.Errorf("wake-ups: pub/sub %d, poll %d; want 1 via pub/sub", a.WakeupsViaPubSub(), a.WakeupsViaPoll())
	}
	select {
	case m := <-shard.Channel():
		if want := c.ID + " approved"; m.Payload != want {
			t.Errorf("shard channel carried %q, want %q", m.Payload, want)
		}
	case <-time.After(time.Second):
		t.Error("nothing on the shard channel")
	}
	select {
	case m := <-global.Channel():
		t.Errorf("the global channel carried %q too: published twice", m.Payload)
	case <-time.After(100 * time.Millisecond):
	}
}

// A call parked by an earlier release is in state:waiting scored by when
// it was parked, and in due as well. Expire walks it when that score
// passes: the call is not overdue, so its entry is scored by its expiry
// and its entry in due is dropped; it is neither expired nor forgotten.
func TestRedisEarlierIndexes(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{ResultTTL: time.Minute})
	ctx := t.Context()
	c := park(t, s, sampleCall(), long)
	waiting, due := s.base+"state:waiting", s.base+"due"
	created := float64(c.CreatedAt.UnixMilli())
	rdb.ZAdd(ctx, waiting, redis.Z{Score: created, Member: c.ID})
	rdb.ZAdd(ctx, due, redis.Z{Score: created, Member: c.ID})
	time.Sleep(5 * time.Millisecond) // Redis' clock past the old scores
	if got, err := s.Expire(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("Expire = %v, %v; want nothing (the call is not due)", ids(got), err)
	}
	if got := rdb.ZScore(ctx, waiting, c.ID).Val(); got != float64(c.ExpiresAt.UnixMilli()) {
		t.Errorf("state:waiting scores the call at %v after Expire, want its expiry %d", got, c.ExpiresAt.UnixMilli())
	}
	if err := rdb.ZScore(ctx, due, c.ID).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("due still holds the waiting call (%v)", err)
	}
	if got := get(t, s, c.ID); got.State != Waiting {
		t.Errorf("the call is %s, want waiting", got.State)
	}
}

// TestRedisEndedIndexes: what park forgets of a principal's ended calls
// past its cap goes whole, keys and index entries: after 50 park-and-
// cancel cycles and one more park under a cap of 5, the principal's ended
// index, the cancelled state index and the keyspace hold the last 5 calls
// and no more, and the ended index has an expiry. Park takes a forgotten
// call out of the state index its key names; the last one forgotten has
// lost its key first, and leaves every terminal index all the same.
func TestRedisEndedIndexes(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{MaxParkedPerPrincipal: 5})
	ctx := t.Context()
	const principal = "key:churn"
	ids := parkAndCancel(t, s, principal, 50)
	base := s.baseOf(ids[0])
	if n := rdb.Del(ctx, base+"call:"+ids[44]).Val(); n != 1 {
		t.Fatalf("DEL of the next call to forget = %d, want 1", n)
	}
	park(t, s, asPrincipal(sampleCall(), principal), long)
	ended := rdb.ZRange(ctx, base+"ended:"+principal, 0, -1).Val()
	cancelled := rdb.ZRange(ctx, base+"state:cancelled", 0, -1).Val()
	// The state index scores by the millisecond, ties by ID: compare it
	// as a set. The ended index keeps the order the calls ended in.
	last := slices.Sorted(slices.Values(ids[45:]))
	if slices.Sort(cancelled); !slices.Equal(ended, ids[45:]) || !slices.Equal(cancelled, last) {
		t.Fatalf("ended index %v, cancelled index %v; want the last 5 calls %v in both", ended, cancelled, ids[45:])
	}
	for i, id := range ids {
		if n := rdb.Exists(ctx, base+"call:"+id).Val(); n != int64(b2i(i >= 45)) {
			t.Fatalf("call %d's key exists: %d", i, n)
		}
	}
	if ttl := rdb.PTTL(ctx, base+"ended:"+principal).Val(); ttl <= 0 {
		t.Fatalf("ended index TTL %v, want one", ttl)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
