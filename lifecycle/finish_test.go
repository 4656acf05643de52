package lifecycle

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// finishAway is a real store whose Finish and FinishDeliver do not answer
// (errDown) until up is called, as a paused or restarting Redis does. The
// lostAt-th one (from 1; 0: none) is recorded all the same, its answer
// lost, and then runs.
type finishAway struct {
	pending.Store
	isUp      atomic.Bool
	failFirst int32 // this many fail unrecorded even when up
	lostAt    int32
	then      func()
	attempts  atomic.Int32
}

func (s *finishAway) up() { s.isUp.Store(true) }

func (s *finishAway) finish(f func() (pending.Call, error)) (pending.Call, error) {
	n := s.attempts.Add(1)
	if n == s.lostAt {
		if c, err := f(); err != nil {
			return c, err
		}
		if s.then != nil {
			s.then()
		}
		return pending.Call{}, errDown
	}
	if n <= s.failFirst || !s.isUp.Load() {
		return pending.Call{}, errDown
	}
	return f()
}

func (s *finishAway) Finish(ctx context.Context, id string, fence int64, to pending.State, res pending.Result) (pending.Call, error) {
	return s.finish(func() (pending.Call, error) { return s.Store.Finish(ctx, id, fence, to, res) })
}

func (s *finishAway) FinishDeliver(ctx context.Context, id string, fence int64, to pending.State, res pending.Result) (pending.Call, error) {
	return s.finish(func() (pending.Call, error) { return s.Store.FinishDeliver(ctx, id, fence, to, res) })
}

// waitForFinish makes a held request wait d for its result to be
// recorded (heldFinishWait), for the test.
func waitForFinish(t *testing.T, d time.Duration) {
	old := heldFinishWait
	heldFinishWait = d
	t.Cleanup(func() { heldFinishWait = old })
}

// approvedHeld parks a new call (with an attach key, for retries) through
// a Lifecycle on s with exec, held by a request on ctx, and approves it, so
// that the request runs it: the Lifecycle, the call, and what the request
// ends with.
func approvedHeld(t *testing.T, ctx context.Context, s pending.Store, exec *fakeExec) (*Lifecycle, pending.Call, <-chan Outcome) {
	t.Helper()
	ev := newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := withKey(newCall())
	ch := ask(ctx, l, in, Hold{For: long})
	ev.waitParked(t)
	decide(t, s, in.ID, pending.Approved)
	return l, in, ch
}

// upAfter brings s back after d.
func upAfter(t *testing.T, s *finishAway, d time.Duration) {
	t.Helper()
	tm := time.AfterFunc(d, s.up)
	t.Cleanup(func() { tm.Stop() })
}

// wantRecorded waits for the executed call's result to be stored, and
// checks it is the executor's, delivered as said.
func wantRecorded(t *testing.T, s pending.Store, id string, delivered bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	got := get(t, s, id)
	for got.State == pending.Executing && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		got = get(t, s, id)
	}
	if got.State != pending.Executed || got.Result == nil || got.Delivered != delivered {
		t.Fatalf("stored call %s, result %v, delivered %v; want executed with its result, delivered %v", got.State, got.Result, got.Delivered, delivered)
	}
	if diff := cmp.Diff(resultOf(id), *got.Result, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("stored result (-executor's +stored):\n%s", diff)
	}
}

// TestFinishWhileStoreAway: an executed call's result is recorded once
// the store answers again within the lease, for a held request (which
// gets it) and for the sweeper; the upstream ran once. Recorded at the
// first attempt or never, a short pause of the store made the call
// unknown at its lease's end, the upstream's answer lost.
func TestFinishWhileStoreAway(t *testing.T) {
	eachStore(t, func(t *testing.T, store pending.Store) {
		t.Run("held", func(t *testing.T) {
			s := &finishAway{Store: store}
			upAfter(t, s, 300*time.Millisecond)
			exec := newExec()
			_, in, ch := approvedHeld(t, t.Context(), s, exec)
			if o := outcome(t, ch); o.Kind != Delivered || o.Result.Status != resultOf(in.ID).Status {
				t.Fatalf("Ask = %s, want the result delivered", describe(o))
			}
			wantRecorded(t, s, in.ID, true)
			if n := s.attempts.Load(); n < 2 {
				t.Errorf("%d attempts to record, want it tried again", n)
			}
			if n := exec.count(in.ID); n != 1 {
				t.Errorf("executed %d times, want once", n)
			}
		})
		t.Run("sweeper", func(t *testing.T) {
			s := &finishAway{Store: store}
			exec, ev := newExec(), newEvents()
			l := newLifecycle(t, s, exec, ev)
			in := newCall()
			if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
				t.Fatalf("Ask = %s", describe(o))
			}
			decide(t, s, in.ID, pending.Approved)
			upAfter(t, s, 300*time.Millisecond)
			l.SweepOnce(t.Context(), 0)
			wantRecorded(t, s, in.ID, false)
			if n := exec.count(in.ID); n != 1 {
				t.Errorf("executed %d times, want once", n)
			}
		})
	})
}

// TestFinishAfterHoldGaveUp: a held request that stops waiting for the
// store (heldFinishWait) gets the result unrecorded, and the recording
// goes on until the store takes it, as delivered: a retry of the request
// does not get the result a second time.
func TestFinishAfterHoldGaveUp(t *testing.T) {
	waitForFinish(t, 50*time.Millisecond)
	eachStore(t, func(t *testing.T, store pending.Store) {
		s := &finishAway{Store: store}
		l, in, ch := approvedHeld(t, t.Context(), s, newExec())
		o := outcome(t, ch)
		if o.Kind != Delivered || o.Result.Status != resultOf(in.ID).Status {
			t.Fatalf("Ask = %s, want the result delivered", describe(o))
		}
		if got := get(t, s, in.ID); got.State != pending.Executing {
			t.Fatalf("stored call %s before the store answered, want executing", got.State)
		}
		s.up()
		wantRecorded(t, s, in.ID, true)
		if !l.Settle(t.Context(), false) {
			t.Error("Settle did not see the recording end")
		}
	})
}

// TestFinishAnswerLost: an attempt to record that the store took but
// whose answer was lost is found recorded by the next one (the call is
// no longer executing, by this executor's fence): the held request gets
// the stored result, and nothing says the result was not recorded.
func TestFinishAnswerLost(t *testing.T) {
	eachStore(t, func(t *testing.T, store pending.Store) {
		s := &finishAway{Store: store, lostAt: 1}
		s.up()
		exec, ev := newExec(), newEvents()
		var buf testkit.Buffer
		l, err := New(Config{Store: s, Executor: exec, TTL: time.Hour, OnPark: ev.onPark, OnResolve: ev.onResolve, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Drain)
		in := newCall()
		ch := ask(t.Context(), l, in, Hold{For: long})
		ev.waitParked(t)
		decide(t, s, in.ID, pending.Approved)
		if o := outcome(t, ch); o.Kind != Delivered || o.Call.State != pending.Executed || o.Result.Status != resultOf(in.ID).Status {
			t.Fatalf("Ask = %s, want the stored result delivered", describe(o))
		}
		wantRecorded(t, s, in.ID, true)
		if n := s.attempts.Load(); n != 2 {
			t.Errorf("%d attempts to record, want 2", n)
		}
		for _, rec := range buf.JSONLines(t) {
			if rec["level"] == "ERROR" {
				t.Errorf("logged %v for a result that was recorded", rec)
			}
		}
	})
}

// TestFinishAgentLeftMeanwhile: an agent that leaves while its executed
// call's result waits on the store is not handed the result, and the
// result is recorded for its retry, not as delivered: the retry gets it,
// and nothing asks or runs again.
func TestFinishAgentLeftMeanwhile(t *testing.T) {
	waitForFinish(t, 2*time.Second)
	eachStore(t, func(t *testing.T, store pending.Store) {
		s := &finishAway{Store: store}
		exec := newExec()
		ctx, leave := context.WithCancel(t.Context())
		l, in, ch := approvedHeld(t, ctx, s, exec)
		for s.attempts.Load() < 2 { // executed; the store asked twice
			time.Sleep(5 * time.Millisecond)
		}
		leave()
		if o := outcome(t, ch); o.Kind != Gone {
			t.Errorf("Ask of the agent that left = %s, want Gone", describe(o))
		}
		s.up()
		wantRecorded(t, s, in.ID, false)
		if r := l.Ask(t.Context(), retry(in), Hold{}); r.Kind != Delivered || r.Call.ID != in.ID {
			t.Errorf("the retry = %s, want call %s's result", describe(r), in.ID)
		}
		if n := exec.count(in.ID); n != 1 {
			t.Errorf("executed %d times, want once", n)
		}
	})
}

// TestFinishLostAnswerAgentLeft: an attempt after the first records the
// result without marking it delivered, so that when its answer is lost and
// the agent leaves meanwhile, the result is kept for the agent's retry.
// And a request that left is never told Delivered, even when the next
// attempt finds the result recorded and taken by a retry.
func TestFinishLostAnswerAgentLeft(t *testing.T) {
	eachStore(t, func(t *testing.T, store pending.Store) {
		t.Run("kept for the retry", func(t *testing.T) {
			ctx, leave := context.WithCancel(t.Context())
			s := &finishAway{Store: store, failFirst: 1, lostAt: 2, then: leave}
			s.up()
			l, in, ch := approvedHeld(t, ctx, s, newExec())
			if o := outcome(t, ch); o.Kind != Gone {
				t.Errorf("Ask of the agent that left = %s, want Gone", describe(o))
			}
			wantRecorded(t, s, in.ID, false)
			if r := l.Ask(t.Context(), retry(in), Hold{}); r.Kind != Delivered || r.Call.ID != in.ID {
				t.Errorf("the retry = %s, want call %s's result", describe(r), in.ID)
			}
		})
		t.Run("taken by a retry", func(t *testing.T) {
			ctx, leave := context.WithCancel(t.Context())
			s := &finishAway{Store: store, lostAt: 1}
			s.up()
			exec := newExec()
			exec.hold()
			l, in, ch := approvedHeld(t, ctx, s, exec)
			var r Outcome
			s.then = func() { r = l.Ask(t.Context(), retry(in), Hold{}) } // read after the run, which this precedes
			<-exec.started
			leave()
			exec.release()
			o := outcome(t, ch)
			if r.Kind != Delivered {
				t.Fatalf("the retry = %s, want the result", describe(r))
			}
			if o.Kind != Gone {
				t.Errorf("the request that left = %s after its retry had the result, want Gone", describe(o))
			}
		})
	})
}
