package pending

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestRedisMinReplicas: with MinReplicas, parks, decisions and claims are
// confirmed by WAIT on a real replica; when the replica is gone they give
// ErrNotReplicated after ReplicaTimeout (the claim is then not to be
// executed), and a store asking for more replicas than exist refuses
// every transition. A script the node has not cached is loaded and sent
// again.
func TestRedisMinReplicas(t *testing.T) {
	rdb, stopReplica := primaryWithReplica(t)
	ctx := t.Context()
	const timeout = 300 * time.Millisecond
	s, err := NewRedis(rdb, Options{Prefix: "repl:", MinReplicas: 1, ReplicaTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	// Confirmed: the whole cycle, with the script cache flushed first.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c := park(t, s, sampleCall(), long)
	if _, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatalf("Decide with a replica: %v", err)
	}
	if _, err := s.Claim(ctx, c.ID, long); err != nil {
		t.Fatalf("Claim with a replica: %v", err)
	}
	// An approval does not claim with itself here (Decision.Claim): an
	// approval the replicas did not confirm still stands, a claim would
	// not run.
	cl := park(t, s, sampleCall(), long)
	if got, err := s.Decide(ctx, cl.ID, Decision{To: Approved, By: "alice", Claim: long}); err != nil || got.State != Approved || got.Fence != 0 {
		t.Errorf("Decide with a claim, replicas confirming = %s, fence %d, %v; want approved, unclaimed", got.State, got.Fence, err)
	}

	// A store that needs two replicas of one: nothing is confirmed.
	two, err := NewRedis(rdb, Options{Prefix: "repl:", MinReplicas: 2, ReplicaTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { two.Close() })
	if _, _, err := two.Park(ctx, sampleCall(), long); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("Park needing 2 replicas of 1 = %v, want ErrNotReplicated", err)
	}

	// The replica goes: an approved call's claim is not confirmed.
	d := park(t, s, sampleCall(), long)
	if _, err := s.Decide(ctx, d.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	stopReplica()
	start := time.Now()
	_, err = s.Claim(ctx, d.ID, long)
	if !errors.Is(err, ErrNotReplicated) || time.Since(start) < timeout {
		t.Errorf("Claim without the replica = %v after %v, want ErrNotReplicated after %v", err, time.Since(start), timeout)
	}
	if _, err := s.Decide(ctx, park(t, s.withoutReplicas(), sampleCall(), long).ID, Decision{To: Rejected, By: "bob"}); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("Decide without the replica = %v, want ErrNotReplicated", err)
	}
}

// withoutReplicas is s without the confirmation, for setting up a case.
func (s *RedisStore) withoutReplicas() *RedisStore {
	c := &RedisStore{rdb: s.rdb, base: s.base, bases: s.bases, channel: s.channel, resultTTL: s.resultTTL, poll: s.poll, window: s.window, waiters: map[string]map[chan State]struct{}{}}
	return c
}

// primaryWithReplica starts a Redis of the test's own with one replica,
// and returns a client of the primary once the replica acknowledges
// writes, and a function that stops the replica.
func primaryWithReplica(t *testing.T) (*redis.Client, func()) {
	t.Helper()
	// No diskless-sync delay: the replica is online at once.
	primary, _ := testkit.RedisServer(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(primary)
	_, stopReplica := testkit.RedisServer(t, "--replicaof", host, port)
	rdb := redis.NewClient(&redis.Options{Addr: primary, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	testkit.WaitFor(t, "the replica to acknowledge writes", func() bool {
		info, _ := rdb.Info(t.Context(), "replication").Result()
		if !strings.Contains(info, "state=online") {
			return false
		}
		var n *redis.Cmd
		_, _ = rdb.Pipelined(t.Context(), func(p redis.Pipeliner) error {
			p.Set(t.Context(), "repl:ready", "1", 0)
			n = p.Do(t.Context(), "WAIT", 1, 100)
			return nil
		})
		v, _ := n.Int64()
		return v == 1
	})
	return rdb, stopReplica
}
