package lifecycle

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// Sweep runs the background work of parked calls until ctx ends, every
// interval: calls past their expiry are expired (and executors past their
// lease marked unknown), and approved calls that nobody holding their caller
// claimed within grace are executed here, so an approval after the hold ran
// out, or on a replica that died, still leads to one execution whose result
// waits for the caller.
func (l *Lifecycle) Sweep(ctx context.Context, interval, grace time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.SweepOnce(ctx, grace)
	}
}

// SweepOnce does one round of Sweep's work.
func (l *Lifecycle) SweepOnce(ctx context.Context, grace time.Duration) {
	// Calls past their expiry end first, and are reported: a claim of an
	// approved call already overdue would expire it too, silently.
	expired, err := l.store.Expire(ctx, 100)
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
	l.executeApproved(ctx, 0, func(pc pending.Call) bool { return time.Until(pc.ExpiresAt) < grace+2*time.Second })
	l.executeApproved(ctx, grace, nil)
}

// sweepParallel bounds the approved calls one sweep executes at once: a
// batch of slow tools runs side by side, and no sweep holds more upstream
// connections than this.
const sweepParallel = 8

// executeApproved claims and executes approved calls decided at least
// grace ago (and, when urgent is set, only those it selects), up to
// sweepParallel at a time; it returns once they are finished. Each call is
// claimed only when it can start, so no claim's lease runs while it waits
// for a slot.
func (l *Lifecycle) executeApproved(ctx context.Context, grace time.Duration, urgent func(pending.Call) bool) {
	approved, err := l.store.Approved(ctx, grace, 20)
	if err != nil {
		l.warn("sweeper: cannot list approved calls", "error", err)
		return
	}
	slots := make(chan struct{}, sweepParallel)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, pc := range approved {
		if urgent != nil && !urgent(pc) {
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			l.executeOne(ctx, pc)
		})
	}
}

// executeOne claims an approved call and, when the claim is the sweeper's,
// executes it and records the outcome.
func (l *Lifecycle) executeOne(ctx context.Context, pc pending.Call) {
	claimed, err := l.store.Claim(ctx, pc.ID, l.exec.Lease(pc))
	if errors.Is(err, pending.ErrConflict) {
		return // another executor was first
	}
	if err != nil {
		l.log.Warn("sweeper: cannot claim an approved call", "call_id", pc.ID, "error", err)
		return
	}
	// A claimed call is finished and recorded even when shutdown begins
	// meanwhile (within its lease).
	xctx := context.WithoutCancel(ctx)
	state, res := l.exec.Execute(xctx, claimed)
	if _, err := l.finish(xctx, claimed, state, res); err != nil {
		l.log.Error("sweeper: cannot record an executed call's result", "call_id", pc.ID, "error", err)
	}
	l.log.Info("sweeper executed an approved call", "call_id", pc.ID, "state", string(state), "status", res.Status)
}
