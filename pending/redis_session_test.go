package pending

import (
	"crypto/rand"
	"testing"
	"time"
)

// TestRedisSessionKey: a binding is one key under the store's hash tag,
// holding the owner, whose TTL is the binding's: the owner's use sets it
// again, another principal's leaves it alone.
func TestRedisSessionKey(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{})
	ctx := t.Context()
	id := "sess-" + rand.Text()
	key := s.base + "session:" + id
	t.Cleanup(func() { rdb.Del(ctx, key) })

	pttl := func() time.Duration {
		t.Helper()
		d, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if _, err := s.BindSession(ctx, id, "key:alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	if v, err := rdb.Get(ctx, key).Result(); err != nil || v != "key:alice" {
		t.Fatalf("GET %s = %q, %v; want the owner", key, v, err)
	}
	if d := pttl(); d <= 59*time.Minute || d > time.Hour {
		t.Errorf("after BindSession, TTL = %v, want 1h", d)
	}
	if _, err := s.BindSession(ctx, id, "key:bob", 3*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TouchSession(ctx, id, "key:bob", 3*time.Hour); err != nil {
		t.Fatal(err)
	}
	if d := pttl(); d > time.Hour {
		t.Errorf("after another principal's use, TTL = %v, want it left at 1h", d)
	}
	if _, err := s.TouchSession(ctx, id, "key:alice", 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if d := pttl(); d <= 119*time.Minute || d > 2*time.Hour {
		t.Errorf("after the owner's TouchSession, TTL = %v, want 2h", d)
	}
}
