package lifecycle

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// Status returns the call id as its owner, principal, sees it: after waiting
// up to wait for it to leave the state it is in, when wait is positive (a
// long poll; Drain ends it at once). Reading a finished call is one of the
// ways its result, rejection or expiry reaches its caller, so take marks
// it delivered (an identical call after that is a new call). A call
// of another principal is pending.ErrNotFound: to anyone else it does not
// exist.
func (l *Lifecycle) Status(ctx context.Context, principal, id string, wait time.Duration, take bool) (pending.Call, error) {
	pc, err := l.own(ctx, principal, id)
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
	if take && pc.State.Terminal() && pc.State != pending.Cancelled {
		_, _, _ = l.store.Deliver(ctx, id)
	}
	return pc, nil
}

// Cancel cancels principal's waiting call id. A call already decided is
// pending.ErrConflict, with the call as it stands; another principal's call is
// pending.ErrNotFound.
func (l *Lifecycle) Cancel(ctx context.Context, principal, id string) (pending.Call, error) {
	pc, err := l.own(ctx, principal, id)
	if err != nil {
		return pc, err
	}
	cancelled, err := l.store.Cancel(ctx, id)
	if err != nil {
		l.reportEnded(err)
		return conflictCall(err, pc), err
	}
	l.onEnd(cancelled)
	return cancelled, nil
}

// own returns the call id when it is principal's. A call is owned by its
// principal (the credential kind with the subject): a JWT whose subject is
// an API key's subject is someone else. A call parked without a principal
// is matched on its subject.
func (l *Lifecycle) own(ctx context.Context, principal, id string) (pending.Call, error) {
	pc, err := l.store.Get(ctx, id)
	if err != nil {
		return pending.Call{ID: id}, err
	}
	owner := pc.Principal
	if owner == "" {
		owner = pc.Subject
	}
	if owner != principal {
		return pending.Call{ID: id}, pending.ErrNotFound
	}
	return pc, nil
}

// Run claims principal's approved call id and runs it now, on this
// request's goroutine, as a held request would, rather than leaving it to
// the sweeper (a task's client asking for its result). A call that is not
// approved, or that another executor claimed first, comes back as it
// stands; a run call comes back finished.
func (l *Lifecycle) Run(ctx context.Context, principal, id string) (pending.Call, error) {
	pc, err := l.own(ctx, principal, id)
	if err != nil || pc.State != pending.Approved {
		return pc, err
	}
	claimed, err := l.store.Claim(ctx, id, l.exec.Lease(pc))
	if err != nil {
		l.reportEnded(err)
		return conflictCall(err, pc), nil // another executor has it, or it expired
	}
	o := l.run(ctx, claimed)
	if o.Call.ID == "" {
		return claimed, nil
	}
	return o.Call, nil
}
