package pending

import (
	"errors"
	"testing"
	"time"
)

// testOverdue checks what the transitions do with a call past its deadline
// (a waiting or approved call past its expiry, an executing one past its
// lease) that no Expire has moved yet: the transition that would have moved
// the call out of its state ends it instead (expired, or unknown) and hands
// it back with its error; any other transition refuses as it would anyway
// and leaves the call as it stands, for Expire to end and report. Either
// way the call is never executed, and its end is reported exactly once: by
// the transition's error or by Expire. Part of testStore.
func testOverdue(t *testing.T, newStore newStoreFunc) {
	// expired returns the calls Expire moves now, as "id state".
	expired := func(t *testing.T, s Store) []string {
		t.Helper()
		got, err := s.Expire(t.Context(), 10)
		if err != nil {
			t.Fatal(err)
		}
		return states(got)
	}
	// ended checks that Expire reports exactly want ("" for nothing).
	ended := func(t *testing.T, s Store, want string) {
		t.Helper()
		got := expired(t, s)
		if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0] != want) {
			t.Errorf("Expire = %v, want [%s]", got, want)
		}
	}
	// approvedShort parks a call with a short ttl and approves it, with an
	// approved window that does not move the expiry.
	approvedShort := func(t *testing.T) (Store, func(time.Duration), Call) {
		s, advance := newStore(t, approvedWindow(time.Millisecond))
		c := park(t, s, sampleCall(), short)
		decide(t, s, c.ID, Approved)
		return s, advance, c
	}

	t.Run("Claim approved past expiry", func(t *testing.T) {
		s, advance, c := approvedShort(t)
		advance(beyond)
		// Claim is the transition out of approved: it ends the call and
		// says so, with the call.
		if _, err := s.Claim(t.Context(), c.ID, long); !isState(err, Expired) || !endedBy(err) {
			t.Fatalf("Claim(approved, past expiry) = %v, want a StateError (expired) that says it ended the call", err)
		}
		if got := get(t, s, c.ID); got.State != Expired || got.Fence != 0 || got.DecidedBy != "alice" {
			t.Errorf("after Claim: %s fence %d by %q, want expired, never claimed, approved by alice", got.State, got.Fence, got.DecidedBy)
		}
		ended(t, s, "") // reported once, by the Claim
		if _, err := s.Claim(t.Context(), c.ID, long); !isState(err, Expired) || endedBy(err) {
			t.Errorf("Claim again = %v, want a StateError (expired) that did not end it", err)
		}
	})

	t.Run("Claim waiting past expiry", func(t *testing.T) {
		s, advance := newStore(t)
		c := park(t, s, sampleCall(), short)
		advance(beyond)
		// Not Claim's to end: refused as any waiting call, left for Expire.
		if _, err := s.Claim(t.Context(), c.ID, long); !isState(err, Waiting) || endedBy(err) {
			t.Fatalf("Claim(waiting, past expiry) = %v, want a StateError (waiting) that ended nothing", err)
		}
		if got := get(t, s, c.ID); got.State != Waiting || got.Fence != 0 {
			t.Errorf("after Claim: %s fence %d, want waiting, never claimed", got.State, got.Fence)
		}
		ended(t, s, c.ID+" expired")
		if _, err := s.Claim(t.Context(), c.ID, long); !isState(err, Expired) {
			t.Errorf("Claim after Expire = %v, want a StateError (expired)", err)
		}
	})

	t.Run("Claim executing past lease", func(t *testing.T) {
		s, advance := newStore(t)
		c := claimed(t, s, short)
		advance(beyond)
		// The executor still holds the fence: a Claim must not end the
		// call behind its back, or nobody would report the end.
		_, err := s.Claim(t.Context(), c.ID, long)
		var se *StateError
		if !errors.As(err, &se) || se.Call.State != Executing || se.Call.Fence != c.Fence {
			t.Fatalf("Claim(executing, past lease) = %v, want a StateError (executing, fence %d)", err, c.Fence)
		}
		late, err := s.Finish(t.Context(), c.ID, c.Fence, Executed, Result{Status: 200})
		if !errors.Is(err, ErrLapsed) || late.ID != c.ID || late.State != Unknown {
			t.Errorf("Finish after the Claim = %s %s, %v; want the call unknown and ErrLapsed", late.ID, late.State, err)
		}
		ended(t, s, "")
	})

	t.Run("Finish past lease, before Expire", func(t *testing.T) {
		s, advance := newStore(t)
		c := claimed(t, s, short)
		advance(beyond)
		late, err := s.Finish(t.Context(), c.ID, c.Fence, Executed, Result{Status: 200})
		if !errors.Is(err, ErrLapsed) || !errors.Is(err, ErrFenced) || late.ID != c.ID || late.State != Unknown || late.Result != nil {
			t.Fatalf("Finish(past lease) = %s %s, %v; want the call unknown without a result, and ErrLapsed", late.ID, late.State, err)
		}
		if got := get(t, s, c.ID); got.State != Unknown || got.Result != nil {
			t.Errorf("after Finish: %s, result %v; want unknown without a result", got.State, got.Result)
		}
		ended(t, s, "") // reported once, by the Finish
		if _, err := s.Finish(t.Context(), c.ID, c.Fence, Executed, Result{Status: 200}); !errors.Is(err, ErrFenced) || errors.Is(err, ErrLapsed) {
			t.Errorf("Finish again = %v, want ErrFenced, not ErrLapsed", err)
		}
	})

	t.Run("Finish past lease, after Expire", func(t *testing.T) {
		s, advance := newStore(t)
		c := claimed(t, s, short)
		advance(beyond)
		ended(t, s, c.ID+" unknown")
		got, err := s.Finish(t.Context(), c.ID, c.Fence, Executed, Result{Status: 200})
		if !errors.Is(err, ErrFenced) || errors.Is(err, ErrLapsed) {
			t.Errorf("Finish after Expire = %s, %v; want ErrFenced, not ErrLapsed (Expire reported the end)", got.State, err)
		}
		if got := get(t, s, c.ID); got.State != Unknown || got.Result != nil {
			t.Errorf("after Finish: %s, result %v; want unknown without a result", got.State, got.Result)
		}
	})

	t.Run("Finish stale fence past lease", func(t *testing.T) {
		s, advance := newStore(t)
		c := claimed(t, s, short)
		advance(beyond)
		for _, f := range []int64{c.Fence - 1, c.Fence + 1} {
			// Not the executor's write: refused, and the call left for
			// the executor's own Finish to end and report.
			got, err := s.Finish(t.Context(), c.ID, f, Executed, Result{Status: 200})
			if !errors.Is(err, ErrFenced) || errors.Is(err, ErrLapsed) {
				t.Errorf("Finish(fence %d, past lease) = %s, %v; want ErrFenced, not ErrLapsed", f, got.State, err)
			}
		}
		if got := get(t, s, c.ID); got.State != Executing || got.Fence != c.Fence || got.Result != nil {
			t.Errorf("after stale Finishes: %s fence %d result %v, want executing with fence %d, no result", got.State, got.Fence, got.Result, c.Fence)
		}
		late, err := s.Finish(t.Context(), c.ID, c.Fence, Executed, Result{Status: 200})
		if !errors.Is(err, ErrLapsed) || late.State != Unknown {
			t.Errorf("Finish(fence %d) then = %s, %v; want the call unknown and ErrLapsed", c.Fence, late.State, err)
		}
		ended(t, s, "")
	})

	t.Run("Finish stale fence past lease, then Expire", func(t *testing.T) {
		s, advance := newStore(t)
		c := claimed(t, s, short)
		advance(beyond)
		if _, err := s.Finish(t.Context(), c.ID, c.Fence+1, Executed, Result{Status: 200}); !errors.Is(err, ErrFenced) || errors.Is(err, ErrLapsed) {
			t.Errorf("Finish(stale fence, past lease) = %v; want ErrFenced, not ErrLapsed", err)
		}
		ended(t, s, c.ID+" unknown")
	})

	t.Run("Finish not executing past expiry", func(t *testing.T) {
		s, advance := newStore(t, approvedWindow(time.Millisecond))
		w := park(t, s, sampleCall(), short)
		a := park(t, s, sampleCall(), short)
		decide(t, s, a.ID, Approved)
		a = get(t, s, a.ID)
		advance(beyond)
		for _, c := range []Call{w, a} {
			if _, err := s.Finish(t.Context(), c.ID, 1, Executed, Result{Status: 200}); !errors.Is(err, ErrFenced) || errors.Is(err, ErrLapsed) {
				t.Errorf("Finish(%s, past expiry) = %v, want ErrFenced, not ErrLapsed", c.State, err)
			}
			if got := get(t, s, c.ID); got.State != c.State || got.Result != nil {
				t.Errorf("Finish(%s, past expiry) left it %s with result %v, want it as it stood", c.State, got.State, got.Result)
			}
		}
		got := expired(t, s)
		if len(got) != 2 {
			t.Errorf("Expire = %v, want both calls expired", got)
		}
	})

	t.Run("Decide waiting past expiry", func(t *testing.T) {
		s, advance := newStore(t)
		a := park(t, s, sampleCall(), short)
		r := park(t, s, sampleCall(), short)
		q := sampleCall()
		q.Quorum = []int{2}
		q = park(t, s, q, short)
		decide(t, s, q.ID, Approved) // one of two approvals
		advance(beyond)
		if _, err := s.Decide(t.Context(), a.ID, Decision{To: Approved, By: "bob"}); !isState(err, Expired) || !endedBy(err) {
			t.Errorf("Decide(approve, past expiry) = %v, want a StateError (expired) that says it ended the call", err)
		}
		if _, err := s.Decide(t.Context(), r.ID, Decision{To: Rejected, By: "bob"}); !isState(err, Expired) {
			t.Errorf("Decide(reject, past expiry) = %v, want a StateError (expired)", err)
		}
		if _, err := s.Decide(t.Context(), q.ID, Decision{To: Approved, By: "bob", Counts: []int{0}}); !isState(err, Expired) {
			t.Errorf("Decide(last approval of a quorum, past expiry) = %v, want a StateError (expired)", err)
		}
		for _, c := range []Call{a, r} {
			if got := get(t, s, c.ID); got.State != Expired || got.DecidedBy != "" || len(got.Approvals) != 0 {
				t.Errorf("%s: %s by %q with %d approvals, want expired, decided by nobody", c.ID, got.State, got.DecidedBy, len(got.Approvals))
			}
		}
		if got := get(t, s, q.ID); got.State != Expired || len(got.Approvals) != 1 {
			t.Errorf("quorum call: %s with %d approvals, want expired with the one approval made in time", got.State, len(got.Approvals))
		}
		ended(t, s, "") // reported once each, by the Decides
	})

	t.Run("Decide approved past expiry", func(t *testing.T) {
		s, advance, c := approvedShort(t)
		advance(beyond)
		// Not Decide's to end: refused as any approved call, left for
		// Claim or Expire.
		if _, err := s.Decide(t.Context(), c.ID, Decision{To: Rejected, By: "bob"}); !isState(err, Approved) || endedBy(err) {
			t.Errorf("Decide(approved, past expiry) = %v, want a StateError (approved) that ended nothing", err)
		}
		if _, err := s.Cancel(t.Context(), c.ID); !isState(err, Approved) {
			t.Errorf("Cancel(approved, past expiry) = %v, want a StateError (approved)", err)
		}
		ended(t, s, c.ID+" expired")
	})

	t.Run("Decide executing past lease", func(t *testing.T) {
		s, advance := newStore(t)
		c := claimed(t, s, short)
		advance(beyond)
		if _, err := s.Decide(t.Context(), c.ID, Decision{To: Rejected, By: "bob"}); !isState(err, Executing) {
			t.Errorf("Decide(executing, past lease) = %v, want a StateError (executing)", err)
		}
		if _, err := s.Cancel(t.Context(), c.ID); !isState(err, Executing) {
			t.Errorf("Cancel(executing, past lease) = %v, want a StateError (executing)", err)
		}
		ended(t, s, c.ID+" unknown")
	})
}

// endedBy reports whether err is a StateError whose transition ended the
// (overdue) call.
func endedBy(err error) bool {
	var se *StateError
	return errors.As(err, &se) && se.Ended
}
