package lifecycle

import (
	"context"
	"sync"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// An approval made on the replica that holds the call's request hands the
// call straight to that request: the decision claims it in the same step
// (pending.Decision.Claim), and the request runs it without waking on the
// store's news of the approval and claiming it in a transition of its own.
// On Redis that is one script call, one message and a wake-up fewer per
// approved call. An approval made anywhere else, or when the request is
// not waiting on it right then, goes the usual way: the request hears of
// it from the store and claims it.
//
// The hand-over is a slot. A request registers one for its call while it
// waits; a decision takes the slot out of the registry before it asks the
// store. A claimed call goes into the slot, and the request, woken by the
// store as by any move of its call, finds it there when its wait ends. A
// decision that claimed nothing (a rejection, an approval that leaves the
// call waiting for more approvers, an error) puts the slot back, or, when
// the request's wait has ended meanwhile, puts a zero Call in it. A
// request whose wait ends takes its slot back, unless a decision took it
// first: then it waits for what the decision puts in it, and runs a
// claimed call whatever ended its wait, since it alone holds the claim;
// but it waits no longer than its hold: a request that gives up first
// abandons the slot, and the decision then runs the call it claimed in
// the background, as the sweeper would, for a retry or a status poll to
// take its result.

// handoverMargin lengthens the lease of a claim made with an approval by
// what the hand-over itself may take: the rest of the decision's store
// call, and the request's wake-up (a message, or a poll interval when the
// message is lost). The execution keeps its whole lease (Executor.Lease).
const handoverMargin = 5 * time.Second

// slot is one held request's place for the call a decision claims.
type slot struct {
	lease     time.Duration
	leaving   bool              // the request's wait ended (under Handoff.mu)
	abandoned bool              // the request gave up waiting for the decision (under Handoff.mu)
	got       chan pending.Call // one call, once the slot is taken for good
}

// Handoff is where the requests held on one replica meet the approvals
// made there: its Lifecycle (Config.Handoff) registers them, and the
// approvals listener decides through Decide. One per call: a second
// request held on the same call (an attached retry) waits the usual way.
// It is safe for concurrent use.
type Handoff struct {
	store pending.Store
	// orphan runs a call claimed for a request that gave up (its
	// Lifecycle's, set by New).
	orphan func(pending.Call)
	mu     sync.Mutex
	m      map[string]*slot
}

// NewHandoff returns the Handoff of the Lifecycle that runs calls of st.
func NewHandoff(st pending.Store) *Handoff { return &Handoff{store: st} }

// hold registers a slot for call id, with the lease a claim for it
// takes; nil when another request has one.
func (ss *Handoff) hold(id string, lease time.Duration) *slot {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, taken := ss.m[id]; taken {
		return nil
	}
	if ss.m == nil {
		ss.m = make(map[string]*slot)
	}
	sl := &slot{lease: lease, got: make(chan pending.Call, 1)}
	ss.m[id] = sl
	return sl
}

// take removes call id's slot for a decision, or returns nil.
func (ss *Handoff) take(id string) *slot {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sl := ss.m[id]
	delete(ss.m, id)
	return sl
}

// giveBack returns a slot a decision took and claimed nothing for: to the
// registry while its request still waits and no other took the place,
// else to its request, empty.
func (ss *Handoff) giveBack(id string, sl *slot) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, taken := ss.m[id]; !sl.leaving && !taken {
		ss.m[id] = sl
		return
	}
	sl.got <- pending.Call{}
}

// leave takes sl back for its request, whose wait ended; when a decision
// took it first, it waits for the decision's call, until ctx (the hold)
// ends: a claimed call is the request's to run.
func (ss *Handoff) leave(ctx context.Context, id string, sl *slot) (claimed pending.Call, ok bool) {
	ss.mu.Lock()
	if ss.m[id] == sl {
		delete(ss.m, id)
		ss.mu.Unlock()
		return pending.Call{}, false
	}
	sl.leaving = true
	ss.mu.Unlock()
	var c pending.Call
	select {
	case c = <-sl.got:
	case <-ctx.Done():
		ss.mu.Lock()
		select {
		case c = <-sl.got: // handed over as the hold ended
		default:
			sl.abandoned = true // the decision runs what it claims
		}
		ss.mu.Unlock()
	}
	return c, c.State == pending.Executing
}

// hand gives the call a decision claimed to the request of sl, or, when
// the request gave up waiting, runs it without one.
func (ss *Handoff) hand(sl *slot, c pending.Call) {
	ss.mu.Lock()
	abandoned := sl.abandoned
	if !abandoned {
		sl.got <- c
	}
	ss.mu.Unlock()
	if abandoned {
		ss.orphan(c)
	}
}

// Decide records an approver's decision d on call id, through the store
// (pending.Store.Decide). When d approves the call and this replica holds
// its request, the approval claims the call for that request in the same
// step, and hands it over. The call returned is the decided call either
// way: an approved call shows as Approved, without its request.
func (ss *Handoff) Decide(ctx context.Context, id string, d pending.Decision) (pending.Call, error) {
	var sl *slot
	if d.To == pending.Approved {
		sl = ss.take(id)
	}
	if sl == nil {
		return ss.store.Decide(ctx, id, d)
	}
	d.Claim = sl.lease + handoverMargin
	handed := false
	defer func() {
		if !handed { // never leave the request waiting on its slot
			ss.giveBack(id, sl)
		}
	}()
	start := time.Now()
	c, err := ss.store.Decide(ctx, id, d)
	if err != nil || c.State != pending.Executing {
		return c, err
	}
	c.ClaimedAt = start // the request may run it up to its hold later: the lease runs from here
	ss.hand(sl, c)
	handed = true
	// What the decision itself did: approve the call.
	c.State, c.Fence, c.LeaseUntil, c.ClaimedAt, c.Request = pending.Approved, 0, time.Time{}, time.Time{}, nil
	return c, nil
}
