package pending

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestRedisParkOutOfMemory: a Redis at its maxmemory with noeviction
// refuses a new park, and nothing of the call is written: the park is not
// sent again as an EVAL script, which Redis would judge by its first
// write (a trim, which a full Redis allows) and then let store the call
// past maxmemory. A call parked before Redis filled is still decided.
func TestRedisParkOutOfMemory(t *testing.T) {
	p := testkit.NewRedisProc(t, nil, "--save", "", "--appendonly", "no", "--maxmemory", "8mb", "--maxmemory-policy", "noeviction")
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { rdb.Close() })
	s := newRedisStoreOn(t, rdb, Options{})
	ctx := context.Background()

	early, _, err := s.Park(ctx, sampleCall(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	junk := strings.Repeat("x", 64<<10)
	for i := 0; ; i++ {
		err := rdb.Set(ctx, fmt.Sprint("junk:", i), junk, 0).Err()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "OOM ") {
				t.Fatal(err)
			}
			break
		}
		if i > 10000 {
			t.Fatal("Redis never filled up")
		}
	}
	keys := rdb.DBSize(ctx).Val()

	c := sampleCall()
	c.Request = append(c.Request, bytes.Repeat([]byte("A"), 1<<20)...)
	if _, _, err := s.Park(ctx, c, time.Hour); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("a park past maxmemory: %v, want Redis' OOM refusal", err)
	}
	if n := rdb.Exists(ctx, s.callKey(c.ID)).Val(); n != 0 {
		t.Fatal("the refused call was stored")
	}
	if n := rdb.DBSize(ctx).Val(); n != keys {
		t.Errorf("a refused park changed the number of keys from %d to %d", keys, n)
	}

	// Calls already parked still move: an approval needs no new memory
	// to speak of.
	if _, err := s.Decide(ctx, early.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatalf("deciding a call parked before Redis filled: %v", err)
	}
}
