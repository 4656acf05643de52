package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolgate/toolgate/pending"
)

// waitEntered returns a store whose Wait reports on the channel that it
// began, so that a test acts only once a long poll is waiting.
func waitEntered(s pending.Store) (*hookStore, <-chan struct{}) {
	entered := make(chan struct{}, 100)
	return &hookStore{Store: s, wait: func(ctx context.Context, id string, from pending.State) (pending.Call, error) {
		entered <- struct{}{}
		return s.Wait(ctx, id, from)
	}}, entered
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(deadline):
		t.Fatalf("never: %s", what)
	}
}

type statusResult struct {
	pc  pending.Call
	err error
}

func status(ctx context.Context, l *Lifecycle, subject, id string, wait time.Duration, take bool) <-chan statusResult {
	ch := make(chan statusResult, 1)
	go func() {
		pc, err := l.Status(ctx, subject, id, wait, take)
		ch <- statusResult{pc, err}
	}()
	return ch
}

func statusOf(t *testing.T, ch <-chan statusResult) (pending.Call, error) {
	t.Helper()
	select {
	case r := <-ch:
		return r.pc, r.err
	case <-time.After(deadline):
		t.Fatal("Status never returned")
		return pending.Call{}, nil
	}
}

// Another subject's call, or no call, is not found, and tells nothing.
func TestStatusNotFound(t *testing.T) {
	s := pending.NewMemory(pending.Options{})
	l := newLifecycle(t, s, newExec(), newEvents())
	in := newCall()
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	own, err := l.Status(t.Context(), "alice", in.ID, 0, false)
	if err != nil || own.ID != in.ID || own.State != pending.Waiting || own.Subject != "alice" {
		t.Fatalf("Status(own) = %s %s of %q, %v; want %s waiting", own.ID, own.State, own.Subject, err, in.ID)
	}
	for _, tc := range []struct{ subject, id string }{{"mallory", in.ID}, {"alice", "no-such-call"}} {
		pc, err := l.Status(t.Context(), tc.subject, tc.id, time.Minute, true)
		if !errors.Is(err, pending.ErrNotFound) {
			t.Errorf("Status(%s, %s) = %v, want ErrNotFound", tc.subject, tc.id, err)
		}
		if diff := cmp.Diff(pending.Call{ID: tc.id}, pc, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Status(%s, %s) tells more than the ID (-want +got):\n%s", tc.subject, tc.id, diff)
		}
	}
}

// A long poll returns when the call's state moves, or when its wait or
// Drain ends it.
func TestStatusLongPoll(t *testing.T) { eachStore(t, testStatusLongPoll) }

func testStatusLongPoll(t *testing.T, s pending.Store) {
	hs, entered := waitEntered(s)
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, hs, exec, ev)
	in := newCall()
	if _, _, err := s.Park(t.Context(), in, time.Hour); err != nil {
		t.Fatal(err)
	}

	// The wait runs out: the call as it stands.
	start := time.Now()
	pc, err := statusOf(t, status(t.Context(), l, "alice", in.ID, 50*time.Millisecond, false))
	if err != nil || pc.State != pending.Waiting {
		t.Fatalf("Status(wait 50ms) = %s, %v; want waiting", pc.State, err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("Status(wait 50ms) returned after %v", took)
	}
	waitFor(t, entered, "Status waits")

	// The state moves: the poll returns at once.
	ch := status(t.Context(), l, "alice", in.ID, long, false)
	waitFor(t, entered, "Status waits")
	decide(t, s, in.ID, pending.Approved)
	pc, err = statusOf(t, ch)
	if err != nil || pc.ID != in.ID || pc.State != pending.Approved || pc.DecidedBy != "bob" {
		t.Fatalf("Status(long poll) = %s %s by %q, %v; want approved by bob", pc.ID, pc.State, pc.DecidedBy, err)
	}

	// Drain ends it at once.
	ch = status(t.Context(), l, "alice", in.ID, long, false)
	waitFor(t, entered, "Status waits")
	l.Drain()
	pc, err = statusOf(t, ch)
	if err != nil || pc.State != pending.Approved {
		t.Fatalf("Status after Drain = %s, %v; want approved", pc.State, err)
	}
	if n := exec.total(); n != 0 {
		t.Errorf("Status executed the call %d times", n)
	}
}

// Reading a finished call with take hands its result over: a retry no
// longer attaches, and the store has it delivered.
func TestStatusTake(t *testing.T) { eachStore(t, testStatusTake) }

func testStatusTake(t *testing.T, s pending.Store) {
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	in := withKey(newCall())
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	// Take on a live call changes nothing.
	if _, err := l.Status(t.Context(), "alice", in.ID, 0, true); err != nil {
		t.Fatal(err)
	}
	decide(t, s, in.ID, pending.Approved)
	l.SweepOnce(t.Context(), 0)
	if n := exec.count(in.ID); n != 1 {
		t.Fatalf("the sweeper executed the call %d times, want once", n)
	}

	pc, err := l.Status(t.Context(), "alice", in.ID, 0, false)
	if err != nil || pc.State != pending.Executed || pc.Result == nil {
		t.Fatalf("Status = %s, result %v, %v; want executed with its result", pc.State, pc.Result, err)
	}
	if diff := cmp.Diff(resultOf(in.ID), *pc.Result, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Status's result (-want +got):\n%s", diff)
	}
	if get(t, s, in.ID).Delivered {
		t.Fatal("Status without take delivered the result")
	}
	pc, err = l.Status(t.Context(), "alice", in.ID, time.Minute, true)
	if err != nil || pc.State != pending.Executed || pc.Result == nil {
		t.Fatalf("Status(take) = %s, result %v, %v; want executed with its result", pc.State, pc.Result, err)
	}
	if !get(t, s, in.ID).Delivered {
		t.Error("Status(take) did not mark the result delivered")
	}
	if first, _, err := s.Deliver(t.Context(), in.ID); err != nil || first {
		t.Errorf("Deliver after Status(take) = first %v, %v; want delivered already", first, err)
	}
	// The result was taken: an identical call is a new call.
	again := retry(in)
	o := l.Ask(t.Context(), again, Hold{})
	if o.Kind != Waiting || o.Call.ID != again.ID {
		t.Errorf("retry after the result was taken = %s, want a new call %s waiting", describe(o), again.ID)
	}
	if n := len(ev.parks()); n != 2 {
		t.Errorf("OnPark called %d times, want 2", n)
	}
	if n := exec.total(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
}

func TestCancel(t *testing.T) {
	s := pending.NewMemory(pending.Options{})
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	park := func() pending.Call {
		in := newCall()
		if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
			t.Fatalf("Ask = %s", describe(o))
		}
		return in
	}

	t.Run("waiting", func(t *testing.T) {
		in := park()
		pc, err := l.Cancel(t.Context(), "alice", in.ID)
		if err != nil || pc.ID != in.ID || pc.State != pending.Cancelled {
			t.Fatalf("Cancel = %s %s, %v; want %s cancelled", pc.ID, pc.State, err, in.ID)
		}
		if got := get(t, s, in.ID); got.State != pending.Cancelled {
			t.Errorf("stored call is %s, want cancelled", got.State)
		}
		ev.checkResolved(t, in.ID, pending.Cancelled)
	})

	t.Run("decided", func(t *testing.T) {
		in := park()
		decide(t, s, in.ID, pending.Approved)
		pc, err := l.Cancel(t.Context(), "alice", in.ID)
		if !errors.Is(err, pending.ErrConflict) || pc.ID != in.ID || pc.State != pending.Approved {
			t.Fatalf("Cancel(approved) = %s %s, %v; want ErrConflict with %s approved", pc.ID, pc.State, err, in.ID)
		}
		if got := get(t, s, in.ID); got.State != pending.Approved {
			t.Errorf("stored call is %s, want still approved", got.State)
		}
		for _, r := range ev.resolves() {
			if r.ID == in.ID {
				t.Errorf("OnResolve(%s %s) for a call not cancelled", r.ID, r.State)
			}
		}
	})

	t.Run("another subject's", func(t *testing.T) {
		in := park()
		pc, err := l.Cancel(t.Context(), "mallory", in.ID)
		if !errors.Is(err, pending.ErrNotFound) {
			t.Fatalf("Cancel(another subject's) = %s, %v; want ErrNotFound", pc.State, err)
		}
		if diff := cmp.Diff(pending.Call{ID: in.ID}, pc, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Cancel(another subject's) tells more than the ID (-want +got):\n%s", diff)
		}
		if got := get(t, s, in.ID); got.State != pending.Waiting {
			t.Errorf("stored call is %s, want still waiting", got.State)
		}
	})

	if n := exec.total(); n != 0 {
		t.Errorf("executed %d times", n)
	}
}
