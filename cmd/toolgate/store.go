package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/pending"
)

// memoryBytesPerPrincipal is how many of the largest bodies one
// principal's calls waiting in the memory store may hold in all.
const memoryBytesPerPrincipal = 32

// openStore opens the store of parked calls. An unreachable Redis does not
// stop the start: asks answer 503 until it is back. The returned func
// releases what was opened.
func openStore(cfg *config.Config) (pending.Store, func(), error) {
	opts := pending.Options{
		ResultTTL: cfg.Pending.ResultTTL.Std(), Prefix: cfg.Pending.RedisPrefix,
		MaxParked: cfg.Limits.MaxParked, MaxParkedPerPrincipal: cfg.Limits.MaxParkedPerSubject,
		MinReplicas: cfg.Pending.RedisMinReplicas, ReplicaTimeout: cfg.Pending.RedisReplicaTimeout.Std(),
	}
	if n := cfg.Limits.MaxParksPerMinute; n > 0 {
		opts.ParkEvery, opts.ParkBurst = time.Minute/time.Duration(n), n
	}
	if cfg.Pending.Store != "redis" {
		// Each waiting call keeps its request (and the arguments shown to
		// approvers) in this process: one principal's may hold at most
		// what 32 bodies of the largest size would, all of them four times
		// that.
		opts.MaxBytesPerPrincipal = memoryBytesPerPrincipal * cfg.Limits.MaxBodyBytes.Int64()
		opts.MaxBytes = 4 * opts.MaxBytesPerPrincipal
		return pending.NewMemory(opts), func() {}, nil
	}
	rdb, err := redisClient(cfg.Pending.RedisURL.Reveal())
	if err != nil {
		return nil, nil, fmt.Errorf("pending.redis_url: %w", err)
	}
	if opts.Shards = cfg.Pending.RedisShards; opts.Shards == 0 {
		opts.Shards = 1
		if _, cluster := rdb.(*redis.ClusterClient); cluster {
			opts.Shards = 16 // spread over the primaries (pending's redis_shards.go)
		}
	}
	st, err := pending.NewRedis(rdb, opts)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return st, func() { st.Close(); rdb.Close() }, nil
}

// redisClient builds a client from a URL: redis:// or rediss:// (one node;
// with ?master_name=NAME&addr=... a Sentinel set), redis+sentinel:// (same,
// explicitly), redis+cluster:// (a Cluster; more nodes with &addr=...) and
// unix://; each with TLS as rediss (config.RedisSchemes lists them). Timeouts are short and bound every command by its context
// (docs/security.md, R15): a slow Redis turns into 503 for asks, not into stuck requests.
func redisClient(raw string) (redis.UniversalClient, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL")
	}
	tune := func(dial, read, write *time.Duration, ctxTimeout *bool) {
		*dial, *read, *write, *ctxTimeout = 2*time.Second, 2*time.Second, 2*time.Second, true
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case strings.HasSuffix(scheme, "+sentinel") || strings.HasSuffix(scheme, "-sentinel") || u.Query().Has("master_name"):
		// rediss+sentinel and rediss://...?master_name= keep TLS.
		u.Scheme = strings.TrimSuffix(strings.TrimSuffix(scheme, "+sentinel"), "-sentinel")
		o, err := redis.ParseFailoverURL(u.String())
		if err != nil {
			return nil, err
		}
		tune(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled)
		return redis.NewFailoverClient(o), nil
	case scheme == "redis+cluster" || scheme == "rediss+cluster":
		u.Scheme = strings.TrimSuffix(scheme, "+cluster")
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, err
		}
		tune(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled)
		return redis.NewClusterClient(o), nil
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	tune(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled)
	// One dial retry: a Redis that is down should answer asks 503 at once
	// (docs/security.md, R01), not after five dial attempts.
	o.DialerRetries = 1
	return redis.NewClient(o), nil
}

// storeCheck is the store's part of /readyz: reachability is reported, and
// does not fail readiness (allow and deny work without Redis).
func storeCheck(st pending.Store) map[string]any {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := st.Ping(ctx); err != nil {
		return map[string]any{"ok": false, "error": err.Error()}
	}
	check := map[string]any{"ok": true}
	if sc, ok := st.(interface{ Scripts() (string, string) }); ok {
		// how Redis runs the transitions: a Redis that refused the
		// function library runs them slower, which an operator may want
		// to know
		if how, why := sc.Scripts(); how != "" {
			check["scripts"] = how
			if why != "" {
				check["scripts_why"] = why
			}
		}
	}
	return check
}

func contextTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
