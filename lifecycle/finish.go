package lifecycle

import (
	"context"
	"errors"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// finishRetryFirst and finishRetryMax pace the attempts to record an
// executed call's result while the store does not answer.
var (
	finishRetryFirst = 100 * time.Millisecond
	finishRetryMax   = 2 * time.Second
)

// finishRetrying is finish, asked again while the store does not answer
// (a timeout, a lost connection, a paused Redis) until the claim's lease
// runs out or ctx ends. The upstream has answered by now: a result the
// store does not record makes the call unknown at the end of its lease,
// the answer lost, while one recorded late still makes it executed. The
// fence keeps every attempt safe: the store refuses one past the lease
// (ErrLapsed) or once the call has another end (ErrFenced). An attempt
// whose answer was lost (here, or the held request's, handed on) may have
// been recorded all the same: the next one then finds the call no longer
// executing, and the call read back tells, by its fence. deliver says, at
// each attempt, whether the result is marked delivered with it (its
// caller holds the request that takes it).
func (l *Lifecycle) finishRetrying(ctx context.Context, pc pending.Call, state pending.State, res pending.Result, deliver func() bool) (pending.Call, error) {
	until := pc.LeaseUntil
	if until.IsZero() {
		until = pc.ClaimedAt.Add(l.exec.Lease(pc))
	}
	wait := finishRetryFirst
	for {
		done, err := l.finish(ctx, pc, state, res, deliver())
		switch {
		case err == nil:
			return done, nil
		case errors.Is(err, pending.ErrFenced) && !errors.Is(err, pending.ErrLapsed):
			if now, gerr := l.store.Get(ctx, pc.ID); gerr == nil && now.Fence == pc.Fence && now.State == state && now.Result != nil {
				now.Info, now.Brief = pc.Info, pc.Brief
				return now, nil // recorded by an attempt whose answer was lost
			}
			return done, err
		case !storeAway(err) || time.Now().Add(wait).After(until):
			return done, err
		}
		l.warn("cannot record an executed call's result yet: trying again until its lease ends", "call_id", pc.ID, "error", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return done, err
		}
		wait = min(2*wait, finishRetryMax)
	}
}

// storeAway reports whether err is the store not answering, rather than
// one of its refusals (a stale fence, a lapsed lease, a call it no longer
// has, a transition its state does not allow).
func storeAway(err error) bool {
	var se *pending.StateError
	return !errors.Is(err, pending.ErrFenced) && !errors.Is(err, pending.ErrNotFound) && !errors.As(err, &se)
}
