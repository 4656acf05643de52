package pending

import (
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestPlaceID: a placed ID keeps its length and all but its last
// character, and falls in its principal's shard for every number of
// shards, so that a principal's calls, cap and attach keys share a slot.
func TestPlaceID(t *testing.T) {
	for _, principal := range []string{"", "key:alice", "jwt:https://idp.example.com#bob", "anonymous"} {
		for range 50 {
			id := rand.Text()
			placed := PlaceID(id, principal)
			if len(placed) != len(id) || placed[:len(id)-1] != id[:len(id)-1] || !strings.Contains(idAlphabet, placed[len(id)-1:]) {
				t.Fatalf("PlaceID(%q) = %q: want the same ID but its last character, from the alphabet", id, placed)
			}
			for n := 1; n <= maxShards; n *= 2 {
				if got, want := slot32(placed)%n, int(hash32(principal)%uint32(maxShards))%n; got != want {
					t.Fatalf("%d shards: %q of %q in shard %d, its principal's is %d", n, placed, principal, got, want)
				}
			}
		}
	}
	for _, s := range []string{"", "a", "key:alice", rand.Text()} {
		f := fnv.New32a()
		_, _ = f.Write([]byte(s))
		if hash32(s) != f.Sum32() {
			t.Errorf("hash32(%q) = %d, FNV-1a says %d", s, hash32(s), f.Sum32())
		}
	}
	for _, n := range []int{0, 3, 33, 64, -1} {
		if checkShards(n) == nil {
			t.Errorf("checkShards(%d) = nil, want an error", n)
		}
	}
}

// TestRedisClusterSpread: on a three-primary Cluster with 16 shards, the
// calls of many principals spread over every primary, and what reads
// across calls (List, Count, Expire) sees those of every shard; the
// parks run as functions on every primary. The spread of keys and
// commands per primary is logged.
func TestRedisClusterSpread(t *testing.T) {
	t.Parallel()
	nodes := testkit.RedisCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	s := newRedisStoreOn(t, rdb, Options{Shards: 16, ResultTTL: time.Minute})
	ctx := t.Context()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// Long enough for all 200 to be listed while none is past its expiry
	// (ListBrief skips those) on a slow machine under -race; Expire below
	// waits for the last one's expiry.
	const principals, each, ttl = 40, 5, 3 * time.Second
	var last time.Time
	for p := range principals {
		for range each {
			last = park(t, s, asPrincipal(sampleCall(), fmt.Sprintf("key:agent-%d", p)), ttl).ExpiresAt
		}
	}
	if n, err := s.Count(ctx, Waiting); err != nil || n != principals*each {
		t.Fatalf("Count(waiting) = %d, %v; want %d", n, err, principals*each)
	}
	if got, err := s.ListBrief(ctx, Waiting, 1000); err != nil || len(got) != principals*each {
		t.Fatalf("ListBrief(waiting) = %d calls, %v; want %d", len(got), err, principals*each)
	}
	var spread []string
	for _, addr := range nodes {
		c := redis.NewClient(&redis.Options{Addr: addr})
		keys, _ := c.DBSize(ctx).Result()
		stats, _ := c.Info(ctx, "commandstats").Result()
		c.Close()
		if keys == 0 {
			t.Errorf("primary %s holds no key: the calls did not spread", addr)
		}
		evals, fcalls := 0, 0
		for line := range strings.Lines(stats) {
			var calls int
			if i := strings.Index(line, "calls="); i > 0 {
				fmt.Sscanf(line[i+6:], "%d", &calls)
			}
			switch {
			case strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:"):
				evals += calls
			case strings.HasPrefix(line, "cmdstat_fcall:"):
				fcalls += calls
			}
		}
		if fcalls == 0 {
			// the library is loaded on every primary, and each parks
			t.Errorf("primary %s ran no FCALL", addr)
		}
		spread = append(spread, fmt.Sprintf("%s: %d keys, %d scripts and %d functions run", addr, keys, evals, fcalls))
	}
	if how, why := s.Scripts(); how != "functions" {
		t.Errorf("Scripts() = %q, %q on a Cluster; want functions", how, why)
	}
	t.Logf("%d calls of %d principals on 16 shards: %s", principals*each, principals, strings.Join(spread, "; "))
	time.Sleep(time.Until(last) + 100*time.Millisecond)
	expired, err := s.Expire(ctx, 1000)
	if err != nil || len(expired) != principals*each {
		t.Fatalf("Expire = %d calls, %v; want all %d, from every shard", len(expired), err, principals*each)
	}

	// Another number of shards on the same prefix is refused: its
	// replicas would look for calls in other places.
	other, err := NewRedis(rdb, Options{Prefix: strings.TrimSuffix(strings.TrimPrefix(s.base, "{"), "}:") + ":", Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Ping(ctx); !errors.Is(err, ErrLayout) {
		t.Errorf("Ping of a store with 4 shards where 16 are recorded = %v, want ErrLayout", err)
	}
}

// TestRedisLayoutGuard: a store with shards is refused on a prefix where
// calls are parked under one shard (the layout before shards).
func TestRedisLayoutGuard(t *testing.T) {
	rdb := newRedisClient(t)
	one := newRedisStoreOn(t, rdb, Options{})
	if err := one.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	park(t, one, sampleCall(), long)
	rdb.Del(t.Context(), one.base+"layout") // as a store from before shards left it
	sharded, err := NewRedis(rdb, Options{Prefix: strings.TrimSuffix(strings.TrimPrefix(one.base, "{"), "}:") + ":", Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := sharded.Ping(t.Context()); !errors.Is(err, ErrLayout) {
		t.Errorf("Ping with 8 shards over calls parked with one = %v, want ErrLayout", err)
	}
	if err := one.Ping(t.Context()); err != nil {
		t.Errorf("Ping of the one-shard store = %v", err)
	}
}
