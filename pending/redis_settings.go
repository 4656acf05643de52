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
// parked calls without an error anywhere. It looks at eviction: with a
// memory limit and any policy but noeviction, a full Redis deletes keys to
// make room, and every key of a call has a TTL, so even the volatile-*
// policies may pick a parked call; it is then gone (refused, never run),
// where noeviction would have refused new parks (503) instead. Persistence
// and replication are the operator's choice (docs/security.md) and are not
// judged here. It reads INFO, which managed Redis services keep when they
// hide CONFIG.
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
		if p != "" {
			mu.Lock()
			problems = append(problems, node+": "+p)
			mu.Unlock()
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
