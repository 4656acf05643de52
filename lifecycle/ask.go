package lifecycle

import (
	"context"
	"errors"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// parkTimeout bounds parking: a store that cannot park within it is
// treated as down, and the call is refused rather than held.
const parkTimeout = 3 * time.Second

// Hold says how long and how to hold the request that asked.
type Hold struct {
	// For is how long the request is held waiting for a decision; zero
	// answers at once with the call's state.
	For time.Duration
	// Progress, if set, is called every ProgressEvery while the call
	// waits, so a caller whose timeout resets on progress stays.
	Progress      func(pending.Call)
	ProgressEvery time.Duration
	// Held, if set, is called once, before the request is held, with the
	// call it parked or attached to as the store has it, when that call
	// waits for a decision: the caller may tell its agent how the call
	// can be decided.
	Held func(pending.Call)
	// CancelOnLeave makes the caller's leaving cancel a waiting call
	// (a stateless MCP client closing its stream); otherwise the call
	// stays parked for a retry or a status poll.
	CancelOnLeave bool
	// Same, if set, reports whether the parked call a retry found (by its
	// key, or as identical) is this request's in what the key does not
	// weigh (the headers it sends): one that is not is refused, as a
	// reused key is (KeyReused), rather than attached and answered with
	// another request's outcome.
	Same func(stored pending.Call) bool
}

// Ask parks pc (or attaches the request to the identical call already
// parked, as pc.AttachKey says: one still live, or one that ended with a
// result, rejection or expiry not yet delivered), then holds the request
// until the call is decided or h.For runs out. A new call beyond the
// store's caps is not parked: the Outcome is TooMany. An approved call is
// claimed and run here, since this request is there to take its result.
// ctx is the request's: when it ends the caller has gone.
func (l *Lifecycle) Ask(ctx context.Context, pc pending.Call, h Hold) Outcome {
	pctx, cancel := context.WithTimeout(ctx, parkTimeout)
	stored, attached, err := l.store.Park(pctx, pc, l.ttl)
	cancel()
	if errors.Is(err, pending.ErrTooMany) {
		msg := "call not parked: too many parked calls"
		if re := (*pending.RateError)(nil); errors.As(err, &re) {
			msg = "call not parked: its principal parks too often"
		}
		l.log.Info(msg, "call_id", pc.ID, "error", err)
		return Outcome{Kind: TooMany, Call: pc, Err: err}
	}
	if err != nil {
		// Fail closed: nothing runs without a durable record.
		l.log.Error("cannot park call", "call_id", pc.ID, "error", err)
		// The agent is told it was not parked: a park that may still
		// land (one Redis ran late, or kept without its replicas) is
		// abandoned, lest an approver find it and it run unannounced.
		l.abandon(ctx, pc.ID, err)
		return Outcome{Kind: NotParked, Call: pc, Err: err}
	}
	if attached {
		// An Idempotency-Key finds a call by the key alone: one with the
		// same arguments to another tool (an MCP tools/call's name is
		// not in its arguments' digest) is another call as well.
		if pc.ArgsDigest != stored.ArgsDigest || pc.Tool != stored.Tool || (h.Same != nil && !h.Same(stored)) {
			return Outcome{Kind: KeyReused, Call: stored}
		}
		// A request holds the call again: it is no longer one to abandon
		// (a client that left, whose cancel the store did not take).
		l.abandoned.forget(stored.ID)
		l.log.Info("call attached to a parked call", "call_id", pc.ID, "parked_call_id", stored.ID, "state", string(stored.State))
	} else {
		l.onPark(stored)
	}
	return l.hold(ctx, stored, h)
}

// hold follows pc until it is decided, runs it when approved, and says
// what became of it.
func (l *Lifecycle) hold(ctx context.Context, pc pending.Call, h Hold) Outcome {
	if h.Held != nil && pc.State == pending.Waiting {
		h.Held(pc)
	}
	pc = slim(pc)
	wctx, cancel := context.WithTimeout(ctx, h.For)
	defer cancel()
	defer context.AfterFunc(l.drained, cancel)()
	for {
		switch pc.State {
		case pending.Approved:
			if ctx.Err() != nil {
				return Outcome{Kind: Gone, Call: pc} // the call waits for a retry or the sweeper
			}
			claimed, err := l.claim(ctx, pc)
			if err == nil {
				return l.run(ctx, claimed)
			}
			if ctx.Err() != nil {
				return Outcome{Kind: Gone, Call: pc}
			}
			if !errors.Is(err, pending.ErrConflict) {
				return l.failed(pc, err)
			}
			l.reportEnded(err)
			pc = slim(conflictCall(err, pc)) // another executor has it (wait for its result), or it expired
			continue
		case pending.Executed, pending.Failed, pending.Unknown:
			return l.deliver(ctx, pc)
		case pending.Rejected, pending.Expired:
			return l.refuse(ctx, pc)
		case pending.Cancelled:
			return Outcome{Kind: Ended, Call: pc} // its caller cancelled it: nothing to deliver
		}
		next, due, claimed, err := l.waitStep(wctx, h, pc)
		if claimed.ID != "" {
			return l.run(ctx, claimed) // an approval on this replica claimed it for this request
		}
		if due {
			h.Progress(pc)
			continue
		}
		switch {
		case err == nil:
			pc = moved(pc, next)
		case errors.Is(err, pending.ErrNotFound):
			return Outcome{Kind: Lost, Call: pc}
		case ctx.Err() != nil:
			if h.CancelOnLeave {
				l.cancelLeft(context.WithoutCancel(ctx), pc.ID)
			}
			return Outcome{Kind: Gone, Call: pc}
		case wctx.Err() != nil:
			if next.ID != "" {
				pc = slim(next)
			}
			if pc.State == pending.Waiting || pc.State == pending.Approved || pc.State == pending.Executing {
				return Outcome{Kind: Waiting, Call: pc}
			}
		default:
			return l.failed(pc, err)
		}
	}
}

// waitStep waits for the call to change, but no longer than until the next
// progress report when one is wanted; due reports that the step ended for
// progress, not for the hold. A waiting call may come back claimed
// instead, by an approval made on this replica (handoff.go): claimed is
// then the call, whole, for this request to run.
func (l *Lifecycle) waitStep(ctx context.Context, h Hold, pc pending.Call) (next pending.Call, due bool, claimed pending.Call, err error) {
	step := ctx
	if h.Progress != nil && h.ProgressEvery > 0 {
		var cancel context.CancelFunc
		step, cancel = context.WithTimeout(ctx, h.ProgressEvery)
		defer cancel()
	}
	var sl *slot
	if pc.State == pending.Waiting {
		sl = l.slots.hold(pc.ID, l.exec.Lease(pc))
	}
	next, err = l.store.WaitHeld(step, pc.ID, pc.State)
	if sl != nil {
		if c, ok := l.slots.leave(ctx, pc.ID, sl); ok {
			return pending.Call{}, false, c, nil
		}
	}
	return next, err != nil && step != ctx && step.Err() != nil && ctx.Err() == nil, pending.Call{}, err
}

// runOrphan runs, in the background, a call an approval claimed for a
// request held here that gave up waiting for it (handoff.go): as the
// sweeper runs an approved call nobody holds, its result kept for a retry
// or a status poll.
func (l *Lifecycle) runOrphan(pc pending.Call) {
	l.unheld.Go(func() { l.runUnheld(context.Background(), pc, "approved call executed for a request that left") })
}

// cancelLeft cancels a call whose caller left, where leaving means cancel.
// A store that does not take the cancel has the call abandoned by the
// sweeper instead (abandon.go): it must not wait on for an approver, and
// run, once the store is back.
func (l *Lifecycle) cancelLeft(ctx context.Context, id string) {
	cancelled, err := l.store.Cancel(ctx, id)
	if se := (*pending.StateError)(nil); errors.As(err, &se) || errors.Is(err, pending.ErrNotFound) {
		return // already decided (it runs or ended as decided), or gone
	}
	if err != nil {
		l.warn("cannot cancel a call whose stateless MCP client closed its stream: tried again by the sweeper", "call_id", id, "error", err)
		l.abandonLater(id)
		return
	}
	l.log.Info("stateless MCP client closed its stream: call cancelled", "call_id", id)
	l.onEnd(cancelled)
}

// claim claims approved call pc for this executor, for its lease, and
// stamps the claim with when it was asked for (pending.Call.ClaimedAt):
// the execution's time runs from then.
func (l *Lifecycle) claim(ctx context.Context, pc pending.Call) (pending.Call, error) {
	start := time.Now()
	claimed, err := l.store.Claim(ctx, pc.ID, l.exec.Lease(pc))
	if err != nil {
		return claimed, err
	}
	claimed.ClaimedAt = start
	return claimed, nil
}

// heldFinishWait bounds how long a held agent waits for its executed
// call's result to be recorded while the store does not answer.
var heldFinishWait = 5 * time.Second

// run executes a call this request claimed, records the result, and hands
// it to this request, marked delivered with the recording: the result
// reaches exactly one request, even when retries are attached. A caller
// that has gone by then does not take it, so a retry still can.
func (l *Lifecycle) run(ctx context.Context, pc pending.Call) Outcome {
	// The execution must finish and be recorded even if the caller leaves.
	xctx := context.WithoutCancel(ctx)
	state, res := l.exec.Execute(xctx, pc)
	// The agent waits on the result: a store that does not answer is
	// asked again for heldFinishWait at most, then the agent has the
	// result anyway (below), and the store is asked on in the background
	// until the lease ends. Only the first attempt marks the result
	// delivered with it (one round trip, the usual case), and only if the
	// agent is still there. A later one records it alone, and it is then
	// delivered apart: an attempt whose answer was lost may have been
	// recorded, and had it marked the result delivered too, an agent that
	// left meanwhile would leave it to nobody. (The first attempt keeps
	// that window: its answer lost as the agent leaves.)
	take := func() bool { return ctx.Err() == nil }
	attempts := 0
	deliverFirst := func() bool { attempts++; return attempts == 1 && take() }
	fctx, cancel := context.WithTimeout(xctx, heldFinishWait)
	defer cancel()
	done, err := l.finishRetrying(fctx, pc, state, res, deliverFirst)
	switch {
	case err != nil && storeAway(err):
		// Not recorded yet. An agent still there is the only one who can
		// have the result now, and the recording behind it marks it
		// delivered; one that has gone leaves it to a retry, which finds
		// it recorded later.
		took := take()
		l.unheld.Go(func() {
			if _, err := l.finishRetrying(xctx, pc, state, res, func() bool { return took }); err != nil {
				l.log.Error("cannot record an executed call's result", "call_id", pc.ID, "error", err)
			}
		})
		if !took {
			return Outcome{Kind: Gone, Call: done}
		}
		done.Result = &res
		return Outcome{Kind: Delivered, Call: done, Result: res}
	case err != nil:
		// The lease ran out and the call is unknown, or the store has
		// lost it: this caller is the only one who can have the result.
		l.log.Error("cannot record an executed call's result", "call_id", pc.ID, "error", err)
		done.Result = &res
		return Outcome{Kind: Delivered, Call: done, Result: res}
	case !take():
		return Outcome{Kind: Gone, Call: done} // recorded for a retry, or taken by one
	case !done.Delivered:
		return l.deliver(ctx, done) // recorded by a later attempt: handed over apart
	case done.Result == nil:
		return Outcome{Kind: NoResult, Call: done}
	}
	return Outcome{Kind: Delivered, Call: done, Result: *done.Result}
}

// finish records an executed call's result, and marks it delivered with
// it when deliver says so (the executor holds its caller's request). A
// late write that itself made the call unknown (its lease ran out, and no
// sweep saw it first) reports that end, since nothing else will. On an
// error the call is returned as the store now holds it, or as this
// executor left it.
func (l *Lifecycle) finish(ctx context.Context, pc pending.Call, state pending.State, res pending.Result, deliver bool) (pending.Call, error) {
	finish := l.store.Finish
	if deliver {
		finish = l.store.FinishDeliver
	}
	done, err := finish(ctx, pc.ID, pc.Fence, state, res)
	switch {
	case err == nil:
		// The store leaves out what the claim gave (pending.Store.Finish),
		// and never changes once parked.
		done.Info, done.Brief = pc.Info, pc.Brief
		return done, nil
	case errors.Is(err, pending.ErrLapsed):
		l.log.Warn("executor outlived its lease: the call is unknown", "call_id", pc.ID)
		l.onEnd(done)
		return done, err
	}
	pc.State = state
	return pc, err
}

// deliver hands a finished call's stored result to this request, once: a
// request that finds it already delivered, or a call that ended without a
// result, learns that instead. A caller that has gone does not take the
// result, so a retry still can.
func (l *Lifecycle) deliver(ctx context.Context, pc pending.Call) Outcome {
	if ctx.Err() != nil {
		return Outcome{Kind: Gone, Call: pc}
	}
	first, now, err := l.store.Deliver(ctx, pc.ID)
	switch {
	case err != nil:
		return l.failed(pc, err)
	case now.Result == nil:
		return Outcome{Kind: NoResult, Call: now}
	case !first:
		return Outcome{Kind: Taken, Call: now}
	}
	return Outcome{Kind: Delivered, Call: now, Result: *now.Result}
}

// refuse hands a rejection or an expiry to this request, once, as deliver
// hands a result: the first request to learn it marks it delivered, and
// from then on an identical call is a new call that asks again
// (pending.Store.Park). Until then a retry attaches and learns it here, the
// approver's comment included. A request that finds it delivered already
// gets Taken, as for a result: of two identical retries at once, or of two
// requests held on one call, one learns the refusal and the other is told
// it went to another request (the status URL still shows it); neither
// parks a new call, so a refusal never leads straight to asking the
// approvers again. A caller that has gone does not take it, so a retry
// still learns it. If the store cannot mark it, this request learns the
// refusal anyway (a retry may then learn it again): a decided call is
// never answered as a store failure.
func (l *Lifecycle) refuse(ctx context.Context, pc pending.Call) Outcome {
	if ctx.Err() != nil {
		return Outcome{Kind: Gone, Call: pc}
	}
	first, now, err := l.store.Deliver(ctx, pc.ID)
	switch {
	case err != nil:
		l.log.Warn("cannot mark a refusal delivered", "call_id", pc.ID, "state", string(pc.State), "error", err)
		return Outcome{Kind: Ended, Call: pc}
	case !first:
		return Outcome{Kind: Taken, Call: slim(now)}
	}
	return Outcome{Kind: Ended, Call: slim(now)}
}

// moved is the held call pc as next, from WaitHeld, says it now stands.
// An approval or a claim may come without the rest of the call
// (WaitHeld), and needs none: the hold claims an approved call next, and
// Claim returns it whole; an executing call is someone's to run (or was
// claimed for this request, handoff.go), and the hold waits for its end.
func moved(pc, next pending.Call) pending.Call {
	if (next.State == pending.Approved || next.State == pending.Executing) && next.CreatedAt.IsZero() {
		pc.State = next.State
		return pc
	}
	return slim(next)
}

// slim is what a hold keeps of a call while it waits: its state, not its
// request, display document or result. A held request would otherwise keep
// a parked body in memory (several copies of it) for as long as it waits;
// the store has them, and Claim and Deliver read them when they are needed.
func slim(pc pending.Call) pending.Call {
	return pending.Call{
		ID: pc.ID, State: pc.State, Subject: pc.Subject, Principal: pc.Principal, Upstream: pc.Upstream, Tool: pc.Tool,
		ExpiresAt: pc.ExpiresAt, CreatedAt: pc.CreatedAt, DecidedAt: pc.DecidedAt, DecidedBy: pc.DecidedBy, Comment: pc.Comment,
	}
}
