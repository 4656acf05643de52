package pending

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Replicated transitions (Options.MinReplicas). WAIT acknowledges the
// writes made before it on the same connection, so the script and the
// WAIT go out in one pipeline on one connection: to the primary of a
// Sentinel set, or to the Cluster node that holds the call's slot.

// ErrNotReplicated: the transition was made on the primary, but fewer
// replicas than Options.MinReplicas acknowledged it in time. It may be
// lost in a failover, so it is not acted on: a claim so made is not
// executed (the call ends unknown once its lease runs out, or is claimed
// again after a failover that lost it), a decision is not acknowledged to
// the approver, a park is refused.
var ErrNotReplicated = errors.New("pending: the write was not confirmed by enough Redis replicas")

// evalReplicated is eval confirmed by WAIT (MinReplicas set).
func (s *RedisStore) evalReplicated(ctx context.Context, sc *redis.Script, keys []string, all []any) ([]any, error) {
	node, err := s.nodeFor(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	fn, loaded := s.function(ctx, sc), false
	for {
		var eval *redis.Cmd
		var wait *redis.Cmd
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			if fn != "" {
				eval = p.FCall(ctx, fn, keys, all...)
			} else {
				eval = sc.EvalSha(ctx, p, keys, all...)
			}
			wait = p.Do(ctx, "WAIT", s.minReplicas, s.replicaTimeout.Milliseconds())
			return nil
		})
		if err != nil && fn != "" && s.functionGone(eval.Err()) && !refusedForMemory(sc, eval.Err()) {
			// Nothing ran: send both again with the EVAL script.
			fn = ""
			continue
		}
		if err != nil && !loaded && isNoScript(eval.Err()) {
			// The script is not cached on this node yet (a new primary,
			// a restart): load it and send both again; nothing ran.
			if lerr := sc.Load(ctx, node).Err(); lerr != nil {
				return nil, lerr
			}
			loaded = true
			continue
		}
		if err := eval.Err(); err != nil {
			return nil, err
		}
		v, err := eval.Slice()
		if err != nil {
			return nil, err
		}
		n, err := wait.Int64()
		if err != nil {
			return nil, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
		}
		if n < int64(s.minReplicas) {
			return nil, fmt.Errorf("%w: %d of %d acknowledged within %v", ErrNotReplicated, n, s.minReplicas, s.replicaTimeout)
		}
		return v, nil
	}
}

// nodeFor is the client of the node that takes writes to key.
func (s *RedisStore) nodeFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("pending: MinReplicas needs a single-node, Sentinel or Cluster client, not %T", s.rdb)
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
