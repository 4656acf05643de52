package pending

import (
	"fmt"
	"slices"
	"strings"
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
		if got, err := s.Unannounced(ctx, 0, 0, 0); err != nil || len(got) != 0 {
			t.Errorf("Unannounced(limit 0) = %v, %v", ids(got), err)
		}
		full, err := s.Unannounced(ctx, 0, 1, 0)
		if err != nil || len(full) != 1 || full[0].State != Waiting || string(full[0].Info) != string(a.Info) ||
			!full[0].CreatedAt.Equal(a.CreatedAt) || !full[0].ExpiresAt.Equal(a.ExpiresAt) {
			t.Errorf("Unannounced returned %+v, %v; want the stored call %s", full, err, a.ID)
		}

		for range 2 { // idempotent
			if err := s.Announced(ctx, []string{a.ID}); err != nil {
				t.Fatalf("Announced(%s) = %v", a.ID, err)
			}
			if got := unannounced(t, s, 0, 10); !slices.Equal(got, []string{b.ID}) {
				t.Errorf("Unannounced(0) after Announced(%s) = %v, want [%s]", a.ID, got, b.ID)
			}
		}
		if got := get(t, s, a.ID); got.State != Waiting {
			t.Errorf("Announced changed the call's state to %s", got.State)
		}
		// Calls it does not find are skipped; the others are recorded,
		// every one, in one request.
		c := park(t, s, asPrincipal(sampleCall(), "key:another-agent"), long) // on another shard, where there are several
		d := park(t, s, sampleCall(), long)
		if err := s.Announced(ctx, []string{"no-such-call", c.ID, b.ID}); err != nil {
			t.Errorf("Announced(missing and two parked) = %v, want nil", err)
		}
		if got := unannounced(t, s, 0, 10); !slices.Equal(got, []string{d.ID}) {
			t.Errorf("Unannounced(0) after Announced(%s, %s) = %v, want [%s]", c.ID, b.ID, got, d.ID)
		}
		if err := s.Announced(ctx, nil); err != nil {
			t.Errorf("Announced(none) = %v", err)
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
		if err := s.Announced(ctx, []string{announced.ID}); err != nil {
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
		if err := s.Announced(ctx, []string{rejected.ID}); err != nil {
			t.Errorf("Announced(rejected call) = %v, want nil", err)
		}
	})

	t.Run("BoundedInBytes", func(t *testing.T) {
		s, _ := newStore(t)
		for i := range 4 {
			park(t, s, largeCall(i), long)
		}
		list := func(maxBytes int64) []string {
			got, err := s.Unannounced(t.Context(), 0, 10, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			return ids(got)
		}
		checkBounded(t, "Unannounced", list)
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

// largeCall is a call with 10 kB of arguments, the i-th on another shard
// than the one before where there are several.
func largeCall(i int) Call {
	c := sampleCall()
	if i%2 == 1 {
		c = asPrincipal(c, "key:another-agent")
	}
	c.Info = []byte(`{"tool":"notes.delete","args":{"text":"` + strings.Repeat("x", 10_000) + `"}}`)
	return c
}

// checkBounded checks a listing of four large calls (largeCall) of one
// size bounded in bytes: as many of them as fit, but never none. (Which
// ones: the oldest on one shard; a store in shards starts a bounded
// listing at another shard each time.)
func checkBounded(t *testing.T, what string, list func(maxBytes int64) []string) {
	t.Helper()
	all := list(0)
	if len(all) != 4 {
		t.Fatalf("%s without a bound = %v, want the 4 large calls", what, all)
	}
	for _, tc := range []struct {
		maxBytes int64
		want     int
	}{{25_000, 2}, {40_000, 3}, {1, 1}, {1 << 20, 4}} {
		got := list(tc.maxBytes)
		if len(got) != tc.want || slices.ContainsFunc(got, func(id string) bool { return !slices.Contains(all, id) }) ||
			len(slices.Compact(slices.Sorted(slices.Values(got)))) != len(got) {
			t.Errorf("%s bounded to %d bytes = %v, want %d of %v", what, tc.maxBytes, got, tc.want, all)
		}
	}
}

func unannounced(t *testing.T, s Store, olderThan time.Duration, limit int) []string {
	t.Helper()
	got, err := s.Unannounced(t.Context(), olderThan, limit, 0)
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

// TestRedisStoreAnnounceShards: one Announced records calls of every
// shard, each in its shard's index, as a Cluster would hold them.
func TestRedisStoreAnnounceShards(t *testing.T) {
	newStore := redisStores(t)
	st, _ := newStore(t, func(o *Options) { o.Shards = 4 })
	s := st.(*RedisStore)
	declareKeys(s)
	ctx := t.Context()
	var parked []string
	shards := map[string]bool{}
	for i := 0; len(shards) < 2 && i < 64; i++ {
		c := park(t, s, asPrincipal(sampleCall(), fmt.Sprint("key:agent-", i)), long)
		parked = append(parked, c.ID)
		shards[s.baseOf(c.ID)] = true
	}
	if len(shards) < 2 {
		t.Fatalf("64 principals' calls all landed on one shard of 4")
	}
	if got := unannounced(t, s, 0, 100); len(got) != len(parked) {
		t.Fatalf("Unannounced(0) = %v, want the %d calls parked", got, len(parked))
	}
	if err := s.Announced(ctx, parked); err != nil {
		t.Fatal(err)
	}
	if got := unannounced(t, s, 0, 100); len(got) != 0 {
		t.Errorf("Unannounced(0) after Announced = %v, want none", got)
	}
	for b := range shards {
		if n := s.rdb.Exists(ctx, b+"unannounced").Val(); n != 0 {
			t.Errorf("shard %s keeps its unannounced index", b)
		}
	}
}

// TestRedisBoundedListingTurnsShards: a listing bounded in bytes starts at
// the next shard each time, so that a large call due on a later shard is
// listed too (the first, whatever its size) and not always left behind
// the small calls of an earlier one.
func TestRedisBoundedListingTurnsShards(t *testing.T) {
	for _, shards := range []int{2, 4} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) { testBoundedListingTurnsShards(t, shards) })
	}
}

// testBoundedListingTurnsShards lists as the re-announcer does, Unannounced
// then Unresolved, bounded in bytes.
func testBoundedListingTurnsShards(t *testing.T, shards int) {
	s := newRedisStoreOn(t, newRedisClient(t), Options{Shards: shards})
	index := func(id string) int { return slices.Index(s.bases, s.baseOf(id)) }
	// The large call on the first shard, the small one on another: a
	// listing that starts on any but the first reaches the small one first.
	var large, small Call
	for i := 0; ; i++ {
		if large = asPrincipal(largeCall(0), fmt.Sprint("key:large-", i)); index(large.ID) == 0 {
			break
		}
	}
	for i := 0; ; i++ {
		if small = asPrincipal(sampleCall(), fmt.Sprint("key:small-", i)); index(small.ID) != 0 {
			break
		}
	}
	park(t, s, large, time.Hour)
	park(t, s, small, time.Hour)
	listed := 0
	for range len(s.bases) {
		got, err := s.Unannounced(t.Context(), 0, 10, 5_000)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ids(got), large.ID) {
			listed++
		}
		if _, err := s.Unresolved(t.Context(), 0, 10, 5_000); err != nil {
			t.Fatal(err)
		}
	}
	if listed == 0 {
		t.Errorf("in %d listings bounded to 5,000 bytes the large call (shard %d) was never listed, only the small one (shard %d)",
			len(s.bases), index(large.ID), index(small.ID))
	}
}
