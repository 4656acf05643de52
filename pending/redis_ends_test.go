package pending

import (
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisUnresolvedForeignEntries: an entry of the unresolved index this
// version cannot read (a state it does not know as an end, written by
// another version during a rolling upgrade, or no state at all) neither
// stops the listing of the ends after it nor is dropped: it is left for
// the version that wrote it, and the index's bound ages it out.
func TestRedisUnresolvedForeignEntries(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{})
	ctx := t.Context()
	c := park(t, s, sampleCall(), long)
	decide(t, s, c.ID, Approved)

	foreign := []string{"waiting:" + c.ID, "paused:" + c.ID, c.ID, "Approved:" + c.ID}
	addUnresolved(t, rdb, s, foreign...)
	if got, want := unresolved(t, s, 0, 100), []string{"approved:" + c.ID}; !slices.Equal(got, want) {
		t.Errorf("Unresolved with foreign entries = %v, want %v", got, want)
	}
	left, err := rdb.ZRange(ctx, s.base+"unresolved", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range foreign {
		if !slices.Contains(left, e) {
			t.Errorf("foreign entry %q dropped from the index (left: %v)", e, left)
		}
	}
}

// TestRedisEndStates: the states unresolvedScript reads as ends are the
// ones announcedEnd names.
func TestRedisEndStates(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{})
	c := park(t, s, sampleCall(), long)
	var want []string
	for _, st := range []State{Waiting, Approved, Executing, Executed, Rejected, Expired, Failed, Unknown, Cancelled} {
		e := string(st) + ":" + c.ID
		addUnresolved(t, rdb, s, e)
		if announcedEnd(st) {
			want = append(want, e)
		}
	}
	if got := unresolved(t, s, 0, 100); !sameSet(got, want) {
		t.Errorf("Unresolved = %v, want the ends %v", got, want)
	}
}

// addUnresolved writes entries into s's unresolved index, reached a
// minute ago.
func addUnresolved(t *testing.T, rdb *redis.Client, s *RedisStore, entries ...string) {
	t.Helper()
	at := float64(time.Now().Add(-time.Minute).UnixMilli())
	for _, e := range entries {
		if err := rdb.ZAdd(t.Context(), s.base+"unresolved", redis.Z{Score: at, Member: e}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
