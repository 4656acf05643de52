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
//     claimed and run again (docs/security.md, R09).
//
// It reads INFO, which managed Redis services keep when they hide CONFIG;
// the fsync policy is read with CONFIG GET, and left unjudged where CONFIG
// is refused. Replication is toolgate's own setting
// (pending.redis_min_replicas), not read here.
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
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return fmt.Errorf("pending: reading the settings of %s: %w", node, err)
		}
		p, err := evictionProblem(info)
		if err != nil {
			return fmt.Errorf("pending: reading the settings of %s: %w", node, err)
		}
		pinfo, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return fmt.Errorf("pending: reading the settings of %s: %w", node, err)
		}
		fsync := c.ConfigGet(ctx, "appendfsync").Val()["appendfsync"] // "" where CONFIG is refused
		q, err := persistenceProblem(pinfo, fsync)
		if err != nil {
			return fmt.Errorf("pending: reading the settings of %s: %w", node, err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, x := range []string{p, q} {
			if x != "" {
				problems = append(problems, node+": "+x)
			}
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

// evictionProblem reads INFO memory and says what is unsafe in it, if
// anything; an INFO without the two fields (a Redis-compatible server of
// another kind) is an error, not "safe".
func evictionProblem(info string) (string, error) {
	var maxmemory, policy string
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "maxmemory":
			maxmemory = v
		case "maxmemory_policy":
			policy = v
		}
	}
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
	aof := ""
	for line := range strings.Lines(info) {
		if k, v, _ := strings.Cut(strings.TrimSpace(line), ":"); k == "aof_enabled" {
			aof = v
		}
	}
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
