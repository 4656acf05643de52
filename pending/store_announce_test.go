package pending

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestMemoryStoreAnnounce(t *testing.T) { testAnnounce(t, newMemoryStore) }
func TestRedisStoreAnnounce(t *testing.T)  { testAnnounce(t, redisStores(t)) }

// testAnnounce checks Announced and Unannounced, the contract of the
// re-announcement of parked calls whose notification may have been lost.
func testAnnounce(t *testing.T, newStore newStoreFunc) {
	t.Run("Unannounced", func(t *testing.T) {
		s, advance := newStore(t)
		ctx := t.Context()
		a := park(t, s, sampleCall(), long)
		if got := unannounced(t, s, short, 10); len(got) != 0 {
			t.Errorf("Unannounced(%v) right after Park = %v, want none yet", short, got)
		}
		advance(beyond)
		b := park(t, s, sampleCall(), long)
		if got := unannounced(t, s, short, 10); !slices.Equal(got, []string{a.ID}) {
			t.Errorf("Unannounced(%v) = %v, want [%s]: only calls parked at least that long ago", short, got, a.ID)
		}
		if got := unannounced(t, s, 0, 10); !slices.Equal(got, []string{a.ID, b.ID}) {
			t.Errorf("Unannounced(0) = %v, want [%s %s], oldest first", got, a.ID, b.ID)
		}
		if got := unannounced(t, s, 0, 1); !slices.Equal(got, []string{a.ID}) {
			t.Errorf("Unannounced(0, limit 1) = %v, want [%s]", got, a.ID)
		}
		if got, err := s.Unannounced(ctx, 0, 0); err != nil || len(got) != 0 {
			t.Errorf("Unannounced(limit 0) = %v, %v", ids(got), err)
		}
		full, err := s.Unannounced(ctx, 0, 1)
		if err != nil || len(full) != 1 || full[0].State != Waiting || string(full[0].Info) != string(a.Info) ||
			!full[0].CreatedAt.Equal(a.CreatedAt) || !full[0].ExpiresAt.Equal(a.ExpiresAt) {
			t.Errorf("Unannounced returned %+v, %v; want the stored call %s", full, err, a.ID)
		}

		for range 2 { // idempotent
			if err := s.Announced(ctx, a.ID); err != nil {
				t.Fatalf("Announced(%s) = %v", a.ID, err)
			}
			if got := unannounced(t, s, 0, 10); !slices.Equal(got, []string{b.ID}) {
				t.Errorf("Unannounced(0) after Announced(%s) = %v, want [%s]", a.ID, got, b.ID)
			}
		}
		if got := get(t, s, a.ID); got.State != Waiting {
			t.Errorf("Announced changed the call's state to %s", got.State)
		}
		if err := s.Announced(ctx, "no-such-call"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Announced(missing) = %v, want ErrNotFound", err)
		}
	})

	t.Run("LeavesWaiting", func(t *testing.T) {
		s, advance := newStore(t)
		ctx := t.Context()
		approvedCall := park(t, s, sampleCall(), long)
		rejected := park(t, s, sampleCall(), long)
		cancelled := park(t, s, sampleCall(), long)
		expiring := park(t, s, sampleCall(), short)
		announced := park(t, s, sampleCall(), long)
		if got := unannounced(t, s, 0, 10); len(got) != 5 {
			t.Fatalf("Unannounced(0) = %v, want the 5 calls just parked", got)
		}
		decide(t, s, approvedCall.ID, Approved)
		decide(t, s, rejected.ID, Rejected)
		if _, err := s.Cancel(ctx, cancelled.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.Announced(ctx, announced.ID); err != nil {
			t.Fatal(err)
		}
		indexLen := func() int64 { // RedisStore's unannounced index, or -1
			if rs, ok := s.(*RedisStore); ok {
				return rs.rdb.ZCard(ctx, rs.base+"unannounced").Val()
			}
			return -1
		}
		if n := indexLen(); n != -1 && n != 1 {
			t.Errorf("the unannounced index has %d entries, want 1: only the call still waiting", n)
		}
		advance(beyond)
		// Past its expiry a call is no longer announced, swept or not.
		if got := unannounced(t, s, 0, 10); len(got) != 0 {
			t.Errorf("Unannounced(0) = %v, want none: every call was decided, cancelled, expired or announced", got)
		}
		if got, err := s.Expire(ctx, 10); err != nil || !slices.Equal(ids(got), []string{expiring.ID}) {
			t.Fatalf("Expire = %v, %v; want [%s]", ids(got), err, expiring.ID)
		}
		if rs, ok := s.(*RedisStore); ok {
			// The transitions empty the index, so its key is gone.
			if n := rs.rdb.Exists(ctx, rs.base+"unannounced").Val(); n != 0 {
				t.Errorf("the unannounced index is left with no call waiting: %v",
					rs.rdb.ZRange(ctx, rs.base+"unannounced", 0, -1).Val())
			}
		}
		if got := unannounced(t, s, 0, 10); len(got) != 0 {
			t.Errorf("Unannounced(0) after Expire = %v, want none", got)
		}
		// A call that left waiting can still be marked: it exists.
		if err := s.Announced(ctx, rejected.ID); err != nil {
			t.Errorf("Announced(rejected call) = %v, want nil", err)
		}
	})

	t.Run("IndexTTL", func(t *testing.T) {
		s, _ := newStore(t)
		rs, ok := s.(*RedisStore)
		if !ok {
			t.Skip("Redis only")
		}
		ctx := t.Context()
		park(t, s, sampleCall(), time.Minute)
		d := rs.rdb.PTTL(ctx, rs.base+"unannounced").Val()
		if d <= time.Minute || d > time.Minute+contractResultTTL {
			t.Errorf("PTTL of the unannounced index = %v, want the call's ttl + ResultTTL", d)
		}
	})
}

func unannounced(t *testing.T, s Store, olderThan time.Duration, limit int) []string {
	t.Helper()
	got, err := s.Unannounced(t.Context(), olderThan, limit)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		if c.State != Waiting {
			t.Errorf("Unannounced has %s in state %s", c.ID, c.State)
		}
	}
	return ids(got)
}
