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

// Parked is the call pc's retry would attach to (pending.Store.Attaches):
// asked before a call runs without being parked, since an identical call
// still parked runs once, for both.
func (l *Lifecycle) Parked(ctx context.Context, pc pending.Call) (pending.Call, error) {
	return l.store.Attaches(ctx, pc)
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
	if ownerOf(pc) != principal {
		return pending.Call{ID: id}, pending.ErrNotFound
	}
	return pc, nil
}

// ownerOf is the principal a call belongs to: its Principal, or, for a
// call parked before calls recorded one, its Subject.
func ownerOf(pc pending.Call) string {
	if pc.Principal != "" {
		return pc.Principal
	}
	return pc.Subject
}

// Owned hands each of principal's calls among the newest perState the
// store lists in each state, those keep accepts, to each: briefs only
// (pending.Store.ListBrief) but for executed calls, read whole for their
// result, one at a time, so that a list holds one result at most (a
// hundred results of up to pending.max_result_bytes each would be held
// for every list request otherwise). The store lists by state, not by
// principal: an older call of principal's may be missing.
func (l *Lifecycle) Owned(ctx context.Context, principal string, perState int, keep func(pending.Call) bool, each func(pending.Call)) error {
	for _, st := range pending.States() {
		calls, err := l.store.ListBrief(ctx, st, perState)
		if err != nil {
			return err
		}
		for _, pc := range calls {
			if ownerOf(pc) != principal || !keep(pc) {
				continue
			}
			if pc.State == pending.Executed {
				if full, err := l.store.Get(ctx, pc.ID); err == nil {
					pc = full
				}
			}
			each(pc)
		}
	}
	return nil
}

// AwaitResult follows principal's call id until it ends, for up to hold
// or until the drain: a call approved that nobody claimed is run at once
// (Run), and a call that ends is marked delivered (Status with take), so
// an identical call after it parks anew. A task's client asking for its
// result is held no longer than any other request.
func (l *Lifecycle) AwaitResult(ctx context.Context, principal, id string, hold time.Duration) (pending.Call, error) {
	deadline := time.Now().Add(hold)
	var prev pending.State
	for {
		wait := time.Until(deadline)
		if l.drained.Err() == nil {
			// Approved and nobody running it: run it now rather than
			// after the sweeper's grace; Claim makes sure only once.
			if ran, err := l.Run(ctx, principal, id); err == nil && ran.State.Terminal() {
				wait = 0
			}
		}
		pc, err := l.Status(ctx, principal, id, max(wait, 0), true)
		if err != nil || pc.State.Terminal() || wait <= 0 || ctx.Err() != nil || l.drained.Err() != nil {
			return pc, err
		}
		if pc.State == prev {
			// The wait ended without a change (the store failed): do
			// not spin.
			select {
			case <-ctx.Done():
			case <-time.After(min(250*time.Millisecond, max(time.Until(deadline), 0))):
			}
		}
		prev = pc.State
	}
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
	claimed, err := l.claim(ctx, pc)
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
