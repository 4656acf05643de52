package pending

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Abandoner is a Store whose Park can take effect after it returned an
// error: the park was sent, its answer did not come in time, and the
// store may still run it (a Redis that stalled on a fork, a slow
// network). The caller told its agent the call was not parked, so such a
// late park must never leave a call that waits for a decision: it would
// be announced, approved and run for an agent that gave up on it.
//
// MemoryStore is not one: its Park takes effect before it returns, or
// never.
type Abandoner interface {
	// Abandon makes sure call id does not wait for a decision, whether
	// its park landed already or lands later: a Waiting call is
	// cancelled, and a park of id is refused (ErrAbandoned) for
	// AbandonedFor. A call that was decided already is left as it is,
	// and its *StateError returned.
	Abandon(ctx context.Context, id string) error
}

// AbandonedFor is how long a park of an abandoned call is refused: past
// the time a park may still land, which is as long as the connection
// that sent it lives (TCP gives up retransmitting after ~15 minutes).
const AbandonedFor = 30 * time.Minute

// ErrAbandoned is Park's answer for a call its caller had given up on
// (Abandoner): nothing is stored.
var ErrAbandoned = errors.New("pending: the call was given up on before its park landed")

// Abandon implements [Abandoner]. The mark is written before the cancel:
// a park that lands between the two finds the mark, and one that landed
// before is cancelled.
func (s *RedisStore) Abandon(ctx context.Context, id string) error {
	if err := s.rdb.Set(ctx, abandonedKey(s.baseOf(id), id), "1", AbandonedFor).Err(); err != nil {
		return fmt.Errorf("pending: abandoning %s: %w", id, err)
	}
	_, err := s.Cancel(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// abandonedKey is the mark of an abandoned call, in the call's slot.
func abandonedKey(base, id string) string { return base + "abandoned:" + id }
