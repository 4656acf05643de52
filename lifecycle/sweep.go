package lifecycle

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// Sweep runs the background work of parked calls until ctx ends, every
// interval: calls past their expiry are expired (and executors past their
// lease marked unknown), and approved calls that nobody holding their caller
// claimed within grace are executed here, so an approval after the hold ran
// out, or on a replica that died, still leads to one execution whose result
// waits for the caller.
//
// While the store fails, the rounds back off (sweepDelay): a store that is
// down is not asked every interval by every replica. A round that found
// a full batch of work is followed by the next at once. A store that lists
// approved calls but refuses their claims (a primary taking no writes
// while its replica is away, in a failover) is asked again every
// interval: it answers, and each of those calls expires unexecuted unless
// a claim lands in the few seconds the store may take writes again within
// its window, which a pause of up to maxSweepBackoff could miss.
func (l *Lifecycle) Sweep(ctx context.Context, interval, grace time.Duration) {
	delay := interval
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := l.sweep(ctx, grace)
		switch delay = sweepDelay(delay, interval, r.ok); {
		case r.ok && r.more:
			delay = 0
		case r.unclaimed:
			delay = interval
		}
		t.Reset(delay)
	}
}

// maxSweepBackoff is the longest pause between rounds while the store
// fails: long enough to spare a store that is down, short enough that
// expiries and approved calls are seen soon after it is back.
const maxSweepBackoff = 10 * time.Second

// sweepDelay is the pause before the next round: interval after a round
// the store answered, else twice the last pause, up to maxSweepBackoff.
func sweepDelay(last, interval time.Duration, ok bool) time.Duration {
	if ok {
		return interval
	}
	return min(max(2*last, interval), max(maxSweepBackoff, interval))
}

// Settle ends this process's part in the calls at shutdown, once no
// request is held here and no decision can arrive any more (the proxy and
// approvals listeners are closed). With runApproved, for a store no other
// process shares (the memory store), it first executes the calls approved
// and not yet claimed, approvals made while the proxy drained among them,
// which would otherwise go with the process unexecuted. Then it waits for
// the approved calls it runs for requests that left (runOrphan). It
// returns when both are done or ctx ends, reporting whether they were:
// a call still being sent then has its lease, which settles it unknown.
// The abandons the store did not take yet are tried once more first: no
// sweep of this process will try them again.
func (l *Lifecycle) Settle(ctx context.Context, runApproved bool) (done bool) {
	// Every one is tried in each pass (a store may take some and not
	// others: a shard that is down), until a pass gains nothing.
	for n := l.abandoned.count(); n > 0 && ctx.Err() == nil; {
		l.retryAbandonsUpTo(ctx, n)
		if left := l.abandoned.count(); left < n {
			n = left
			continue
		}
		break
	}
	if n := l.abandoned.count(); n > 0 {
		l.log.Error("calls to abandon are given up at shutdown: a park that lands later waits for a decision", "calls", n)
	}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		for runApproved && ctx.Err() == nil {
			if r := l.executeApproved(ctx, 0, nil); !r.ok || !r.more {
				break
			}
		}
	}()
	select {
	case <-ran:
	case <-ctx.Done():
		return false
	}
	select {
	case <-l.unheld.Idle():
		return true
	case <-ctx.Done():
		return false
	}
}

// SweepOnce does one round of Sweep's work.
func (l *Lifecycle) SweepOnce(ctx context.Context, grace time.Duration) { l.sweep(ctx, grace) }

// sweepBatch is how many calls a round expires, and how many approved
// calls it lists: a full batch means more may be waiting.
const sweepBatch = 64

// round is what one sweep found.
type round struct {
	ok        bool // the store answered every request
	more      bool // a batch was full: more work may be waiting
	unclaimed bool // an approved call's claim failed in the store
}

// sweep does one round.
func (l *Lifecycle) sweep(ctx context.Context, grace time.Duration) round {
	abandoned := l.retryAbandons(ctx)
	// Calls past their expiry end first, and are reported: a claim of an
	// approved call already overdue would expire it too, silently.
	expired, err := l.store.Expire(ctx, sweepBatch)
	if err != nil {
		l.warn("sweeper: cannot expire calls", "error", err)
	}
	for _, pc := range expired {
		l.log.Info("parked call ended", "call_id", pc.ID, "state", string(pc.State))
		l.onEnd(pc)
	}
	// An approved call close to its expiry is executed now rather than
	// after the grace: otherwise an approval in the last seconds of the
	// ttl would expire unexecuted although the approver saw "approved".
	urgent := l.executeApproved(ctx, 0, func(pc pending.Call) bool { return time.Until(pc.ExpiresAt) < grace+2*time.Second })
	rest := l.executeApproved(ctx, grace, nil)
	return round{
		ok:        err == nil && urgent.ok && rest.ok && abandoned,
		more:      len(expired) == sweepBatch || rest.more,
		unclaimed: urgent.unclaimed || rest.unclaimed,
	}
}

// sweepParallel bounds the approved calls one sweep executes at once: a
// batch of slow tools runs side by side, and no sweep holds more upstream
// connections than this.
const sweepParallel = 8

// executeApproved claims and executes approved calls decided at least
// grace ago (and, when urgent is set, only those it selects), up to
// sweepParallel at a time; it returns once they are finished, with
// whether the list was a full batch and whether a claim failed. Each call is claimed only when it
// can start, so no claim's lease runs while it waits for a slot. The
// list is taken in a random order: every replica's sweeper lists the
// same oldest calls, and in order they would all race for the first.
func (l *Lifecycle) executeApproved(ctx context.Context, grace time.Duration, urgent func(pending.Call) bool) round {
	approved, err := l.store.Approved(ctx, grace, sweepBatch)
	if err != nil {
		l.warn("sweeper: cannot list approved calls", "error", err)
		return round{}
	}
	rand.Shuffle(len(approved), func(i, j int) { approved[i], approved[j] = approved[j], approved[i] })
	slots := make(chan struct{}, sweepParallel)
	var wg sync.WaitGroup
	var unclaimed atomic.Bool
	defer wg.Wait()
	for _, pc := range approved {
		if urgent != nil && !urgent(pc) {
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return round{ok: true}
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if !l.executeOne(ctx, pc) {
				unclaimed.Store(true)
			}
		})
	}
	wg.Wait() // before unclaimed is read
	return round{ok: true, more: len(approved) == sweepBatch, unclaimed: unclaimed.Load()}
}

// executeOne claims an approved call and, when the claim is the sweeper's,
// executes it and records the outcome. It reports false when the store
// failed the claim: the call still waits.
func (l *Lifecycle) executeOne(ctx context.Context, pc pending.Call) (answered bool) {
	claimed, err := l.claim(ctx, pc)
	if errors.Is(err, pending.ErrConflict) {
		l.reportEnded(err) // it expired in the meantime
		return true        // or another executor was first
	}
	if err != nil {
		l.warn("sweeper: cannot claim an approved call", "call_id", pc.ID, "error", err)
		return false
	}
	l.runUnheld(ctx, claimed, "sweeper executed an approved call")
	return true
}

// runUnheld executes a claimed call that no request holds (the sweeper's,
// or one an approval claimed for a request that left) and records its
// outcome, kept for a retry or a status poll. A claimed call is finished
// and recorded even when shutdown begins meanwhile (within its lease).
func (l *Lifecycle) runUnheld(ctx context.Context, pc pending.Call, done string) {
	xctx := context.WithoutCancel(ctx)
	state, res := l.exec.Execute(xctx, pc)
	if _, err := l.finishRetrying(xctx, pc, state, res, func() bool { return false }); err != nil {
		l.log.Error("cannot record an executed call's result", "call_id", pc.ID, "error", err)
	}
	l.log.Info(done, "call_id", pc.ID, "state", string(state), "status", res.Status)
}
