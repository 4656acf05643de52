package lifecycle

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// Status returns the call id as its caller, subject, sees it: after waiting
// up to wait for it to leave the state it is in, when wait is positive (a
// long poll; Drain ends it at once). Reading a finished call is one of the
// ways its result reaches its caller, so take marks it delivered. A call
// of another subject is pending.ErrNotFound: to anyone else it does not
// exist.
func (l *Lifecycle) Status(ctx context.Context, subject, id string, wait time.Duration, take bool) (pending.Call, error) {
	pc, err := l.own(ctx, subject, id)
	if err != nil {
		return pc, err
	}
	if wait > 0 && !pc.State.Terminal() {
		wctx, cancel := context.WithTimeout(ctx, wait)
		stop := context.AfterFunc(l.drained, cancel)
		next, werr := l.store.Wait(wctx, id, pc.State)
		stop()
		cancel()
		if werr == nil || next.ID != "" {
			pc = next
		}
	}
	if take && (pc.State == pending.Executed || pc.State == pending.Failed || pc.State == pending.Unknown) {
		_, _, _ = l.store.Deliver(ctx, id)
	}
	return pc, nil
}

// Cancel cancels subject's waiting call id. A call already decided is
// pending.ErrConflict, with the call as it stands; another subject's call is
// pending.ErrNotFound.
func (l *Lifecycle) Cancel(ctx context.Context, subject, id string) (pending.Call, error) {
	pc, err := l.own(ctx, subject, id)
	if err != nil {
		return pc, err
	}
	cancelled, err := l.store.Cancel(ctx, id)
	if err != nil {
		return conflictCall(err, pc), err
	}
	l.onEnd(cancelled)
	return cancelled, nil
}

// own returns the call id when it is subject's.
func (l *Lifecycle) own(ctx context.Context, subject, id string) (pending.Call, error) {
	pc, err := l.store.Get(ctx, id)
	if err != nil {
		return pending.Call{ID: id}, err
	}
	if pc.Subject != subject {
		return pending.Call{ID: id}, pending.ErrNotFound
	}
	return pc, nil
}
