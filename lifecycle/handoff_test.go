package lifecycle

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// claimCounter is a real store that counts its Claim calls.
type claimCounter struct {
	hookStore
	claims atomic.Int64
}

func newClaimCounter(s pending.Store) *claimCounter {
	c := &claimCounter{hookStore: hookStore{Store: s}}
	c.claim = func(ctx context.Context, id string, lease time.Duration) (pending.Call, error) {
		c.claims.Add(1)
		return s.Claim(ctx, id, lease)
	}
	return c
}

// newHanded returns a Lifecycle on s and the Handoff an approvals
// listener beside it decides through.
func newHanded(t *testing.T, s pending.Store, exec *fakeExec, ev *events) (*Lifecycle, *Handoff) {
	t.Helper()
	hf := NewHandoff(s)
	l, err := New(Config{Store: s, Executor: exec, TTL: time.Hour, OnPark: ev.onPark, OnResolve: ev.onResolve, Handoff: hf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Drain)
	return l, hf
}

// waitSlot waits until a request held on id has its slot.
func waitSlot(t *testing.T, hf *Handoff, id string) {
	t.Helper()
	for end := time.Now().Add(deadline); time.Now().Before(end); time.Sleep(time.Millisecond) {
		hf.mu.Lock()
		_, ok := hf.m[id]
		hf.mu.Unlock()
		if ok {
			return
		}
	}
	t.Fatalf("no request held on %s registered", id)
}

// An approval made beside the held request claims the call for it: the
// request runs the call once, never claiming it itself, and the approval
// is still an end whose notification is owed.
func TestHandoffApproved(t *testing.T) { eachStore(t, testHandoffApproved) }

func testHandoffApproved(t *testing.T, st pending.Store) {
	s := newClaimCounter(st)
	exec, ev := newExec(), newEvents()
	l, hf := newHanded(t, s, exec, ev)
	in := newCall()
	ch := ask(t.Context(), l, in, Hold{For: long})
	ev.waitParked(t)
	waitSlot(t, hf, in.ID)

	before := time.Now()
	decided, err := hf.Decide(t.Context(), in.ID, pending.Decision{To: pending.Approved, By: "bob", Comment: "ok"})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	after := time.Now()
	if decided.State != pending.Approved || decided.DecidedBy != "bob" || decided.Fence != 0 || decided.Request != nil {
		t.Errorf("Decide returned %s by %q, fence %d, request %q; want the approval: approved by bob, no fence, no request",
			decided.State, decided.DecidedBy, decided.Fence, decided.Request)
	}
	o := outcome(t, ch)
	if o.Kind != Delivered || o.Call.State != pending.Executed {
		t.Fatalf("Ask = %s, want Delivered executed", describe(o))
	}
	if n := exec.count(in.ID); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
	if n := s.claims.Load(); n != 0 {
		t.Errorf("the held request claimed %d times; the approval claims for it", n)
	}
	c := exec.claims()[0]
	if c.State != pending.Executing || c.Fence != 1 || c.DecidedBy != "bob" || string(c.Request) != string(in.Request) {
		t.Errorf("the executor got %s, fence %d, decided by %q, request %q; want the whole call claimed after bob's approval",
			c.State, c.Fence, c.DecidedBy, c.Request)
	}
	// The lease runs from the approval's claim, not from when the request
	// woke to run the call: the executor bounds the send by it.
	if c.ClaimedAt.Before(before) || c.ClaimedAt.After(after) {
		t.Errorf("the executor got ClaimedAt %v; want the time the approval asked for the claim (after %v)", c.ClaimedAt, before)
	}
	if !c.LeaseUntil.After(time.Now().Add(exec.lease)) {
		t.Errorf("lease until %v: the hand-over came out of the execution's lease (%v from now)", c.LeaseUntil, exec.lease)
	}
	owed, err := st.Unresolved(t.Context(), 0, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(owed) != 1 || owed[0].ID != in.ID || owed[0].State != pending.Approved {
		t.Errorf("Unresolved = %v, want the approval of %s", owed, in.ID)
	}
	if got := get(t, st, in.ID); got.State != pending.Executed || !got.Delivered {
		t.Errorf("stored call %s, delivered %v; want executed and delivered", got.State, got.Delivered)
	}
}

// An approval that leaves the call waiting for more approvers hands the
// held request nothing: it waits on, and the approval that completes the
// quorum claims the call for it. A rejection claims nothing.
func TestHandoffQuorum(t *testing.T) { eachStore(t, testHandoffQuorum) }

func testHandoffQuorum(t *testing.T, st pending.Store) {
	s := newClaimCounter(st)
	exec, ev := newExec(), newEvents()
	l, hf := newHanded(t, s, exec, ev)
	in := newCall()
	in.Quorum = []int{2}
	ch := ask(t.Context(), l, in, Hold{For: long})
	ev.waitParked(t)
	waitSlot(t, hf, in.ID)

	c, err := hf.Decide(t.Context(), in.ID, pending.Decision{To: pending.Approved, By: "ann", Counts: []int{0}})
	if err != nil || c.State != pending.Waiting || len(c.Approvals) != 1 {
		t.Fatalf("first approval: %s with %d approvals, %v; want waiting with one", c.State, len(c.Approvals), err)
	}
	waitSlot(t, hf, in.ID) // the request waits again
	stillHeld(t, ch)
	if exec.total() != 0 {
		t.Fatal("executed before the quorum was met")
	}
	if _, err := hf.Decide(t.Context(), in.ID, pending.Decision{To: pending.Approved, By: "bob", Counts: []int{0}}); err != nil {
		t.Fatal(err)
	}
	if o := outcome(t, ch); o.Kind != Delivered || exec.count(in.ID) != 1 || s.claims.Load() != 0 {
		t.Errorf("Ask = %s, executed %d times, %d claims by the request; want Delivered, once, none",
			describe(o), exec.count(in.ID), s.claims.Load())
	}

	rejected := newCall()
	ch = ask(t.Context(), l, rejected, Hold{For: long})
	ev.waitParked(t)
	waitSlot(t, hf, rejected.ID)
	if _, err := hf.Decide(t.Context(), rejected.ID, pending.Decision{To: pending.Rejected, By: "bob"}); err != nil {
		t.Fatal(err)
	}
	if o := outcome(t, ch); o.Kind != Ended || o.Call.State != pending.Rejected || exec.count(rejected.ID) != 0 {
		t.Errorf("Ask = %s, executed %d times; want Ended rejected, never run", describe(o), exec.count(rejected.ID))
	}
}

// Held requests that give up (their hold runs out, their caller leaves)
// while approvals are made beside them: every approved call runs exactly
// once, whichever side wins, and none is left executing with nobody
// running it. What a request that left did not run, the sweeper runs.
func TestHandoffRace(t *testing.T) { eachStore(t, testHandoffRace) }

func testHandoffRace(t *testing.T, st pending.Store) {
	exec, ev := newExec(), newEvents()
	l, hf := newHanded(t, st, exec, ev)
	const n = 60
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		in := newCall()
		ids[i] = in.ID
		ctx, cancel := context.WithCancel(t.Context())
		hold := time.Duration(rand.IntN(3000)) * time.Microsecond
		parked := make(chan struct{})
		wg.Go(func() {
			defer cancel()
			o := l.Ask(ctx, in, Hold{For: hold, Held: func(pending.Call) { close(parked) }})
			if o.Kind == StoreFailed || o.Kind == Lost || o.Kind == NotParked {
				t.Errorf("Ask(%s) = %s", in.ID, describe(o))
			}
		})
		wg.Go(func() {
			<-parked
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			if i%3 == 0 {
				cancel() // the caller leaves
			}
			if _, err := hf.Decide(context.WithoutCancel(t.Context()), in.ID, pending.Decision{To: pending.Approved, By: "bob"}); err != nil {
				t.Errorf("Decide(%s): %v", in.ID, err)
			}
		})
	}
	wg.Wait()
	l.SweepOnce(t.Context(), 0)
	end := time.Now().Add(deadline)
	for _, id := range ids {
		got := get(t, st, id)
		for ; got.State != pending.Executed && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if got = get(t, st, id); got.State == pending.Executed {
				break
			}
			l.SweepOnce(t.Context(), 0)
		}
		if got.State != pending.Executed || exec.count(id) != 1 {
			t.Errorf("%s: %s, executed %d times; want executed, once", id, got.State, exec.count(id))
		}
	}
}

// slowDecider is a real store whose Decide waits for release first.
type slowDecider struct {
	pending.Store
	release chan struct{}
}

func (s *slowDecider) Decide(ctx context.Context, id string, d pending.Decision) (pending.Call, error) {
	<-s.release
	return s.Store.Decide(ctx, id, d)
}

// A held request whose slot a slow decision took waits for it no longer
// than its hold: it answers that the call still waits, and the call the
// decision then claims runs once, in the background, its result kept for
// a retry (not delivered).
func TestHandoffRequestGivesUp(t *testing.T) { eachStore(t, testHandoffRequestGivesUp) }

func testHandoffRequestGivesUp(t *testing.T, st pending.Store) {
	s := &slowDecider{Store: st, release: make(chan struct{})}
	exec, ev := newExec(), newEvents()
	l, hf := newHanded(t, s, exec, ev)
	in := newCall()
	start := time.Now()
	ch := ask(t.Context(), l, in, Hold{For: 300 * time.Millisecond})
	ev.waitParked(t)
	waitSlot(t, hf, in.ID)
	decided := approveInBackground(t, hf, in.ID)
	o := outcome(t, ch)
	if o.Kind != Waiting || time.Since(start) > 5*time.Second {
		t.Fatalf("Ask = %s after %v, want Waiting once its hold ran out", describe(o), time.Since(start))
	}
	close(s.release)
	if err := <-decided; err != nil {
		t.Fatalf("Decide: %v", err)
	}
	got := get(t, st, in.ID)
	for end := time.Now().Add(deadline); got.State != pending.Executed && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		got = get(t, st, in.ID)
	}
	if got.State != pending.Executed || got.Delivered || exec.count(in.ID) != 1 {
		t.Errorf("the call a decision claimed for a request that left: %s, delivered %v, executed %d times; want executed once, its result kept",
			got.State, got.Delivered, exec.count(in.ID))
	}
}

// TestSettleWaitsForTheRequestThatLeft: at shutdown, Drain ends a held
// request whose slot an approval had already taken; the approval then
// runs the call for nobody (runOrphan). Settle, which serve calls once
// its listeners are closed, returns only once that run is done, so the
// process does not exit under it and leave the call executing until its
// lease ends it unknown.
func TestSettleWaitsForTheRequestThatLeft(t *testing.T) {
	st := pending.NewMemory(pending.Options{ApprovedWindow: approvedWindow})
	s := &slowDecider{Store: st, release: make(chan struct{})}
	exec, ev := newExec(), newEvents()
	exec.hold() // the upstream takes a while
	l, hf := newHanded(t, s, exec, ev)
	in := newCall()
	ch := ask(t.Context(), l, in, Hold{For: long})
	ev.waitParked(t)
	waitSlot(t, hf, in.ID)
	decided := approveInBackground(t, hf, in.ID)
	time.Sleep(50 * time.Millisecond) // the decision has taken the slot
	l.Drain()
	if o := outcome(t, ch); o.Kind != Waiting {
		t.Fatalf("Ask after Drain = %s, want Waiting", describe(o))
	}
	close(s.release)
	if err := <-decided; err != nil {
		t.Fatalf("Decide: %v", err)
	}
	settled := make(chan bool, 1)
	go func() { settled <- l.Settle(t.Context(), false) }()
	exec.waitStarted(t)
	select {
	case <-settled:
		t.Fatal("Settle returned while the approved call was still being sent")
	case <-time.After(100 * time.Millisecond):
	}
	exec.release()
	if !<-settled {
		t.Fatal("Settle reported work left")
	}
	if got := get(t, st, in.ID); got.State != pending.Executed {
		t.Fatalf("after Settle the call is %s, want executed", got.State)
	}
}

// approveInBackground approves call id as bob through hf, and sends the
// error Decide returns on the channel it returns.
func approveInBackground(t *testing.T, hf *Handoff, id string) <-chan error {
	decided := make(chan error, 1)
	go func() {
		_, err := hf.Decide(context.WithoutCancel(t.Context()), id, pending.Decision{To: pending.Approved, By: "bob"})
		decided <- err
	}()
	return decided
}

// TestRunningStartsWhileWaited: a run may start while Settle waits for the
// runs in flight (an approvals handler a forced shutdown left running),
// which a sync.WaitGroup forbids; Idle closes once every run is done.
func TestRunningStartsWhileWaited(t *testing.T) {
	var r running
	select {
	case <-r.Idle():
	default:
		t.Fatal("no run in flight, yet not idle")
	}
	release := make(chan struct{})
	r.Go(func() { <-release })
	idle := r.Idle()
	r.Go(func() { <-release })
	select {
	case <-idle:
		t.Fatal("idle with two runs in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	select {
	case <-idle:
	case <-time.After(deadline):
		t.Fatal("never idle once the runs were done")
	}
}
