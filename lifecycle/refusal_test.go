package lifecycle

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// keyedCall returns a call parked with an explicit key (an
// Idempotency-Key's digest) and its arguments' key; argsRetry returns a
// retry of it without the explicit key, as the proxy builds one.
func keyedCall() pending.Call {
	pc := newCall()
	pc.AttachKey, pc.ArgsKey = "idem-"+rand.Text(), "args-"+rand.Text()
	return pc
}

func argsRetry(pc pending.Call) pending.Call {
	r := retry(pc)
	r.AttachKey = pc.ArgsKey
	return r
}

// newLifecycleTTL is newLifecycle with calls that wait ttl for a decision.
func newLifecycleTTL(t *testing.T, s pending.Store, exec *fakeExec, ev *events, ttl time.Duration) *Lifecycle {
	t.Helper()
	l, err := New(Config{Store: s, Executor: exec, TTL: ttl, OnPark: ev.onPark, OnResolve: ev.onResolve})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Drain)
	return l
}

// A retry after a rejection nobody was held for learns it, with the
// approver's name and comment, once; the next identical retry is a new
// call (OnPark again).
func TestAskRetryLearnsRejection(t *testing.T) { eachStore(t, testAskRetryLearnsRejection) }

func testAskRetryLearnsRejection(t *testing.T, s pending.Store) {
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := keyedCall()
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting || o.Call.ID != in.ID {
		t.Fatalf("Ask = %s, want Waiting %s", describe(o), in.ID)
	}
	if _, err := s.Decide(t.Context(), in.ID, pending.Decision{To: pending.Rejected, By: "bob", Comment: "not on a Friday"}); err != nil {
		t.Fatal(err)
	}

	o := outcome(t, ask(t.Context(), l, retry(in), Hold{For: long}))
	if o.Kind != Ended || o.Call.ID != in.ID || o.Call.State != pending.Rejected {
		t.Fatalf("retry after the rejection = %s, want Ended %s rejected", describe(o), in.ID)
	}
	if o.Call.DecidedBy != "bob" || o.Call.Comment != "not on a Friday" {
		t.Errorf("the retry learnt a rejection by %q with comment %q, want bob's %q", o.Call.DecidedBy, o.Call.Comment, "not on a Friday")
	}
	if n := len(ev.parks()); n != 1 {
		t.Errorf("OnPark called %d times, want once (the retry attached)", n)
	}
	if got := get(t, s, in.ID); !got.Delivered {
		t.Error("the rejection was not marked delivered")
	}

	// Learnt once: the next identical retry asks again.
	again := retry(in)
	o = outcome(t, ask(t.Context(), l, again, Hold{}))
	if o.Kind != Waiting || o.Call.ID != again.ID || o.Call.State != pending.Waiting {
		t.Fatalf("second retry = %s, want a new call %s waiting", describe(o), again.ID)
	}
	if p := ev.parks(); len(p) != 2 || p[1].ID != again.ID {
		t.Errorf("OnPark called %d times, want 2 (the second retry is a new call %s)", len(p), again.ID)
	}
	if n := exec.total(); n != 0 {
		t.Errorf("executed %d times", n)
	}
}

// Both ways a retry finds a rejected call (by the Idempotency-Key, and by
// the arguments without it) learn it the same.
func TestAskRetryLearnsRejectionWithoutKey(t *testing.T) {
	eachStore(t, func(t *testing.T, s pending.Store) {
		exec, ev := newExec(), newEvents()
		l := newLifecycle(t, s, exec, ev)
		in := keyedCall()
		if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
			t.Fatalf("Ask = %s", describe(o))
		}
		if _, err := s.Decide(t.Context(), in.ID, pending.Decision{To: pending.Rejected, By: "bob", Comment: "no"}); err != nil {
			t.Fatal(err)
		}
		o := outcome(t, ask(t.Context(), l, argsRetry(in), Hold{For: long}))
		if o.Kind != Ended || o.Call.ID != in.ID || o.Call.Comment != "no" {
			t.Fatalf("keyless retry = %s (comment %q), want Ended %s with the comment", describe(o), o.Call.Comment, in.ID)
		}
		// Delivered: the keyed retry is a new call too.
		r := retry(in)
		if o := outcome(t, ask(t.Context(), l, r, Hold{})); o.Kind != Waiting || o.Call.ID != r.ID {
			t.Fatalf("keyed retry after the delivery = %s, want a new call %s", describe(o), r.ID)
		}
		if n := len(ev.parks()); n != 2 {
			t.Errorf("OnPark called %d times, want 2", n)
		}
	})
}

// A call that expired with nobody held learns it the same way: the retry
// that finds it (swept or not) gets the expiry once, the next one asks
// again.
func TestAskRetryLearnsExpiry(t *testing.T) {
	for _, swept := range []bool{false, true} {
		name := "unswept"
		if swept {
			name = "swept"
		}
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s pending.Store) {
				const ttl = 200 * time.Millisecond
				exec, ev := newExec(), newEvents()
				l := newLifecycleTTL(t, s, exec, ev, ttl)
				in := keyedCall()
				if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
					t.Fatalf("Ask = %s", describe(o))
				}
				time.Sleep(ttl + 150*time.Millisecond)
				if swept {
					l.SweepOnce(t.Context(), time.Minute)
					ev.checkResolved(t, in.ID, pending.Expired)
				}
				o := outcome(t, ask(t.Context(), l, argsRetry(in), Hold{For: long}))
				if o.Kind != Ended || o.Call.ID != in.ID || o.Call.State != pending.Expired {
					t.Fatalf("retry after the expiry = %s, want Ended %s expired", describe(o), in.ID)
				}
				if n := len(ev.parks()); n != 1 {
					t.Errorf("OnPark called %d times, want once", n)
				}
				r := retry(in)
				if o := outcome(t, ask(t.Context(), l, r, Hold{})); o.Kind != Waiting || o.Call.ID != r.ID {
					t.Fatalf("second retry = %s, want a new call %s", describe(o), r.ID)
				}
				if n := len(ev.parks()); n != 2 {
					t.Errorf("OnPark called %d times, want 2", n)
				}
			})
		})
	}
}

// The request held while its call is rejected learns it (Ended) and takes
// it: a retry after that is a new call.
func TestAskHeldTakesRejection(t *testing.T) {
	eachStore(t, func(t *testing.T, s pending.Store) {
		exec, ev := newExec(), newEvents()
		l := newLifecycle(t, s, exec, ev)
		in := keyedCall()
		ch := ask(t.Context(), l, in, Hold{For: long})
		ev.waitParked(t)
		decide(t, s, in.ID, pending.Rejected)
		if o := outcome(t, ch); o.Kind != Ended || o.Call.State != pending.Rejected || o.Call.Comment != "ok" {
			t.Fatalf("held Ask = %s (comment %q), want Ended rejected with bob's comment", describe(o), o.Call.Comment)
		}
		r := argsRetry(in)
		if o := outcome(t, ask(t.Context(), l, r, Hold{})); o.Kind != Waiting || o.Call.ID != r.ID {
			t.Fatalf("retry after the held request learnt the rejection = %s, want a new call %s", describe(o), r.ID)
		}
	})
}

// Two requests held on one call when it is rejected: one learns it, the
// other is told it went to another request (Taken), as for a result.
func TestAskRejectionOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, s pending.Store) {
		var parks atomic.Int32
		hs := &hookStore{Store: s, park: func(ctx context.Context, c pending.Call, ttl time.Duration) (pending.Call, bool, error) {
			defer parks.Add(1)
			return s.Park(ctx, c, ttl)
		}}
		exec, ev := newExec(), newEvents()
		l := newLifecycle(t, hs, exec, ev)
		in := keyedCall()
		ch1 := ask(t.Context(), l, in, Hold{For: long})
		ev.waitParked(t)
		ch2 := ask(t.Context(), l, argsRetry(in), Hold{For: long})
		// Both are held (parked or attached) before the decision.
		testkit.WaitFor(t, "both requests parked or attached", func() bool { return parks.Load() == 2 })
		stillHeld(t, ch1)
		stillHeld(t, ch2)
		decide(t, s, in.ID, pending.Rejected)
		kinds := map[Kind]int{}
		for _, ch := range []<-chan Outcome{ch1, ch2} {
			o := outcome(t, ch)
			kinds[o.Kind]++
			if o.Call.ID != in.ID || o.Call.State != pending.Rejected {
				t.Errorf("outcome %s, want one about %s rejected", describe(o), in.ID)
			}
		}
		if kinds[Ended] != 1 || kinds[Taken] != 1 {
			t.Errorf("outcomes %v (by Kind), want one Ended (%d) and one Taken (%d)", kinds, Ended, Taken)
		}
		if n := len(ev.parks()); n != 1 {
			t.Errorf("OnPark called %d times, want once", n)
		}
	})
}

// Identical retries at once after a rejection (all with the key, or all
// without it): exactly one learns it; the others are Taken, or, coming
// after the delivery, attach to one new call.
func TestAskRetriesRaceForRejection(t *testing.T) {
	for _, keyless := range []bool{false, true} {
		name := "same key"
		if keyless {
			name = "no key"
		}
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s pending.Store) { testAskRetriesRaceForRejection(t, s, keyless) })
		})
	}
}

func testAskRetriesRaceForRejection(t *testing.T, s pending.Store, keyless bool) {
	const n = 12
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := keyedCall()
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	decide(t, s, in.ID, pending.Rejected)
	outs := make([]Outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		r := retry(in)
		if keyless {
			r = argsRetry(in)
		}
		wg.Go(func() {
			<-start
			outs[i] = l.Ask(t.Context(), r, Hold{})
		})
	}
	close(start)
	wg.Wait()
	kinds, newCalls := map[Kind]int{}, map[string]bool{}
	for _, o := range outs {
		kinds[o.Kind]++
		switch o.Kind {
		case Ended, Taken:
			if o.Call.ID != in.ID {
				t.Errorf("outcome %s, want one about the rejected call %s", describe(o), in.ID)
			}
		case Waiting:
			newCalls[o.Call.ID] = true
		default:
			t.Errorf("outcome %s, want Ended, Taken or Waiting", describe(o))
		}
	}
	if kinds[Ended] != 1 {
		t.Errorf("outcomes %v (by Kind): %d learnt the rejection, want exactly 1", kinds, kinds[Ended])
	}
	if len(newCalls) > 1 || len(ev.parks()) != 1+len(newCalls) {
		t.Errorf("retries parked %d new calls (OnPark %d times), want at most one new call", len(newCalls), len(ev.parks()))
	}
}

// A status poll that reads a rejection delivers it, as it delivers a
// result: a retry after that asks again. Without take it does not.
func TestStatusTakesRejection(t *testing.T) {
	s := pending.NewMemory(pending.Options{})
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := keyedCall()
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	decide(t, s, in.ID, pending.Rejected)
	if pc, err := l.Status(t.Context(), "alice", in.ID, 0, false); err != nil || pc.State != pending.Rejected {
		t.Fatalf("Status = %s, %v", pc.State, err)
	}
	if get(t, s, in.ID).Delivered {
		t.Fatal("Status without take delivered the rejection")
	}
	if pc, err := l.Status(context.Background(), "alice", in.ID, 0, true); err != nil || pc.State != pending.Rejected || pc.Comment != "ok" {
		t.Fatalf("Status(take) = %s (comment %q), %v", pc.State, pc.Comment, err)
	}
	if !get(t, s, in.ID).Delivered {
		t.Fatal("Status(take) did not mark the rejection delivered")
	}
	r := argsRetry(in)
	if o := l.Ask(t.Context(), r, Hold{}); o.Kind != Waiting || o.Call.ID != r.ID {
		t.Fatalf("retry after the poll = %s, want a new call %s", describe(o), r.ID)
	}
	if n := len(ev.parks()); n != 2 {
		t.Errorf("OnPark called %d times, want 2", n)
	}
}

// A call parked with an Idempotency-Key is found by an identical retry
// without it: one call, OnPark once, and the result reaches the retry.
func TestAskKeylessRetryAttachesToKeyed(t *testing.T) {
	eachStore(t, func(t *testing.T, s pending.Store) {
		exec, ev := newExec(), newEvents()
		l := newLifecycle(t, s, exec, ev)
		in := keyedCall()
		if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
			t.Fatalf("Ask = %s", describe(o))
		}
		ch := ask(t.Context(), l, argsRetry(in), Hold{For: long})
		decide(t, s, in.ID, pending.Approved)
		if o := outcome(t, ch); o.Kind != Delivered || o.Call.ID != in.ID {
			t.Fatalf("keyless retry = %s, want Delivered %s", describe(o), in.ID)
		}
		if n := len(ev.parks()); n != 1 {
			t.Errorf("OnPark called %d times, want once", n)
		}
		if n := exec.total(); n != 1 {
			t.Errorf("executed %d times, want once", n)
		}
	})
}
