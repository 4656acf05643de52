package pending

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CheckSettings reads the settings of the Redis nodes that hold calls (the
// primary; every primary of a Cluster) and describes each that could lose
// parked calls without an error anywhere:
//
//   - eviction: with a memory limit and any policy but noeviction, a full
//     Redis deletes keys to make room, and every key of a call has a TTL,
//     so even the volatile-* policies may pick a parked call; it is then
//     gone (refused, never run), where noeviction would have refused new
//     parks (503) instead;
//   - persistence: without the append-only file a restart loses every
//     parked call (refused, never run); with it but an fsync policy other
//     than always, a restart can lose the last transitions, a claim among
//     them, and a claim lost after its request was sent lets the call be
//     claimed and run again (docs/security.md, R09);
//   - replication: replicas that toolgate does not wait for
//     (Options.MinReplicas 0) are copied asynchronously, so a failover can
//     lose the last transitions, a claim among them, as a restart does
//     (R11); fewer replicas online than MinReplicas leave every park,
//     decision and claim unconfirmed (ErrNotReplicated, 503).
//
// It reads INFO, which managed Redis services keep when they hide CONFIG;
// the fsync policy is read with CONFIG GET, and left unjudged where CONFIG
// is refused.
func (s *RedisStore) CheckSettings(ctx context.Context) ([]string, error) {
	var (
		mu       sync.Mutex
		problems []string
	)
	check := func(ctx context.Context, c *redis.Client) error {
		node := c.Options().Addr
		if node == "FailoverClient" { // go-redis' name for a Sentinel-managed client
			node = "the Sentinel primary"
		}
		found, err := readProblems(ctx, c, s.minReplicas)
		if err != nil {
			return fmt.Errorf("pending: reading the settings of %s: %w", node, err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, x := range found {
			problems = append(problems, node+": "+x)
		}
		return nil
	}
	var err error
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	default:
		return nil, fmt.Errorf("pending: reading Redis settings: unsupported client %T", s.rdb)
	}
	return problems, err
}

// readProblems reads the settings of one primary and says what in them is
// unsafe: one INFO section for each judge, whose reply it reads whole.
func readProblems(ctx context.Context, c *redis.Client, minReplicas int) ([]string, error) {
	fsync := c.ConfigGet(ctx, "appendfsync").Val()["appendfsync"] // "" where CONFIG is refused
	judges := []struct {
		section string
		judge   func(info string) (string, error)
	}{
		{"memory", evictionProblem},
		{"persistence", func(info string) (string, error) { return persistenceProblem(info, fsync) }},
		{"replication", func(info string) (string, error) { return replicationProblem(info, minReplicas) }},
	}
	var found []string
	for _, j := range judges {
		info, err := c.Info(ctx, j.section).Result()
		if err != nil {
			return nil, err
		}
		p, err := j.judge(info)
		if err != nil {
			return nil, err
		}
		if p != "" {
			found = append(found, p)
		}
	}
	return found, nil
}

// infoFields reads the "field:value" lines of an INFO reply.
func infoFields(info string) map[string]string {
	f := map[string]string{}
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		f[k] = v
	}
	return f
}

// evictionProblem reads INFO memory and says what is unsafe in it, if
// anything; an INFO without the two fields (a Redis-compatible server of
// another kind) is an error, not "safe".
func evictionProblem(info string) (string, error) {
	f := infoFields(info)
	maxmemory, policy := f["maxmemory"], f["maxmemory_policy"]
	switch {
	case policy == "" || maxmemory == "":
		return "", errors.New("INFO memory has no maxmemory or maxmemory_policy")
	case policy == "noeviction" || maxmemory == "0":
		return "", nil // no limit: nothing is evicted, whatever the policy
	}
	return fmt.Sprintf("maxmemory-policy is %s with maxmemory %s bytes: a full Redis evicts parked calls (they are then refused, never run); set maxmemory-policy noeviction", policy, maxmemory), nil
}

// persistenceProblem reads INFO persistence and the appendfsync setting
// ("" when it could not be read) and says what can lose parked calls, if
// anything; an INFO without aof_enabled is an error, not "safe".
func persistenceProblem(info, fsync string) (string, error) {
	aof := infoFields(info)["aof_enabled"]
	switch {
	case aof == "":
		return "", errors.New("INFO persistence has no aof_enabled")
	case aof == "0":
		return "appendonly is off: a restart of Redis loses every parked call (they are then refused, never run); set appendonly yes with appendfsync always", nil
	case fsync != "" && fsync != "always":
		return fmt.Sprintf("appendfsync is %s: a restart of Redis can lose its last transitions, and a call whose claim is lost after its request was sent can be claimed and run again; set appendfsync always", fsync), nil
	}
	return "", nil
}

// replicationProblem reads INFO replication of a primary and says what
// can lose or refuse transitions given minReplicas (Options.MinReplicas),
// if anything. Only replicas in state online count: one still syncing
// acknowledges nothing. An INFO without role is an error, not "safe"; a
// node that is not a primary (it takes no writes) is not judged.
func replicationProblem(info string, minReplicas int) (string, error) {
	f := infoFields(info)
	role, online := f["role"], 0
	for k, v := range f {
		if strings.HasPrefix(k, "slave") && strings.Contains(","+v+",", ",state=online,") {
			online++
		}
	}
	switch {
	case role == "":
		return "", errors.New("INFO replication has no role")
	case role != "master":
		return "", nil
	case minReplicas == 0 && online > 0:
		return fmt.Sprintf("%s online, and pending.redis_min_replicas is 0: replication is asynchronous, so a failover can lose the last transitions, and a call whose claim is lost after its request was sent can be claimed and run again; set pending.redis_min_replicas", replicas(online)), nil
	case online < minReplicas:
		return fmt.Sprintf("%s online, and pending.redis_min_replicas is %d: no park, decision or claim can be confirmed, so asks answer 503; bring replicas online or lower pending.redis_min_replicas", replicas(online), minReplicas), nil
	}
	return "", nil
}

func replicas(n int) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}
