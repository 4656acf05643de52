package lifecycle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// An approved call nobody holds is executed by the sweeper once its grace
// has passed, with the executor's lease; its result waits for the caller.
func TestSweepOnceApproved(t *testing.T) {
	s, clk := newMemory(time.Now(), time.Hour)
	exec, ev := newExec(), newEvents()
	exec.lease = 7 * time.Second
	l := newLifecycle(t, s, exec, ev)
	in := withKey(newCall())
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	decide(t, s, in.ID, pending.Approved)

	const grace = 3 * time.Second
	l.SweepOnce(t.Context(), grace)
	if n := exec.total(); n != 0 {
		t.Fatalf("executed %d times within the grace", n)
	}
	clk.Advance(grace)
	l.SweepOnce(t.Context(), grace)
	if n := exec.count(in.ID); n != 1 {
		t.Fatalf("executed %d times after the grace, want once", n)
	}
	claimed := exec.claims()[0]
	if want := clk.Now().Add(exec.lease); !claimed.LeaseUntil.Equal(want) || claimed.State != pending.Executing {
		t.Errorf("claimed %s with lease until %v, want executing until %v (the executor's lease)", claimed.State, claimed.LeaseUntil, want)
	}
	if !slices.Contains(exec.leases(), in.ID) {
		t.Errorf("the executor's Lease was not asked about %s", in.ID)
	}
	got := get(t, s, in.ID)
	if got.State != pending.Executed || got.Delivered || got.Result == nil {
		t.Fatalf("after the sweep: %s, delivered %v, result %v; want executed, the result kept", got.State, got.Delivered, got.Result)
	}
	l.SweepOnce(t.Context(), grace)
	if n := exec.count(in.ID); n != 1 {
		t.Errorf("executed %d times after another sweep, want once", n)
	}

	// The caller's retry attaches and takes the kept result.
	o := l.Ask(t.Context(), retry(in), Hold{})
	if o.Kind != Delivered || o.Call.ID != in.ID {
		t.Fatalf("retry = %s, want Delivered %s", describe(o), in.ID)
	}
	if diff := cmp.Diff(resultOf(in.ID), o.Result, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("retry's result (-want +got):\n%s", diff)
	}
	if n := len(ev.parks()); n != 1 {
		t.Errorf("OnPark called %d times, want once", n)
	}
	if n := exec.total(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
	if r := ev.resolves(); len(r) != 0 {
		t.Errorf("OnResolve called: %v", r)
	}
}

// An approved call close to its expiry is executed at once, within the
// grace.
func TestSweepOnceApprovedNearExpiry(t *testing.T) {
	// The store's clock is the wall clock an hour less a second ago, so
	// that a call parked now (ttl one hour) expires in a second.
	s, _ := newMemory(time.Now().Add(-time.Hour+time.Second), time.Hour)
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := newCall()
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	decide(t, s, in.ID, pending.Approved)
	l.SweepOnce(t.Context(), 3*time.Second)
	if n := exec.count(in.ID); n != 1 {
		t.Errorf("an approval a second before expiry executed %d times by the sweeper, want once", n)
	}
	if got := get(t, s, in.ID); got.State != pending.Executed {
		t.Errorf("call is %s, want executed", got.State)
	}
}

// A call past its expiry is ended by the sweeper, and reported.
func TestSweepOnceExpired(t *testing.T) {
	s, clk := newMemory(time.Now(), time.Hour)
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := newCall()
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	l.SweepOnce(t.Context(), 0)
	if r := ev.resolves(); len(r) != 0 {
		t.Fatalf("OnResolve called before the expiry: %v", r)
	}
	clk.Advance(time.Hour)
	l.SweepOnce(t.Context(), 0)
	ev.checkResolved(t, in.ID, pending.Expired)
	if got := get(t, s, in.ID); got.State != pending.Expired {
		t.Errorf("call is %s, want expired", got.State)
	}
	l.SweepOnce(t.Context(), 0)
	ev.checkResolved(t, in.ID, pending.Expired) // still once
	if n := exec.total(); n != 0 {
		t.Errorf("executed %d times", n)
	}
}

// An approved call that nobody claimed before its expiry (every sweeper was
// down) is expired by the next sweep, and reported like any expired call.
func TestSweepOnceExpiredApproved(t *testing.T) { eachStore(t, testSweepOnceExpiredApproved) }

func testSweepOnceExpiredApproved(t *testing.T, s pending.Store) {
	exec, ev := newExec(), newEvents()
	l, err := New(Config{Store: s, Executor: exec, TTL: 300 * time.Millisecond, OnPark: ev.onPark, OnResolve: ev.onResolve})
	if err != nil {
		t.Fatal(err)
	}
	in := newCall()
	o := l.Ask(t.Context(), in, Hold{})
	if o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	decide(t, s, in.ID, pending.Approved)
	testkit.WaitFor(t, "the ttl passes", func() bool { return time.Now().After(o.Call.ExpiresAt.Add(100 * time.Millisecond)) })
	l.SweepOnce(t.Context(), 3*time.Second)
	if got := get(t, s, in.ID); got.State != pending.Expired {
		t.Fatalf("call is %s after the sweep, want expired", got.State)
	}
	if n := exec.total(); n != 0 {
		t.Errorf("executed %d times after its expiry", n)
	}
	ev.checkResolved(t, in.ID, pending.Expired)
}

// Two replicas sweep one store at once: every approved call runs once.
func TestSweepReplicas(t *testing.T) { eachStore(t, testSweepReplicas) }

func testSweepReplicas(t *testing.T, s pending.Store) {
	const calls = 10
	execs := []*fakeExec{newExec(), newExec()}
	evs := []*events{newEvents(), newEvents()}
	ls := []*Lifecycle{newLifecycle(t, s, execs[0], evs[0]), newLifecycle(t, s, execs[1], evs[1])}
	var ids []string
	for range calls {
		in := newCall()
		if o := ls[0].Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
			t.Fatalf("Ask = %s", describe(o))
		}
		decide(t, s, in.ID, pending.Approved)
		ids = append(ids, in.ID)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		l := ls[i%2]
		wg.Go(func() {
			for range 5 {
				l.SweepOnce(t.Context(), 0)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if n := execs[0].count(id) + execs[1].count(id); n != 1 {
			t.Errorf("%s executed %d times, want once", id, n)
		}
		if got := get(t, s, id); got.State != pending.Executed || got.Result == nil {
			t.Errorf("%s is %s, result %v; want executed with its result", id, got.State, got.Result)
		}
	}
}

// Sweep sweeps every interval until its context ends.
func TestSweep(t *testing.T) {
	s := pending.NewMemory(pending.Options{})
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := newCall()
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	decide(t, s, in.ID, pending.Approved)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Sweep(ctx, 5*time.Millisecond, 0)
	}()
	testkit.WaitFor(t, "the sweeper executes the approved call", func() bool { return get(t, s, in.ID).State == pending.Executed })
	stop()
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatal("Sweep did not return when its context ended")
	}
	if n := exec.total(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
}

// The executor's lease bounds a claim: an execution that outlives it
// leaves the call unknown, reported, and never executed again; a request
// attached to it learns there is no result.
func TestLeaseRunsOut(t *testing.T) { eachStore(t, testLeaseRunsOut) }

func testLeaseRunsOut(t *testing.T, s pending.Store) {
	exec, ev := newExec(), newEvents()
	exec.lease = 200 * time.Millisecond
	exec.hold()
	var parks atomic.Int32
	hs := &hookStore{Store: s, park: func(ctx context.Context, c pending.Call, ttl time.Duration) (pending.Call, bool, error) {
		defer parks.Add(1)
		return s.Park(ctx, c, ttl)
	}}
	l := newLifecycle(t, hs, exec, ev)
	// Another replica's sweeper, whose executor would not have finished
	// either.
	exec2, ev2 := newExec(), newEvents()
	l2 := newLifecycle(t, s, exec2, ev2)

	// The request and its retry both hold the call: one of them claims it
	// and runs it, the other follows.
	in := withKey(newCall())
	outs := make(chan Outcome, 2)
	for _, pc := range []pending.Call{in, retry(in)} {
		go func() { outs <- l.Ask(t.Context(), pc, Hold{For: long}) }()
	}
	testkit.WaitFor(t, "both requests parked or attached", func() bool { return parks.Load() == 2 })
	parked := ev.parks()
	if len(parked) != 1 {
		t.Fatalf("OnPark called %d times, want once", len(parked))
	}
	id := parked[0].ID
	decide(t, s, id, pending.Approved)
	exec.waitStarted(t)
	claimed := exec.claims()[0]
	if d := time.Until(claimed.LeaseUntil); d > exec.lease+time.Second {
		t.Fatalf("claimed until %v from now, more than the executor's lease %v", d, exec.lease)
	}
	testkit.WaitFor(t, "the sweeper marks the lost execution unknown", func() bool {
		l2.SweepOnce(t.Context(), 0)
		return len(ev2.resolves()) > 0
	})
	ev2.checkResolved(t, id, pending.Unknown)
	// The follower learns that there is no result.
	if o := outcome(t, outs); o.Kind != NoResult || o.Call.ID != id || o.Call.State != pending.Unknown {
		t.Errorf("the request following the run = %s, want NoResult %s unknown", describe(o), id)
	}

	exec.release()
	o := outcome(t, outs)
	// The late executor's answer is the upstream's: its request may have
	// it, but the store keeps the call unknown.
	if o.Call.ID != id || (o.Kind != Delivered && o.Kind != NoResult) {
		t.Errorf("the request that ran the call = %s, want Delivered or NoResult %s", describe(o), id)
	}
	if got := get(t, s, id); got.State != pending.Unknown || got.Result != nil {
		t.Errorf("after the late finish the call is %s with result %v, want unknown without one", got.State, got.Result)
	}
	l2.SweepOnce(t.Context(), 0)
	l.SweepOnce(t.Context(), 0)
	if n := exec.total() + exec2.total(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
}

// The hold claims with the executor's lease, on the store's clock.
func TestLeaseOfHeldClaim(t *testing.T) {
	s, clk := newMemory(time.Now(), time.Hour)
	exec, ev := newExec(), newEvents()
	exec.lease = 42 * time.Second
	l := newLifecycle(t, s, exec, ev)
	in := newCall()
	ch := ask(t.Context(), l, in, Hold{For: long})
	ev.waitParked(t)
	decide(t, s, in.ID, pending.Approved)
	if o := outcome(t, ch); o.Kind != Delivered {
		t.Fatalf("Ask = %s", describe(o))
	}
	claimed := exec.claims()[0]
	if want := clk.Now().Add(exec.lease); !claimed.LeaseUntil.Equal(want) {
		t.Errorf("claimed until %v, want %v (the executor's lease)", claimed.LeaseUntil, want)
	}
	if !slices.Contains(exec.leases(), in.ID) {
		t.Errorf("the executor's Lease was not asked about %s", in.ID)
	}
}

// An execution that outlives its lease and finishes before any sweep: the
// late Finish is refused and leaves the call unknown, which is reported
// like an unknown call the sweeper found.
func TestLeaseRunsOutUnswept(t *testing.T) {
	s, clk := newMemory(time.Now(), time.Hour)
	exec, ev := newExec(), newEvents()
	exec.lease = time.Second
	exec.hold()
	l := newLifecycle(t, s, exec, ev)
	in := newCall()
	ch := ask(t.Context(), l, in, Hold{For: long})
	ev.waitParked(t)
	decide(t, s, in.ID, pending.Approved)
	exec.waitStarted(t)
	clk.Advance(2 * time.Second)
	exec.release()
	outcome(t, ch)
	if got := get(t, s, in.ID); got.State != pending.Unknown {
		t.Fatalf("call is %s after a finish past the lease, want unknown", got.State)
	}
	l.SweepOnce(t.Context(), 0)
	ev.checkResolved(t, in.ID, pending.Unknown)
	if n := exec.total(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
}

// TestSweepParallel: a sweep executes approved calls side by side, at most
// sweepParallel at once, each once, and returns when all are finished.
func TestSweepParallel(t *testing.T) {
	s, _ := newMemory(time.Now(), time.Hour)
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	const n = sweepParallel + 4
	var ids []string
	for range n {
		in := newCall()
		if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
			t.Fatalf("Ask = %s", describe(o))
		}
		decide(t, s, in.ID, pending.Approved)
		ids = append(ids, in.ID)
	}
	exec.hold()
	done := make(chan struct{})
	go func() { l.SweepOnce(context.Background(), 0); close(done) }()
	for i := range sweepParallel {
		select {
		case <-exec.started:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d executions started side by side, want %d", i, sweepParallel)
		}
	}
	select {
	case id := <-exec.started:
		t.Fatalf("execution %s started beyond the bound of %d", id, sweepParallel)
	case <-done:
		t.Fatal("the sweep returned with executions still running")
	case <-time.After(100 * time.Millisecond):
	}
	exec.release()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the sweep did not return")
	}
	for _, id := range ids {
		if c := exec.count(id); c != 1 {
			t.Errorf("call %s executed %d times, want once", id, c)
		}
	}
}

// TestSweepDelay: rounds come every interval while the store answers;
// while it fails the pause doubles up to maxSweepBackoff, and the first
// round it answers brings the interval back.
func TestSweepDelay(t *testing.T) {
	d := time.Second
	var got []time.Duration
	for range 6 {
		d = sweepDelay(d, time.Second, false)
		got = append(got, d)
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, maxSweepBackoff, maxSweepBackoff, maxSweepBackoff}
	if !slices.Equal(got, want) {
		t.Errorf("pauses while the store fails: %v, want %v", got, want)
	}
	if d := sweepDelay(maxSweepBackoff, time.Second, true); d != time.Second {
		t.Errorf("after a good round: %v, want the interval", d)
	}
	if d := sweepDelay(time.Minute, time.Minute, false); d != time.Minute {
		t.Errorf("an interval beyond the back-off cap: %v, want it kept", d)
	}
}

// writesRefused is a store that lists its calls but refuses every write
// until the refused-th claim, as a Redis primary does while it takes no
// writes (min-replicas-to-write with its replica away).
type writesRefused struct {
	*pending.MemoryStore
	refused int32
	claims  atomic.Int32
}

var errNoReplicas = errors.New("NOREPLICAS not enough good replicas to write")

func (s *writesRefused) refusing() bool { return s.claims.Load() < s.refused }

func (s *writesRefused) Claim(ctx context.Context, id string, lease time.Duration) (pending.Call, error) {
	if s.claims.Add(1) <= s.refused {
		return pending.Call{}, errNoReplicas
	}
	return s.MemoryStore.Claim(ctx, id, lease)
}

func (s *writesRefused) Expire(ctx context.Context, limit int) ([]pending.Call, error) {
	if s.refusing() {
		return nil, errNoReplicas
	}
	return s.MemoryStore.Expire(ctx, limit)
}

// TestSweepKeepsClaiming: while the store lists an approved call but
// refuses its claim, the sweeper keeps trying every interval instead of
// backing off as from a store that is down, so the call is executed as
// soon as the store takes writes again. Backing off, the 12 refused
// claims at a 5 ms interval would take some 40 s.
func TestSweepKeepsClaiming(t *testing.T) {
	s := &writesRefused{MemoryStore: pending.NewMemory(pending.Options{}), refused: 12}
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := newCall()
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	decide(t, s.MemoryStore, in.ID, pending.Approved)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Sweep(ctx, 5*time.Millisecond, 0)
	}()
	defer func() { stop(); <-done }()
	testkit.WaitFor(t, "the sweeper executes the approved call", func() bool { return get(t, s, in.ID).State == pending.Executed })
	if n := s.claims.Load(); n != s.refused+1 {
		t.Errorf("%d claims, want the %d refused and one more", n, s.refused)
	}
}

// TestOverdueClaimReported: an approved call that expires before anyone
// claims it is ended by the claim that finds it overdue (the sweeper's
// here), and its end is reported once, by that claim: no later sweep
// reports it again.
func TestOverdueClaimReported(t *testing.T) {
	// The approved window is 30 s by default: park with a short ttl, approve,
	// and let the window pass.
	s, clk := newMemory(time.Now(), time.Hour)
	exec, ev := newExec(), newEvents()
	l := newLifecycleTTL(t, s, exec, ev, time.Second)
	in := newCall()
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	decide(t, s, in.ID, pending.Approved)
	clk.Advance(time.Minute)
	l.executeApproved(t.Context(), 0, nil) // the sweeper's claim, before its expiry round
	if n := exec.total(); n != 0 {
		t.Fatalf("the overdue call was executed %d times", n)
	}
	ev.checkResolved(t, in.ID, pending.Expired) // by the claim
	l.SweepOnce(t.Context(), 0)
	ev.checkResolved(t, in.ID, pending.Expired) // and by nothing else
}

// parkUnreplicated is a store whose parks are made but not confirmed by
// replicas (pending.ErrNotReplicated), as a Redis primary's can be.
type parkUnreplicated struct{ *pending.MemoryStore }

func (s parkUnreplicated) Park(ctx context.Context, c pending.Call, ttl time.Duration) (pending.Call, bool, error) {
	if _, _, err := s.MemoryStore.Park(ctx, c, ttl); err != nil {
		return pending.Call{}, false, err
	}
	return pending.Call{}, false, pending.ErrNotReplicated
}

// TestAskParkNotReplicated: a park the replicas did not confirm is
// answered as not parked, and the call the primary holds is cancelled, so
// no approver can approve a call its agent was told was refused.
func TestAskParkNotReplicated(t *testing.T) {
	mem, _ := newMemory(time.Now(), time.Hour)
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, parkUnreplicated{mem}, exec, ev)
	in := newCall()
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != NotParked {
		t.Fatalf("Ask = %s, want not parked", describe(o))
	}
	got, err := mem.Get(t.Context(), in.ID)
	if err != nil || got.State != pending.Cancelled {
		t.Errorf("the primary's call is %s (%v), want cancelled", got.State, err)
	}
	if len(ev.parks()) != 0 {
		t.Errorf("a call answered as not parked was announced: %v", ev.parks())
	}
}
