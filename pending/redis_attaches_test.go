package pending

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"
)

// TestRedisAttachesLayout: on a replica whose number of shards is not the
// one recorded under the prefix, Attaches fails as Park does (ErrLayout)
// rather than answer "no parked call" from a shard the others never park
// in: a remembered grant would then run a retry of a parked call beside
// it.
func TestRedisAttachesLayout(t *testing.T) {
	rdb := newRedisClient(t)
	prefix := "toolgate-test-attaches:" + rand.Text() + ":"
	a := newRedisStoreOn(t, rdb, Options{Prefix: prefix, Shards: 4})
	b := newRedisStoreOn(t, rdb, Options{Prefix: prefix, Shards: 1})
	ctx := t.Context()
	c := sampleCall()
	c.AttachKey = c.ArgsKey
	if _, attached, err := a.Park(ctx, c, time.Minute); err != nil || attached {
		t.Fatalf("park on the 4-shard replica: attached %v, %v", attached, err)
	}
	retry := c
	retry.ID = PlaceID("call-"+rand.Text(), c.Principal)
	if got, err := a.Attaches(ctx, retry); err != nil || got.ID != c.ID {
		t.Fatalf("Attaches on the replica that parked it = %s, %v", got.ID, err)
	}
	if _, _, err := b.Park(ctx, retry, time.Minute); !errors.Is(err, ErrLayout) {
		t.Fatalf("Park on the 1-shard replica = %v, want ErrLayout", err)
	}
	if got, err := b.Attaches(ctx, retry); !errors.Is(err, ErrLayout) {
		t.Errorf("Attaches on the 1-shard replica = %s, %v; want ErrLayout, as Park", got.ID, err)
	}
}
