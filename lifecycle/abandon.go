package lifecycle

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// A park that failed may still land, or have landed: it was sent, and its
// answer did not come (parkTimeout ran out on a Redis that stalled; the
// answer was lost and the client's retries could not connect) or did not
// say it was kept (pending.ErrNotReplicated). The agent is told its call was not
// parked, so the call is abandoned (pending.Abandoner): cancelled if it
// landed, refused if it lands later. An abandon the store does not take
// either is tried again by each sweep, until pending.AbandonedFor has
// passed and no park sent then can land any more.

// abandonTimeout bounds the abandon tried at once, before the agent is
// answered: a store that just failed to park in time may still be slow,
// and the sweeper tries again.
const abandonTimeout = time.Second

// maxAbandons bounds the abandons kept for the sweeper: past it, the
// oldest is given up, with an error logged.
const maxAbandons = 4096

// abandons are the abandons the store did not take yet, by call ID, with
// when each park failed.
type abandons struct {
	mu  sync.Mutex
	ids map[string]time.Time
}

// mayHaveLanded reports whether a park that failed with err may still
// take effect: anything but the store's refusal. A connection that could
// not be made may be a client's retry, after an attempt that was sent and
// ran but whose answer was lost: go-redis returns the last attempt's
// error only.
func mayHaveLanded(err error) bool {
	return !errors.Is(err, pending.ErrTooMany) && !errors.Is(err, pending.ErrAbandoned)
}

// abandon abandons call id, whose park failed with err, now; or, if the
// store does not take it, at the next sweeps.
func (l *Lifecycle) abandon(ctx context.Context, id string, err error) {
	if !mayHaveLanded(err) {
		return
	}
	ab := l.abandoner()
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	if l.abandonNow(actx, ab, id) {
		return
	}
	l.abandonLater(id)
}

// abandonLater keeps call id for the sweeper to abandon.
func (l *Lifecycle) abandonLater(id string) {
	a := &l.abandoned
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids == nil {
		a.ids = map[string]time.Time{}
	}
	if len(a.ids) >= maxAbandons {
		oldest, at := "", time.Time{}
		for k, t := range a.ids {
			if oldest == "" || t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(a.ids, oldest)
		l.alarm("too many calls to abandon: one is given up, and may still wait for a decision", "call_id", oldest)
	}
	a.ids[id] = time.Now()
}

// forget drops id from the abandons kept.
func (a *abandons) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.ids, id)
}

// count is how many abandons are kept.
func (a *abandons) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ids)
}

// abandonNow asks the store to abandon id, and reports whether that is
// done with: abandoned, or decided already (logged: it runs as decided).
func (l *Lifecycle) abandonNow(ctx context.Context, ab pending.Abandoner, id string) bool {
	err := ab.Abandon(ctx, id)
	if se := (*pending.StateError)(nil); errors.As(err, &se) {
		switch se.Call.State {
		case pending.Cancelled, pending.Rejected, pending.Expired: // nothing runs
		default:
			l.log.Warn("a call to abandon (its park failed, or its client left) was approved before it could be: it runs as approved",
				"call_id", id, "state", string(se.Call.State))
		}
		return true
	}
	if err != nil {
		l.warn("cannot abandon a call (its park failed, or its client left): tried again by the sweeper", "call_id", id, "error", err)
		return false
	}
	l.log.Info("a call is abandoned (its park failed, or its client left): it will not wait for a decision", "call_id", id)
	return true
}

// retryAbandons is the sweeper's part: the abandons kept are tried again,
// a batch a round, and forgotten once done or too old to matter.
func (l *Lifecycle) retryAbandons(ctx context.Context) bool {
	return l.retryAbandonsUpTo(ctx, sweepBatch)
}

// retryAbandonsUpTo is retryAbandons with batches of n, until ctx ends.
func (l *Lifecycle) retryAbandonsUpTo(ctx context.Context, n int) bool {
	a := &l.abandoned
	a.mu.Lock()
	if len(a.ids) == 0 {
		a.mu.Unlock()
		return true
	}
	batch := make(map[string]time.Time, min(len(a.ids), n))
	for id, t := range a.ids {
		if len(batch) == n {
			break
		}
		batch[id] = t
	}
	a.mu.Unlock()
	ok, ab := true, l.abandoner()
	for id, failed := range batch {
		if ctx.Err() != nil {
			return false
		}
		done := time.Since(failed) > pending.AbandonedFor
		if done {
			l.alarm("a call to abandon (its park failed, or its client left) could not be abandoned in time", "call_id", id)
		} else if done = l.abandonNow(ctx, ab, id); !done {
			ok = false
		}
		if done {
			a.mu.Lock()
			delete(a.ids, id)
			a.mu.Unlock()
		}
	}
	return ok
}

// abandoner is the store's Abandon, or a cancel for a store whose parks
// take effect before they answer, or never: a call such a store kept
// although its park failed (pending.ErrNotReplicated) is there already.
func (l *Lifecycle) abandoner() pending.Abandoner {
	if ab, ok := l.store.(pending.Abandoner); ok {
		return ab
	}
	return cancelOnly{l.store}
}

type cancelOnly struct{ pending.Store }

func (s cancelOnly) Abandon(ctx context.Context, id string) error {
	_, err := s.Cancel(ctx, id)
	if errors.Is(err, pending.ErrNotFound) {
		return nil
	}
	return err
}
