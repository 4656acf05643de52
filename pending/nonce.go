package pending

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Nonces remembers one-time values for a while, in the store every replica
// shares: a signed request (a Slack click) that any replica has seen is
// a replay on all of them. Both stores implement it.
type Nonces interface {
	// FirstUse records key until the store's now + ttl and reports
	// whether this was its first use within that time.
	FirstUse(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

var (
	_ Nonces = (*MemoryStore)(nil)
	_ Nonces = (*RedisStore)(nil)
)

// Bounds of Nonces: a key is a signature, not a document, and the memory
// store holds at most maxNonces live keys (beyond them FirstUse refuses,
// and the caller refuses the request rather than forget a key).
const (
	maxNonceBytes = 512
	maxNonces     = 100_000
)

// ErrTooManyNonces: the memory store holds maxNonces live keys.
var ErrTooManyNonces = errors.New("pending: too many one-time values remembered")

func checkNonce(key string, ttl time.Duration) error {
	if key == "" || len(key) > maxNonceBytes || ttl <= 0 {
		return fmt.Errorf("%w: a one-time value needs a key of 1 to %d bytes and a positive ttl", errInvalid, maxNonceBytes)
	}
	return nil
}

// memNonces is MemoryStore's Nonces: keys by expiry, swept when full.
type memNonces struct {
	mu   sync.Mutex
	keys map[string]time.Time
}

// FirstUse implements [Nonces].
func (s *MemoryStore) FirstUse(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if err := checkNonce(key, ttl); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	n := &s.nonces
	now := s.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.keys == nil {
		n.keys = map[string]time.Time{}
	}
	if until, ok := n.keys[key]; ok && now.Before(until) {
		return false, nil
	}
	if len(n.keys) >= maxNonces {
		for k, until := range n.keys {
			if !now.Before(until) {
				delete(n.keys, k)
			}
		}
		if len(n.keys) >= maxNonces {
			return false, ErrTooManyNonces
		}
	}
	n.keys[key] = now.Add(ttl)
	return true, nil
}

// FirstUse implements [Nonces]: SET NX with the ttl, one round trip.
func (s *RedisStore) FirstUse(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if err := checkNonce(key, ttl); err != nil {
		return false, err
	}
	ok, err := s.rdb.SetNX(ctx, s.base+"nonce:"+key, "1", max(ttl, time.Millisecond)).Result()
	if err != nil {
		return false, fmt.Errorf("pending: recording a one-time value: %w", err)
	}
	return ok, nil
}
