package pending

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestRedisCheckSettings: a memory limit with an eviction policy is named,
// with the node; noeviction, or no limit, is not; on a Cluster every
// primary is read.
func TestRedisCheckSettings(t *testing.T) {
	addr, _ := testkit.RedisServer(t, "--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	s := newRedisStoreOn(t, rdb, Options{})
	ctx := t.Context()
	expect := func(t *testing.T, s *RedisStore, want string) {
		t.Helper()
		got, err := s.CheckSettings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || !strings.Contains(got[0], want)) {
			t.Fatalf("CheckSettings = %q, want %q", got, want)
		}
	}
	expect(t, s, addr+": maxmemory-policy is volatile-lru with maxmemory 104857600 bytes")
	rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction")
	expect(t, s, "")
	rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru")
	rdb.ConfigSet(ctx, "maxmemory", "0")
	expect(t, s, "")

	nodes := testkit.RedisCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes})
	t.Cleanup(func() { cc.Close() })
	cs := newRedisStoreOn(t, cc, Options{Shards: 4})
	expect(t, cs, "")
	one := redis.NewClient(&redis.Options{Addr: nodes[1]})
	t.Cleanup(func() { one.Close() })
	one.ConfigSet(ctx, "maxmemory", "1gb")
	one.ConfigSet(ctx, "maxmemory-policy", "allkeys-random")
	expect(t, cs, nodes[1]+": maxmemory-policy is allkeys-random")
}
