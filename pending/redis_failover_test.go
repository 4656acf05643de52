package pending

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestRedisSentinelFailover: on a Sentinel set with MinReplicas 1, an
// approval confirmed before a forced failover (SENTINEL FAILOVER) is there
// on the promoted replica, and its call is claimed there once; a waiting
// call parked before it can still be decided. The store follows the new
// primary through its Sentinel client.
func TestRedisSentinelFailover(t *testing.T) {
	t.Parallel()
	master, sentinels, primary, replica := testkit.RedisSentinel(t)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: sentinels, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	s := newRedisStoreOn(t, rdb, Options{MinReplicas: 1, ReplicaTimeout: time.Second})
	ctx := t.Context()

	approved := park(t, s, sampleCall(), long)
	if _, err := s.Decide(ctx, approved.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatalf("Decide before the failover: %v", err)
	}
	waiting := park(t, s, sampleCall(), long)

	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinels[0]})
	t.Cleanup(func() { sc.Close() })
	// A sentinel promotes only a replica whose INFO it has read lately and
	// whose link to the primary is up; before its first INFO the replica
	// is listed, connected, yet refused (NOGOODSLAVE).
	testkit.WaitFor(t, "the sentinel to know the replica as a good one", func() bool {
		rs, err := sc.Replicas(ctx, master).Result()
		if err != nil || len(rs) != 1 {
			return false
		}
		refresh, err := strconv.Atoi(rs[0]["info-refresh"])
		return err == nil && refresh < 5000 && rs[0]["flags"] == "slave" && rs[0]["master-link-status"] == "ok"
	})
	if err := sc.Failover(ctx, master).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	testkit.WaitFor(t, "the replica to be promoted", func() bool {
		addr, err := sc.GetMasterAddrByName(ctx, master).Result()
		return err == nil && addr[0]+":"+addr[1] == replica
	})
	// The old primary rejoins as a replica of the new one; until it is in
	// sync nothing can be confirmed (a claim then would stay unconfirmed,
	// never executed): wait for it, as toolgate's callers wait for Redis.
	promoted := redis.NewClient(&redis.Options{Addr: replica})
	t.Cleanup(func() { promoted.Close() })
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n *redis.Cmd
		_, _ = promoted.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "failover:probe", "1", 0)
			n = p.Do(ctx, "WAIT", 1, 100)
			return nil
		})
		if v, _ := n.Int64(); v == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old primary did not follow the new one within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	claimed, err := s.Claim(ctx, approved.ID, long)
	if err != nil {
		t.Fatalf("Claim after the failover: %v (the approval was confirmed on the replica before it; old primary %s)", err, primary)
	}
	if claimed.State != Executing || claimed.DecidedBy != "alice" {
		t.Errorf("claimed %s decided by %q, want executing, approved by alice", claimed.State, claimed.DecidedBy)
	}
	if _, err := s.Claim(ctx, approved.ID, long); !errors.Is(err, ErrConflict) {
		t.Errorf("a second Claim = %v, want a conflict", err)
	}
	if _, err := s.Decide(ctx, waiting.ID, Decision{To: Rejected, By: "bob"}); err != nil {
		t.Errorf("Decide of the call parked before the failover: %v", err)
	}
}
