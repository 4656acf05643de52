package lifecycle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

func TestNewNeedsStoreAndExecutor(t *testing.T) {
	if _, err := New(Config{Executor: newExec()}); err == nil {
		t.Error("New without a Store succeeded")
	}
	if _, err := New(Config{Store: pending.NewMemory(pending.Options{})}); err == nil {
		t.Error("New without an Executor succeeded")
	}
}

// A new call is parked (OnPark once), held until an approver approves,
// then run once here and its result delivered to this request.
func TestAskApproved(t *testing.T) { eachStore(t, testAskApproved) }

func testAskApproved(t *testing.T, s pending.Store) {
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := withKey(newCall())

	ch := ask(t.Context(), l, in, Hold{For: long})
	parked := ev.waitParked(t)
	if parked.ID != in.ID || parked.State != pending.Waiting {
		t.Fatalf("OnPark(%s, %s), want %s waiting", parked.ID, parked.State, in.ID)
	}
	if got := get(t, s, in.ID); got.State != pending.Waiting {
		t.Fatalf("parked call is %s, want waiting", got.State)
	}
	stillHeld(t, ch)
	if n := exec.total(); n != 0 {
		t.Fatalf("executed %d times before any approval", n)
	}

	decide(t, s, in.ID, pending.Approved)
	o := outcome(t, ch)
	want := resultOf(in.ID)
	if o.Kind != Delivered || o.Call.ID != in.ID || o.Call.State != pending.Executed {
		t.Fatalf("Ask = %s, want Delivered %s executed", describe(o), in.ID)
	}
	if diff := cmp.Diff(want, o.Result, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("delivered result (-executor's +delivered):\n%s", diff)
	}
	// the call delivered is the call as it ended, its information
	// included (which Finish leaves to the claim's)
	if diff := cmp.Diff(get(t, s, in.ID), o.Call, cmpopts.EquateEmpty()); diff != "" || len(o.Call.Info) == 0 {
		t.Errorf("delivered call (-stored +delivered):\n%s", diff)
	}
	if n := exec.count(in.ID); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
	if n := len(ev.parks()); n != 1 {
		t.Errorf("OnPark called %d times, want once", n)
	}
	if r := ev.resolves(); len(r) != 0 {
		t.Errorf("OnResolve called for an approved call: %v", r)
	}
	if c := exec.claims()[0]; c.State != pending.Executing || c.DecidedBy != "bob" || c.Fence == 0 {
		t.Errorf("the executor got the call %s, decided by %q, fence %d; want it claimed (executing) after bob's approval", c.State, c.DecidedBy, c.Fence)
	}
	got := get(t, s, in.ID)
	if got.State != pending.Executed || !got.Delivered || got.Result == nil {
		t.Fatalf("stored call: %s, delivered %v, result %v; want executed, delivered, with the result", got.State, got.Delivered, got.Result)
	}
	if diff := cmp.Diff(want, *got.Result, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("stored result (-executor's +stored):\n%s", diff)
	}
	if first, _, err := s.Deliver(t.Context(), in.ID); err != nil || first {
		t.Errorf("Deliver after Ask delivered = first %v, %v; want already delivered", first, err)
	}
}

// A hold that runs out leaves the call waiting; a zero hold answers at once.
func TestAskHoldRunsOut(t *testing.T) {
	s := pending.NewMemory(pending.Options{})
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)

	for _, hold := range []time.Duration{0, 50 * time.Millisecond} {
		in := withKey(newCall())
		start := time.Now()
		o := outcome(t, ask(t.Context(), l, in, Hold{For: hold}))
		if o.Kind != Waiting || o.Call.ID != in.ID || o.Call.State != pending.Waiting {
			t.Fatalf("hold %v: Ask = %s, want Waiting %s waiting", hold, describe(o), in.ID)
		}
		if took := time.Since(start); took < hold {
			t.Errorf("hold %v: answered after %v", hold, took)
		}
		if got := get(t, s, in.ID); got.State != pending.Waiting {
			t.Errorf("hold %v: call is %s after the hold, want waiting", hold, got.State)
		}

		// Approved later, a retry with a zero hold runs it and takes the
		// result: it is there to take it.
		decide(t, s, in.ID, pending.Approved)
		o = outcome(t, ask(t.Context(), l, retry(in), Hold{}))
		if o.Kind != Delivered || o.Call.ID != in.ID {
			t.Errorf("hold %v: retry after the approval = %s, want Delivered %s", hold, describe(o), in.ID)
		}
	}
	if n := len(ev.parks()); n != 2 {
		t.Errorf("OnPark called %d times, want 2 (retries attach)", n)
	}
	if n := exec.total(); n != 2 {
		t.Errorf("executed %d times, want 2", n)
	}
}

// Rejected, cancelled or expired while held: Ended with that state, and
// nothing runs.
func TestAskEnded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		end      func(t *testing.T, l *Lifecycle, s pending.Store, clk *testkit.Clock, id string)
		state    pending.State
		resolved bool // OnResolve reports it (the package ended it)
	}{
		{"rejected", func(t *testing.T, _ *Lifecycle, s pending.Store, _ *testkit.Clock, id string) {
			decide(t, s, id, pending.Rejected)
		}, pending.Rejected, false},
		{"cancelled by the caller", func(t *testing.T, l *Lifecycle, _ pending.Store, _ *testkit.Clock, id string) {
			if _, err := l.Cancel(t.Context(), "alice", id); err != nil {
				t.Fatal(err)
			}
		}, pending.Cancelled, true},
		{"expired", func(t *testing.T, l *Lifecycle, _ pending.Store, clk *testkit.Clock, _ string) {
			clk.Advance(time.Hour)
			l.SweepOnce(t.Context(), 3*time.Second)
		}, pending.Expired, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clk := newMemory(time.Now(), time.Hour)
			exec, ev := newExec(), newEvents()
			l := newLifecycle(t, s, exec, ev)
			in := withKey(newCall())
			ch := ask(t.Context(), l, in, Hold{For: long})
			ev.waitParked(t)
			tc.end(t, l, s, clk, in.ID)
			o := outcome(t, ch)
			if o.Kind != Ended || o.Call.ID != in.ID || o.Call.State != tc.state {
				t.Fatalf("Ask = %s, want Ended %s %s", describe(o), in.ID, tc.state)
			}
			if got := get(t, s, in.ID); got.State != tc.state {
				t.Errorf("stored call is %s, want %s", got.State, tc.state)
			}
			if tc.resolved {
				ev.checkResolved(t, in.ID, tc.state)
			} else if r := ev.resolves(); len(r) != 0 {
				t.Errorf("OnResolve called for an approver's decision: %v", r)
			}
			// Nothing runs, not even when a sweeper passes.
			l.SweepOnce(t.Context(), 0)
			if n := exec.total(); n != 0 {
				t.Errorf("executed %d times", n)
			}
		})
	}
}

// Many identical requests at once: one call is parked, the others attach;
// it runs once and its result reaches exactly one of them.
func TestAskAttachConcurrent(t *testing.T) { eachStore(t, testAskAttachConcurrent) }

func testAskAttachConcurrent(t *testing.T, s pending.Store) {
	const n = 24
	var parks atomic.Int32
	hs := &hookStore{Store: s}
	hs.park = func(ctx context.Context, c pending.Call, ttl time.Duration) (pending.Call, bool, error) {
		defer parks.Add(1)
		return s.Park(ctx, c, ttl)
	}
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, hs, exec, ev)
	first := withKey(newCall())

	start := make(chan struct{})
	outs := make([]Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		in := first
		if i > 0 {
			in = retry(first)
		}
		wg.Go(func() {
			<-start
			outs[i] = l.Ask(t.Context(), in, Hold{For: long})
		})
	}
	close(start)
	// Everyone has parked or attached before the approval, so nobody comes
	// after the result was delivered (and would park a new call).
	testkit.WaitFor(t, "every request parked or attached", func() bool { return parks.Load() == n })
	parked := ev.parks()
	if len(parked) != 1 {
		t.Fatalf("OnPark called %d times for %d identical requests, want once", len(parked), n)
	}
	id := parked[0].ID
	decide(t, s, id, pending.Approved)
	wg.Wait()

	kinds := map[Kind]int{}
	for _, o := range outs {
		kinds[o.Kind]++
		if o.Call.ID != id {
			t.Errorf("outcome %s is not about the parked call %s", describe(o), id)
		}
		if o.Kind == Delivered {
			if diff := cmp.Diff(resultOf(id), o.Result, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("delivered result (-want +got):\n%s", diff)
			}
		}
	}
	if kinds[Delivered] != 1 || kinds[Taken] != n-1 {
		t.Errorf("outcomes %v (by Kind), want one Delivered (%d) and %d Taken (%d)", kinds, Delivered, n-1, Taken)
	}
	if got := exec.total(); got != 1 {
		t.Errorf("executed %d times, want once", got)
	}
	if got := get(t, s, id); got.State != pending.Executed || !got.Delivered {
		t.Errorf("stored call %s, delivered %v; want executed and delivered", got.State, got.Delivered)
	}
}

// The same Idempotency-Key with other arguments parks nothing.
func TestAskKeyReused(t *testing.T) {
	s := pending.NewMemory(pending.Options{})
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	first := withKey(newCall())
	if o := l.Ask(t.Context(), first, Hold{}); o.Kind != Waiting {
		t.Fatalf("first Ask = %s", describe(o))
	}
	other := retry(first)
	other.ArgsDigest = "sha256:other-args"
	o := l.Ask(t.Context(), other, Hold{For: long})
	if o.Kind != KeyReused || o.Call.ID != first.ID {
		t.Fatalf("Ask with the key and other arguments = %s, want KeyReused %s", describe(o), first.ID)
	}
	if n := len(ev.parks()); n != 1 {
		t.Errorf("OnPark called %d times, want once", n)
	}
	if _, err := s.Get(t.Context(), other.ID); !errors.Is(err, pending.ErrNotFound) {
		t.Errorf("the refused call was stored: Get = %v", err)
	}
	if n, _ := s.Count(t.Context(), pending.Waiting); n != 1 {
		t.Errorf("%d calls waiting, want 1", n)
	}
	// The same arguments still attach.
	same := retry(first)
	if o := l.Ask(t.Context(), same, Hold{}); o.Kind != Waiting || o.Call.ID != first.ID {
		t.Errorf("Ask with the key and the same arguments = %s, want Waiting %s", describe(o), first.ID)
	}
	if n := exec.total(); n != 0 {
		t.Errorf("executed %d times", n)
	}
}

// A store that cannot park: nothing is parked and nothing runs.
func TestAskNotParked(t *testing.T) {
	for _, tc := range []struct {
		name string
		park func(ctx context.Context, c pending.Call, ttl time.Duration) (pending.Call, bool, error)
		want error
	}{
		{"error", func(context.Context, pending.Call, time.Duration) (pending.Call, bool, error) {
			return pending.Call{}, false, errDown
		}, errDown},
		{"hangs", func(ctx context.Context, _ pending.Call, _ time.Duration) (pending.Call, bool, error) {
			<-ctx.Done() // bounded by Ask, not by the caller (whose ctx has no deadline)
			return pending.Call{}, false, ctx.Err()
		}, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := pending.NewMemory(pending.Options{})
			exec, ev := newExec(), newEvents()
			l := newLifecycle(t, &hookStore{Store: s, park: tc.park}, exec, ev)
			in := withKey(newCall())
			o := outcome(t, ask(context.Background(), l, in, Hold{For: long}))
			if o.Kind != NotParked || !errors.Is(o.Err, tc.want) || o.Call.ID != in.ID {
				t.Fatalf("Ask = %s, want NotParked %s with %v", describe(o), in.ID, tc.want)
			}
			if n := len(ev.parks()); n != 0 {
				t.Errorf("OnPark called %d times for a call not parked", n)
			}
			if _, err := s.Get(t.Context(), in.ID); !errors.Is(err, pending.ErrNotFound) {
				t.Errorf("Get = %v, want ErrNotFound", err)
			}
			if n := exec.total(); n != 0 {
				t.Errorf("executed %d times", n)
			}
		})
	}
}

// The store fails while holding: StoreFailed, and the call is not lost; a
// store that forgot the call: Lost.
func TestAskStoreFailed(t *testing.T) {
	t.Run("wait", func(t *testing.T) {
		s := pending.NewMemory(pending.Options{})
		hs := &hookStore{Store: s, wait: func(context.Context, string, pending.State) (pending.Call, error) {
			return pending.Call{}, errDown
		}}
		exec, ev := newExec(), newEvents()
		l := newLifecycle(t, hs, exec, ev)
		in := newCall()
		o := outcome(t, ask(t.Context(), l, in, Hold{For: long}))
		if o.Kind != StoreFailed || !errors.Is(o.Err, errDown) || o.Call.ID != in.ID {
			t.Fatalf("Ask = %s, want StoreFailed %s with %v", describe(o), in.ID, errDown)
		}
		if got := get(t, s, in.ID); got.State != pending.Waiting {
			t.Errorf("call is %s, want still waiting", got.State)
		}
		if n := exec.total(); n != 0 {
			t.Errorf("executed %d times", n)
		}
	})

	t.Run("claim", func(t *testing.T) {
		s := pending.NewMemory(pending.Options{})
		hs := &hookStore{Store: s, claim: func(context.Context, string, time.Duration) (pending.Call, error) {
			return pending.Call{}, errDown
		}}
		exec, ev := newExec(), newEvents()
		l := newLifecycle(t, hs, exec, ev)
		in := withKey(newCall())
		ch := ask(t.Context(), l, in, Hold{For: long})
		ev.waitParked(t)
		decide(t, s, in.ID, pending.Approved)
		o := outcome(t, ch)
		if o.Kind != StoreFailed || !errors.Is(o.Err, errDown) || o.Call.ID != in.ID {
			t.Fatalf("Ask = %s, want StoreFailed %s with %v", describe(o), in.ID, errDown)
		}
		if n := exec.total(); n != 0 {
			t.Errorf("executed %d times without a claim", n)
		}
		if got := get(t, s, in.ID); got.State != pending.Approved {
			t.Fatalf("call is %s, want still approved", got.State)
		}
		// Not lost: a sweeper with a working store runs it, once.
		exec2 := newExec()
		newLifecycle(t, s, exec2, newEvents()).SweepOnce(t.Context(), 0)
		if n := exec2.count(in.ID); n != 1 {
			t.Errorf("the sweeper executed it %d times, want once", n)
		}
		if got := get(t, s, in.ID); got.State != pending.Executed || got.Delivered || got.Result == nil {
			t.Errorf("after the sweep: %s, delivered %v, result %v; want executed, its result kept", got.State, got.Delivered, got.Result)
		}
	})

	t.Run("lost while waiting", func(t *testing.T) {
		// The call outlives its retention (a store restarted empty is the
		// same to the hold): the store answers ErrNotFound.
		s, clk := newMemory(time.Now(), time.Minute)
		exec, ev := newExec(), newEvents()
		l := newLifecycle(t, s, exec, ev)
		in := newCall()
		ch := ask(t.Context(), l, in, Hold{For: long})
		ev.waitParked(t)
		clk.Advance(time.Hour + time.Minute)
		if _, err := s.Get(t.Context(), in.ID); !errors.Is(err, pending.ErrNotFound) {
			t.Fatalf("Get after the retention = %v, want ErrNotFound", err)
		}
		o := outcome(t, ch)
		if o.Kind != Lost || o.Call.ID != in.ID {
			t.Fatalf("Ask = %s, want Lost %s", describe(o), in.ID)
		}
		if n := exec.total(); n != 0 {
			t.Errorf("executed %d times", n)
		}
	})

	t.Run("lost at the claim", func(t *testing.T) {
		s := pending.NewMemory(pending.Options{})
		hs := &hookStore{Store: s, claim: func(_ context.Context, id string, _ time.Duration) (pending.Call, error) {
			return pending.Call{}, errors.Join(pending.ErrNotFound, errors.New(id))
		}}
		exec, ev := newExec(), newEvents()
		l := newLifecycle(t, hs, exec, ev)
		in := newCall()
		ch := ask(t.Context(), l, in, Hold{For: long})
		ev.waitParked(t)
		decide(t, s, in.ID, pending.Approved)
		if o := outcome(t, ch); o.Kind != Lost || o.Call.ID != in.ID {
			t.Fatalf("Ask = %s, want Lost %s", describe(o), in.ID)
		}
		if n := exec.total(); n != 0 {
			t.Errorf("executed %d times", n)
		}
	})
}

// The caller goes away while held.
func TestAskGone(t *testing.T) {
	for _, cancelOnLeave := range []bool{false, true} {
		s := pending.NewMemory(pending.Options{})
		exec, ev := newExec(), newEvents()
		l := newLifecycle(t, s, exec, ev)
		in := withKey(newCall())
		ctx, leave := context.WithCancel(t.Context())
		ch := ask(ctx, l, in, Hold{For: long, CancelOnLeave: cancelOnLeave})
		ev.waitParked(t)
		leave()
		o := outcome(t, ch)
		if o.Kind != Gone || o.Call.ID != in.ID {
			t.Fatalf("CancelOnLeave %v: Ask = %s, want Gone %s", cancelOnLeave, describe(o), in.ID)
		}
		got := get(t, s, in.ID)
		if cancelOnLeave {
			if got.State != pending.Cancelled {
				t.Errorf("CancelOnLeave: call is %s, want cancelled", got.State)
			}
			ev.checkResolved(t, in.ID, pending.Cancelled)
		} else {
			if got.State != pending.Waiting {
				t.Errorf("call is %s, want still waiting", got.State)
			}
			if r := ev.resolves(); len(r) != 0 {
				t.Errorf("OnResolve called: %v", r)
			}
		}
		if n := exec.total(); n != 0 {
			t.Errorf("executed %d times", n)
		}
	}
}

// A caller that goes away while its call runs does not take the result: the
// run is finished and recorded, and a retry takes it.
func TestAskGoneWhileRunning(t *testing.T) {
	s := pending.NewMemory(pending.Options{})
	exec, ev := newExec(), newEvents()
	exec.hold()
	l := newLifecycle(t, s, exec, ev)
	in := withKey(newCall())
	ctx, leave := context.WithCancel(t.Context())
	ch := ask(ctx, l, in, Hold{For: long, CancelOnLeave: true})
	ev.waitParked(t)
	decide(t, s, in.ID, pending.Approved)
	exec.waitStarted(t)
	leave()
	exec.release()
	if o := outcome(t, ch); o.Kind != Gone || o.Call.ID != in.ID {
		t.Fatalf("Ask = %s, want Gone %s", describe(o), in.ID)
	}
	got := get(t, s, in.ID)
	if got.State != pending.Executed || got.Delivered || got.Result == nil {
		t.Fatalf("call %s, delivered %v, result %v; want executed, the result kept", got.State, got.Delivered, got.Result)
	}
	o := outcome(t, ask(t.Context(), l, retry(in), Hold{For: long}))
	if o.Kind != Delivered || o.Call.ID != in.ID {
		t.Fatalf("retry = %s, want Delivered %s", describe(o), in.ID)
	}
	if diff := cmp.Diff(resultOf(in.ID), o.Result, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("retry's result (-want +got):\n%s", diff)
	}
	if n := exec.total(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
	if n := len(ev.parks()); n != 1 {
		t.Errorf("OnPark called %d times, want once", n)
	}
}

// Progress is reported while the call waits, and the hold goes on.
func TestAskProgress(t *testing.T) {
	s := pending.NewMemory(pending.Options{})
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := newCall()
	var mu sync.Mutex
	var reports []pending.Call
	progress := func(pc pending.Call) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, pc)
	}
	ch := ask(t.Context(), l, in, Hold{For: long, Progress: progress, ProgressEvery: 10 * time.Millisecond})
	ev.waitParked(t)
	testkit.WaitFor(t, "three progress reports", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reports) >= 3
	})
	stillHeld(t, ch)
	decide(t, s, in.ID, pending.Approved)
	o := outcome(t, ch)
	if o.Kind != Delivered || o.Call.ID != in.ID {
		t.Fatalf("Ask = %s, want Delivered %s", describe(o), in.ID)
	}
	if n := exec.total(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, pc := range reports {
		if pc.ID != in.ID || pc.State != pending.Waiting {
			t.Errorf("progress reported %s %s, want %s waiting", pc.ID, pc.State, in.ID)
		}
	}
}

// Drain ends holds at once; the calls stay parked.
func TestDrain(t *testing.T) {
	s := pending.NewMemory(pending.Options{})
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := newCall()
	ch := ask(t.Context(), l, in, Hold{For: long, CancelOnLeave: true})
	ev.waitParked(t)
	l.Drain()
	o := outcome(t, ch)
	if o.Kind != Waiting || o.Call.ID != in.ID || o.Call.State != pending.Waiting {
		t.Fatalf("Ask after Drain = %s, want Waiting %s", describe(o), in.ID)
	}
	if got := get(t, s, in.ID); got.State != pending.Waiting {
		t.Errorf("call is %s after Drain, want still waiting", got.State)
	}
	if r := ev.resolves(); len(r) != 0 {
		t.Errorf("OnResolve called: %v", r)
	}

	// A hold that begins after Drain ends at once too.
	late := newCall()
	if o := outcome(t, ask(t.Context(), l, late, Hold{For: long})); o.Kind != Waiting || o.Call.ID != late.ID {
		t.Errorf("Ask after Drain = %s, want Waiting %s", describe(o), late.ID)
	}
	if n := exec.total(); n != 0 {
		t.Errorf("executed %d times", n)
	}
}

// A caller that goes away just as its call is approved is Gone, not a
// store failure; the call stays approved for the sweeper.
func TestAskGoneAtApproval(t *testing.T) {
	s := pending.NewMemory(pending.Options{})
	ctx, leave := context.WithCancel(t.Context())
	hs := &hookStore{Store: s, wait: func(wctx context.Context, id string, from pending.State) (pending.Call, error) {
		pc, err := s.Wait(wctx, id, from)
		if err == nil && pc.State == pending.Approved {
			leave() // the caller leaves between the wake-up and the claim
		}
		return pc, err
	}}
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, hs, exec, ev)
	in := newCall()
	ch := ask(ctx, l, in, Hold{For: long})
	ev.waitParked(t)
	decide(t, s, in.ID, pending.Approved)
	if o := outcome(t, ch); o.Kind != Gone || o.Call.ID != in.ID {
		t.Errorf("Ask = %s, want Gone %s", describe(o), in.ID)
	}
	if got := get(t, s, in.ID); got.State != pending.Approved {
		t.Errorf("call is %s, want approved (the sweeper's to run)", got.State)
	}
}

// A held request's wait may report an approval it has not read (WaitHeld):
// a forged or stale one runs nothing, since the claim finds the call still
// waiting, and the request waits on for the real decision.
func TestAskUnreadApproval(t *testing.T) { eachStore(t, testAskUnreadApproval) }

func testAskUnreadApproval(t *testing.T, s pending.Store) {
	var told atomic.Bool
	again := make(chan struct{}) // closed when the request waits again
	var once sync.Once
	hs := &hookStore{Store: s, wait: func(ctx context.Context, id string, from pending.State) (pending.Call, error) {
		if from == pending.Waiting && told.CompareAndSwap(false, true) {
			return pending.Call{ID: id, State: pending.Approved}, nil
		}
		once.Do(func() { close(again) })
		return s.WaitHeld(ctx, id, from)
	}}
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, hs, exec, ev)
	in := newCall()
	out := ask(t.Context(), l, in, Hold{For: long})
	select {
	case <-again:
	case o := <-out:
		t.Fatalf("Ask = %s on an unread approval of a waiting call", describe(o))
	}
	stillHeld(t, out)
	if got := get(t, s, in.ID); got.State != pending.Waiting {
		t.Fatalf("call is %s, want still waiting", got.State)
	}
	if n := exec.total(); n != 0 {
		t.Fatalf("executed %d times before any approval", n)
	}
	if _, err := s.Decide(t.Context(), in.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	o := outcome(t, out)
	if o.Kind != Delivered || exec.count(in.ID) != 1 {
		t.Fatalf("Ask = %s, executed %d times; want Delivered, once", describe(o), exec.count(in.ID))
	}
	if c := exec.claims()[0]; c.DecidedBy != "alice" || string(c.Request) != string(in.Request) {
		t.Errorf("executed %+v; want the call whole, approved by alice", c)
	}
}

// TestCancelOnLeaveRetried: a stateless client closes its stream while the
// store does not take the cancel. The call is abandoned by the sweeper
// once the store is back: it was left waiting, and an approver's
// approval ran it.
func TestCancelOnLeaveRetried(t *testing.T) {
	s, l, exec, in := leaveWhileCancelsFail(t, newCall())
	if got := get(t, s, in.ID); got.State != pending.Waiting {
		t.Fatalf("with the store refusing cancels the call is %s, want still waiting", got.State)
	}
	s.down.Store(false)
	l.SweepOnce(t.Context(), 0)
	if _, err := s.Decide(t.Context(), in.ID, pending.Decision{To: pending.Approved, By: "approver"}); err == nil {
		t.Error("the call whose client left could be approved once the store was back")
	}
	l.SweepOnce(t.Context(), 0)
	if n := exec.total(); n != 0 {
		t.Errorf("executed %d times", n)
	}
}

// leaveWhileCancelsFail parks in, held with CancelOnLeave, and has its
// client leave while the store refuses cancels, which it still does.
func leaveWhileCancelsFail(t *testing.T, in pending.Call) (*cancelDownStore, *Lifecycle, *fakeExec, pending.Call) {
	t.Helper()
	s := &cancelDownStore{Store: pending.NewMemory(pending.Options{})}
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	ctx, leave := context.WithCancel(t.Context())
	ch := ask(ctx, l, in, Hold{For: long, CancelOnLeave: true})
	ev.waitParked(t)
	s.down.Store(true)
	leave()
	if o := outcome(t, ch); o.Kind != Gone {
		t.Fatalf("Ask = %s, want Gone", describe(o))
	}
	return s, l, exec, in
}

// cancelDownStore refuses cancels while down.
type cancelDownStore struct {
	pending.Store
	down atomic.Bool
}

func (s *cancelDownStore) Cancel(ctx context.Context, id string) (pending.Call, error) {
	if s.down.Load() {
		return pending.Call{}, errStoreDown
	}
	return s.Store.Cancel(ctx, id)
}

// TestCancelOnLeaveRetryAttaches: a stateless MCP client closes its stream
// while the store does not take the cancel, so the call is kept for the
// sweeper to abandon. Its retry, with the same idempotency key, attaches
// to the still waiting call once the store is back, and is held for it:
// the sweeper leaves that call alone. It cancelled it under the live
// retry, which ended with nothing.
func TestCancelOnLeaveRetryAttaches(t *testing.T) {
	s, l, _, in := leaveWhileCancelsFail(t, withKey(newCall()))
	s.down.Store(false)
	// The client retries: same key, same arguments.
	again := ask(t.Context(), l, retry(in), Hold{For: long})
	time.Sleep(200 * time.Millisecond) // the retry attaches and is held
	stillHeld(t, again)
	l.SweepOnce(t.Context(), 0)
	if got := get(t, s, in.ID); got.State != pending.Waiting {
		t.Fatalf("the sweeper moved the call a live retry is held on to %s; the retry ended %s", got.State, describe(outcome(t, again)))
	}
}
