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
	addr, _ := testkit.RedisServer(t, "--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru", "--appendonly", "yes", "--appendfsync", "always")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	s := newRedisStoreOn(t, rdb, Options{})
	ctx := t.Context()
	expect(t, s, addr+": maxmemory-policy is volatile-lru with maxmemory 104857600 bytes")
	rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction")
	expect(t, s, "")
	rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru")
	rdb.ConfigSet(ctx, "maxmemory", "0")
	expect(t, s, "")
	rdb.ConfigSet(ctx, "appendfsync", "everysec")
	expect(t, s, addr+": appendfsync is everysec")
	rdb.ConfigSet(ctx, "appendonly", "no")
	expect(t, s, addr+": appendonly is off")
	rdb.ConfigSet(ctx, "appendonly", "yes")
	rdb.ConfigSet(ctx, "appendfsync", "always")
	expect(t, s, "")

	nodes := testkit.RedisCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes})
	t.Cleanup(func() { cc.Close() })
	cs := newRedisStoreOn(t, cc, Options{Shards: 4})
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n})
		c.ConfigSet(ctx, "appendonly", "yes")
		c.ConfigSet(ctx, "appendfsync", "always")
		c.Close()
	}
	expect(t, cs, "")
	one := redis.NewClient(&redis.Options{Addr: nodes[1]})
	t.Cleanup(func() { one.Close() })
	one.ConfigSet(ctx, "maxmemory", "1gb")
	one.ConfigSet(ctx, "maxmemory-policy", "allkeys-random")
	expect(t, cs, nodes[1]+": maxmemory-policy is allkeys-random")
}

// TestRedisCheckReplication: replicas that toolgate does not wait for
// are named, and so are fewer replicas online than it waits for; read
// through a Sentinel client, as deployed.
func TestRedisCheckReplication(t *testing.T) {
	master, sentinels, _, replica := testkit.RedisSentinel(t)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: sentinels})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	rdb.ConfigSet(ctx, "appendonly", "yes")
	rdb.ConfigSet(ctx, "appendfsync", "always")
	expect(t, newRedisStoreOn(t, rdb, Options{}), "the Sentinel primary: 1 replica online, and pending.redis_min_replicas is 0")
	expect(t, newRedisStoreOn(t, rdb, Options{MinReplicas: 1}), "")
	expect(t, newRedisStoreOn(t, rdb, Options{MinReplicas: 2}), "the Sentinel primary: 1 replica online, and pending.redis_min_replicas is 2")

	// A Redis without replicas, waited for or not.
	addr, _ := testkit.RedisServer(t, "--appendonly", "yes", "--appendfsync", "always")
	one := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { one.Close() })
	expect(t, newRedisStoreOn(t, one, Options{}), "")
	expect(t, newRedisStoreOn(t, one, Options{MinReplicas: 1}), addr+": 0 replicas online")

	// A replica is not judged: it takes no writes.
	rc := redis.NewClient(&redis.Options{Addr: replica})
	t.Cleanup(func() { rc.Close() })
	got, err := replicationProblem(rc.Info(ctx, "replication").Val(), 3)
	if got != "" || err != nil {
		t.Errorf("replicationProblem(a replica's INFO) = %q, %v, want nothing", got, err)
	}
}

// expect checks that s's settings have one problem that says want, or
// none when want is "".
func expect(t *testing.T, s *RedisStore, want string) {
	t.Helper()
	got, err := s.CheckSettings(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || !strings.Contains(got[0], want)) {
		t.Fatalf("CheckSettings = %q, want %q", got, want)
	}
}

// TestReplicationProblem: INFO replication as Redis writes it.
func TestReplicationProblem(t *testing.T) {
	const (
		none    = "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:0\r\n"
		online  = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=6380,state=online,offset=1,lag=0\r\n"
		syncing = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=6380,state=wait_bgsave,offset=0,lag=0\r\n"
	)
	for _, tc := range []struct {
		info string
		min  int
		want string
	}{
		{none, 0, ""},
		{none, 1, "0 replicas online, and pending.redis_min_replicas is 1"},
		{online, 0, "1 replica online, and pending.redis_min_replicas is 0"},
		{online, 1, ""},
		{syncing, 1, "0 replicas online"}, // not acknowledging yet
		{syncing, 0, ""},
		{"# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\n", 2, ""},
		{"# Replication\r\nconnected_slaves:0\r\n", 0, "error"},
	} {
		got, err := replicationProblem(tc.info, tc.min)
		switch {
		case tc.want == "error" && err == nil, tc.want != "error" && err != nil:
			t.Errorf("replicationProblem(%q, %d) = %q, %v", tc.info, tc.min, got, err)
		case tc.want != "error" && ((tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want)):
			t.Errorf("replicationProblem(%q, %d) = %q, want %q…", tc.info, tc.min, got, tc.want)
		}
	}
}

// TestEvictionProblem: INFO memory as Redis writes it (CRLF lines); one
// without the two fields is unknown, not safe.
func TestEvictionProblem(t *testing.T) {
	for info, want := range map[string]string{
		"# Memory\r\nused_memory:1\r\nmaxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n": "",
		"# Memory\r\nmaxmemory:1024\r\nmaxmemory_policy:noeviction\r\n":                "",
		"# Memory\r\nmaxmemory:1024\r\nmaxmemory_policy:allkeys-lfu\r\n":               "maxmemory-policy is allkeys-lfu with maxmemory 1024 bytes",
		"# Memory\r\nused_memory:1\r\n":                                                "error",
	} {
		got, err := evictionProblem(info)
		switch {
		case want == "error" && err == nil, want != "error" && err != nil:
			t.Errorf("evictionProblem(%q) = %q, %v", info, got, err)
		case want != "error" && ((want == "") != (got == "") || !strings.HasPrefix(got, want)):
			t.Errorf("evictionProblem(%q) = %q, want %q…", info, got, want)
		}
	}
}

// TestPersistenceProblem: INFO persistence as Redis writes it, with the
// fsync policy read or not.
func TestPersistenceProblem(t *testing.T) {
	for _, tc := range []struct{ info, fsync, want string }{
		{"# Persistence\r\nloading:0\r\naof_enabled:1\r\n", "always", ""},
		{"# Persistence\r\naof_enabled:1\r\n", "", ""}, // CONFIG refused: not judged
		{"# Persistence\r\naof_enabled:1\r\n", "everysec", "appendfsync is everysec"},
		{"# Persistence\r\naof_enabled:0\r\n", "always", "appendonly is off"},
		{"# Persistence\r\nloading:0\r\n", "always", "error"},
	} {
		got, err := persistenceProblem(tc.info, tc.fsync)
		switch {
		case tc.want == "error" && err == nil, tc.want != "error" && err != nil:
			t.Errorf("persistenceProblem(%q, %q) = %q, %v", tc.info, tc.fsync, got, err)
		case tc.want != "error" && ((tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want)):
			t.Errorf("persistenceProblem(%q, %q) = %q, want %q…", tc.info, tc.fsync, got, tc.want)
		}
	}
}
