package pending

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testListings checks the Listings half of the contract: what Remember
// keeps, Recall returns, on every replica, byte for byte; a later entry
// replaces an earlier one of the same tool and leaves the others; entries
// CheckListing refuses, and new tools beyond MaxListedTools, are skipped.
func testListings(t *testing.T, newStore newStoreFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := newListings(t, newStore)
		ctx := t.Context()
		up := "notes-" + randomName()
		read, del := []byte(`{"a":{"readOnlyHint":true}}`), []byte(`{"p":{"region":["region"]}}`)
		in := map[string][]byte{"notes.read": read, "notes.delete": del, "notes.empty": {}}
		if n, err := s.Remember(ctx, up, in); err != nil || n != 3 {
			t.Fatalf("Remember = %d, %v; want 3 kept", n, err)
		}
		read[0] = 'X' // the store must not keep the caller's slices
		for _, r := range []Listings{s, replicaOf(t, s.(Grants)).(Listings)} {
			wantRecall(t, r, up, "notes.read", `{"a":{"readOnlyHint":true}}`)
			wantRecall(t, r, up, "notes.delete", string(del))
			wantRecall(t, r, up, "notes.empty", "")
			wantMissing(t, r, up, "notes.write")
			wantMissing(t, r, "other-"+up, "notes.read")
		}
		got, _ := s.Recall(ctx, up, "notes.delete")
		got[0] = 'X' // nor hand out its own
		wantRecall(t, s, up, "notes.delete", string(del))
	})

	t.Run("Replace", func(t *testing.T) {
		s := newListings(t, newStore)
		ctx := t.Context()
		up := "notes-" + randomName()
		remember(t, s, up, map[string][]byte{"a": []byte("1"), "b": []byte("1")})
		remember(t, s, up, map[string][]byte{"a": []byte("2")})
		wantRecall(t, s, up, "a", "2")
		wantRecall(t, s, up, "b", "1")
		if n, err := s.Remember(ctx, up, nil); err != nil || n != 0 {
			t.Errorf("Remember(nothing) = %d, %v; want 0, nil", n, err)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		s := newListings(t, newStore)
		ctx := t.Context()
		up := "notes-" + randomName()
		in := map[string][]byte{
			"ok":  []byte("1"),
			"big": bytes.Repeat([]byte("x"), MaxListingBytes+1),
			"":    []byte("1"),
			strings.Repeat("n", MaxListingNameBytes+1): []byte("1"),
			"max": bytes.Repeat([]byte("x"), MaxListingBytes),
		}
		if n, err := s.Remember(ctx, up, in); err != nil || n != 2 {
			t.Fatalf("Remember = %d, %v; want the 2 valid entries kept", n, err)
		}
		wantRecall(t, s, up, "ok", "1")
		wantMissing(t, s, up, "big")
		wantMissing(t, s, up, "")
		if v, err := s.Recall(ctx, up, "max"); err != nil || len(v) != MaxListingBytes {
			t.Errorf("Recall(max) = %d bytes, %v; want %d", len(v), err, MaxListingBytes)
		}
		if n, err := s.Remember(ctx, "", map[string][]byte{"t": nil}); err != nil || n != 0 {
			t.Errorf("Remember(no upstream) = %d, %v; want 0, nil", n, err)
		}
		if CheckListing("u", "t", in["big"]) == nil {
			t.Error("CheckListing accepts an entry over MaxListingBytes")
		}
	})

	t.Run("MaxListedTools", func(t *testing.T) {
		s := newListings(t, newStore)
		ctx := t.Context()
		up := "notes-" + randomName()
		remember(t, s, up, fullListing())
		n, err := s.Remember(ctx, up, map[string][]byte{"new": []byte("1"), "tool7": []byte("2")})
		if err != nil || n != 1 {
			t.Fatalf("Remember beyond MaxListedTools = %d, %v; want the known tool alone kept", n, err)
		}
		wantMissing(t, s, up, "new")
		wantRecall(t, s, up, "tool7", "2")
		// Another upstream has room of its own.
		remember(t, s, "other-"+up, map[string][]byte{"new": []byte("1")})
	})

	// A listing comes in pages, one Remember each: a tool not remembered
	// for ListingTTL is forgotten, whatever else of its upstream is.
	t.Run("Forget", func(t *testing.T) {
		s, age := newAgingListings(t, newStore)
		up := "notes-" + randomName()
		remember(t, s, up, map[string][]byte{"gone": []byte("1"), "kept": []byte("1")})
		age(up, ListingTTL/2)
		remember(t, s, up, map[string][]byte{"kept": []byte("2")})
		age(up, ListingTTL/2)
		remember(t, s, up, map[string][]byte{"page2": []byte("1")})
		wantMissing(t, s, up, "gone")
		wantRecall(t, s, up, "kept", "2")
		wantRecall(t, s, up, "page2", "1")
	})

	// A full upstream makes room once its old tools lapse, a bounded
	// number of them per Remember.
	t.Run("FullLapses", func(t *testing.T) {
		s, age := newAgingListings(t, newStore)
		ctx := t.Context()
		up := "notes-" + randomName()
		remember(t, s, up, fullListing())
		age(up, ListingTTL/2)
		remember(t, s, up, map[string][]byte{"tool7": []byte("2")})
		if n, err := s.Remember(ctx, up, map[string][]byte{"new": []byte("1")}); err != nil || n != 0 {
			t.Fatalf("Remember to a full upstream = %d, %v; want 0 kept", n, err)
		}
		age(up, ListingTTL/2)
		more := make(map[string][]byte, maxListingDrops+1)
		for i := range maxListingDrops + 1 {
			more["new"+strconv.Itoa(i)] = []byte("1")
		}
		if n, err := s.Remember(ctx, up, more); err != nil || n != maxListingDrops {
			t.Fatalf("Remember after the tools lapsed = %d, %v; want %d kept (one Remember drops that many)", n, err, maxListingDrops)
		}
		if n, err := s.Remember(ctx, up, map[string][]byte{"new": []byte("1")}); err != nil || n != 1 {
			t.Fatalf("Remember after the next drops = %d, %v; want 1 kept", n, err)
		}
		wantRecall(t, s, up, "new", "1")
		wantRecall(t, s, up, "tool7", "2")
	})
}

// newAgingListings is newListings with a function that makes what
// Remember wrote of an upstream d older: the store's clock moves, or in
// Redis, which has its own, the last-seen times go back by d.
func newAgingListings(t *testing.T, newStore newStoreFunc) (Listings, func(upstream string, d time.Duration)) {
	t.Helper()
	s, advance := newStore(t)
	l := asListings(t, s)
	rs, ok := s.(*RedisStore)
	if !ok {
		return l, func(_ string, d time.Duration) { advance(d) }
	}
	return l, func(upstream string, d time.Duration) {
		ctx := t.Context()
		key := rs.listingSeenKey(upstream)
		seen, err := rs.rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i := range seen {
			seen[i].Score -= float64(d.Milliseconds())
		}
		if len(seen) > 0 {
			if err := rs.rdb.ZAdd(ctx, key, seen...).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func randomName() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// newListings returns a contract store as Listings; for a RedisStore the
// keys it writes (which live ListingTTL) are deleted at the end.
func newListings(t *testing.T, newStore newStoreFunc) Listings {
	t.Helper()
	s, _ := newStore(t)
	return asListings(t, s)
}

// asListings returns s as Listings; for a RedisStore the listing keys are
// deleted at the end.
func asListings(t *testing.T, s Store) Listings {
	t.Helper()
	l, ok := s.(Listings)
	if !ok {
		t.Fatalf("%T keeps no listings", s)
	}
	if rs, ok := s.(*RedisStore); ok {
		t.Cleanup(func() { deleteListings(rs) })
	}
	return l
}

// deleteListings deletes the listing keys of rs (listed: and listed-seen:).
func deleteListings(rs *RedisStore) {
	ctx := context.Background()
	for _, b := range rs.bases {
		iter := rs.rdb.Scan(ctx, 0, b+"listed*", 1000).Iterator()
		for iter.Next(ctx) {
			rs.rdb.Del(ctx, iter.Val())
		}
	}
}

func remember(t *testing.T, s Listings, upstream string, entries map[string][]byte) {
	t.Helper()
	if n, err := s.Remember(t.Context(), upstream, entries); err != nil || n != len(entries) {
		t.Fatalf("Remember(%s, %d entries) = %d, %v", upstream, len(entries), n, err)
	}
}

func wantRecall(t *testing.T, s Listings, upstream, tool, want string) {
	t.Helper()
	got, err := s.Recall(t.Context(), upstream, tool)
	if err != nil || string(got) != want {
		t.Errorf("Recall(%s, %s) = %q, %v; want %q", upstream, tool, got, err, want)
	}
}

func wantMissing(t *testing.T, s Listings, upstream, tool string) {
	t.Helper()
	if got, err := s.Recall(t.Context(), upstream, tool); !errors.Is(err, ErrNotFound) {
		t.Errorf("Recall(%s, %q) = %q, %v; want ErrNotFound", upstream, tool, got, err)
	}
}

// TestMemoryListingsLapse: a tool's entry goes ListingTTL after its last
// write, whether or not its upstream is written since, and is no longer
// recalled even before a Remember drops it.
func TestMemoryListingsLapse(t *testing.T) {
	now := time.Now()
	s := NewMemory(Options{Now: func() time.Time { return now }})
	remember(t, s, "notes", map[string][]byte{"a": []byte("1")})
	now = now.Add(ListingTTL - time.Minute)
	remember(t, s, "notes", map[string][]byte{"b": []byte("1")})
	wantRecall(t, s, "notes", "a", "1")
	now = now.Add(time.Minute)
	wantMissing(t, s, "notes", "a") // b's write did not refresh it
	wantRecall(t, s, "notes", "b", "1")
	now = now.Add(ListingTTL - time.Minute)
	wantMissing(t, s, "notes", "b")
}

// TestRedisListingsTTL: an upstream's hash and last-seen set live
// ListingTTL from each write, and their keys carry the hash tag of a shard
// of the store, the same one; a field written without a last-seen time
// (by an earlier version) is given one, so that it lapses too.
func TestRedisListingsTTL(t *testing.T) {
	rdb := newRedisClient(t)
	s := newRedisStoreOn(t, rdb, Options{Shards: 4})
	t.Cleanup(func() { deleteListings(s) })
	ctx := t.Context()
	remember(t, s, "notes", map[string][]byte{"a": []byte("1")})
	key := s.listingKey("notes")
	if !strings.HasPrefix(key, "{") || !strings.Contains(key, "}:listed:notes") {
		t.Errorf("listing key %q, want a shard's hash tag then listed:notes", key)
	}
	if d := rdb.PTTL(ctx, key).Val(); d < ListingTTL-time.Minute || d > ListingTTL {
		t.Errorf("PTTL after Remember = %v, want about %v", d, ListingTTL)
	}
	seen := s.listingSeenKey("notes")
	if tag := key[:strings.Index(key, "}")+1]; !strings.HasPrefix(seen, tag) || !strings.HasSuffix(seen, "}:listed-seen:notes") {
		t.Errorf("last-seen key %q, want %s then listed-seen:notes", seen, tag)
	}
	if d := rdb.PTTL(ctx, seen).Val(); d < ListingTTL-time.Minute || d > ListingTTL {
		t.Errorf("PTTL of the last-seen set after Remember = %v, want about %v", d, ListingTTL)
	}
	rdb.PExpire(ctx, key, time.Minute)
	rdb.PExpire(ctx, seen, time.Minute)
	rdb.HSet(ctx, key, "earlier", "1")
	remember(t, s, "notes", map[string][]byte{"a": []byte("1")})
	for _, k := range []string{key, seen} {
		if d := rdb.PTTL(ctx, k).Val(); d < ListingTTL-time.Minute {
			t.Errorf("PTTL of %s after a second Remember = %v, want it refreshed to about %v", k, d, ListingTTL)
		}
	}
	if err := rdb.ZScore(ctx, seen, "earlier").Err(); err != nil {
		t.Errorf("ZSCORE of a field written without a last-seen time: %v, want one given", err)
	}
}

// fullListing is MaxListedTools tools, tool0 onwards, each "1".
func fullListing() map[string][]byte {
	all := make(map[string][]byte, MaxListedTools)
	for i := range MaxListedTools {
		all["tool"+strconv.Itoa(i)] = []byte("1")
	}
	return all
}
