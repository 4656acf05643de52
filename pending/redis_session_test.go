package pending

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
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

// TestRedisBindNotPastCapWhenOwnerEnds: on one node, binding an ID another
// principal holds is neither counted nor bound, even when that principal's
// binding ends between the count and the binding: the binder never holds
// a session past its cap.
func TestRedisBindNotPastCapWhenOwnerEnds(t *testing.T) {
	s := newRedisStoreOn(t, newRedisClient(t), Options{MaxSessionsPerPrincipal: 1})
	ctx := t.Context()
	const alice, bob = "key:alice", "key:bob"
	wantOwner(t, "BindSession(bob)", bob)(s.BindSession(ctx, "bob-own", bob, time.Hour))
	for i := range 1000 {
		id := fmt.Sprintf("race-%d", i)
		wantOwner(t, "BindSession(alice)", alice)(s.BindSession(ctx, id, alice, time.Hour))
		done := make(chan struct{})
		go func() { _ = s.EndSession(ctx, id, alice); close(done) }()
		owner, err := s.BindSession(ctx, id, bob, time.Hour)
		<-done
		var capErr *SessionCapError
		if err == nil && owner == bob {
			t.Fatalf("bob (cap 1, holding one) was bound to %s", id)
		}
		if err != nil && !errors.As(err, &capErr) && !strings.Contains(err.Error(), "retry") {
			t.Fatal(err)
		}
	}
}
