package pending

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestRedisAbandon: a call abandoned before its park lands is never
// parked; one abandoned after is cancelled; one approved meanwhile is
// left to run, and the abandon says so. On a single Redis and on a
// Redis Cluster, where the park script declares the mark's key.
func TestRedisAbandon(t *testing.T) {
	t.Run("single", func(t *testing.T) { testAbandon(t, newRedisStoreOn(t, newRedisClient(t), Options{})) })
	t.Run("cluster", func(t *testing.T) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testkit.RedisCluster(t), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		testAbandon(t, newRedisStoreOn(t, rdb, Options{Shards: 4}))
	})
}

func testAbandon(t *testing.T, s *RedisStore) {
	ctx := t.Context()

	before := sampleCall()
	if err := s.Abandon(ctx, before.ID); err != nil {
		t.Fatalf("abandon before the park: %v", err)
	}
	if _, _, err := s.Park(ctx, before, long); !errors.Is(err, ErrAbandoned) {
		t.Fatalf("a park landing after its abandon: %v, want ErrAbandoned", err)
	}
	if _, err := s.Get(ctx, before.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the abandoned call is stored: %v", err)
	}

	after := park(t, s, sampleCall(), long)
	if err := s.Abandon(ctx, after.ID); err != nil {
		t.Fatalf("abandon after the park: %v", err)
	}
	if got, err := s.Get(ctx, after.ID); err != nil || got.State != Cancelled {
		t.Fatalf("the call abandoned after its park is %s, %v; want cancelled", got.State, err)
	}
	if err := s.Abandon(ctx, after.ID); err == nil || !isEnded(err) {
		t.Fatalf("abandoning it again: %v, want the cancelled call's StateError", err)
	}

	approved := park(t, s, sampleCall(), long)
	if _, err := s.Decide(ctx, approved.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	var se *StateError
	if err := s.Abandon(ctx, approved.ID); !errors.As(err, &se) || se.Call.State != Approved {
		t.Fatalf("abandoning an approved call: %v, want its StateError", err)
	}
}

// isEnded reports whether err is a StateError of a call that ended
// cancelled.
func isEnded(err error) bool {
	var se *StateError
	return errors.As(err, &se) && se.Call.State == Cancelled
}
