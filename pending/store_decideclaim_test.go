package pending

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testDecideClaim checks Decision.Claim: an approval that moves the call
// claims it in the same step, leaving the store exactly as Decide then
// Claim would (one fence, the lease, the approval an end still owed, the
// principal's count given back); a rejection, or an approval that leaves
// the call waiting, claims nothing.
func testDecideClaim(t *testing.T, newStore newStoreFunc) {
	approve := func(t *testing.T, s Store, id, by string, counts ...int) Call {
		t.Helper()
		c, err := s.Decide(t.Context(), id, Decision{To: Approved, By: by, Comment: "ok", Counts: counts, Claim: time.Minute})
		if err != nil {
			t.Fatalf("Decide(approve by %s, claim) = %v", by, err)
		}
		return c
	}
	t.Run("claims", func(t *testing.T) {
		s, _ := newStore(t)
		in := sampleCall()
		c := park(t, s, in, long)
		before := time.Now()
		got := approve(t, s, c.ID, "bob")
		if got.State != Executing || got.Fence != 1 || got.DecidedBy != "bob" || got.DecidedAt.IsZero() || len(got.Approvals) != 1 {
			t.Fatalf("Decide with a claim: %s, fence %d, by %q, %d approvals; want executing, fence 1, by bob, one approval",
				got.State, got.Fence, got.DecidedBy, len(got.Approvals))
		}
		if string(got.Request) != string(in.Request) || string(got.Info) != string(in.Info) {
			t.Errorf("the claimed call has request %q, info %s; want them whole", got.Request, got.Info)
		}
		if got.LeaseUntil.Before(before.Add(time.Minute-5*time.Second)) || got.LeaseUntil.After(time.Now().Add(time.Minute+5*time.Second)) {
			t.Errorf("lease until %v, want a minute from the decision", got.LeaseUntil)
		}
		if diff := cmp.Diff(get(t, s, c.ID), got); diff != "" {
			t.Errorf("Decide with a claim returned (-get +decide):\n%s", diff)
		}
		if _, err := s.Claim(t.Context(), c.ID, time.Minute); !isState(err, Executing) {
			t.Errorf("Claim after it = %v, want a StateError: it is claimed", err)
		}
		if n, err := s.Count(t.Context(), Approved); err != nil || n != 0 {
			t.Errorf("Count(approved) = %d, %v; want 0: it passed through", n, err)
		}
		if ids := approved(t, s, 0); len(ids) != 0 {
			t.Errorf("Approved = %v, want none for the sweeper", ids)
		}
		if l, err := s.List(t.Context(), Executing, 10); err != nil || len(l) != 1 || l[0].ID != c.ID {
			t.Errorf("List(executing) = %v, %v; want the call", ids(l), err)
		}
		owed, err := s.Unresolved(t.Context(), 0, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(owed, func(o Owed) bool { return o.ID == c.ID && o.State == Approved }) {
			t.Errorf("Unresolved = %v, want the approval of %s owed", owed, c.ID)
		}
		done, err := s.Finish(t.Context(), c.ID, got.Fence, Executed, Result{Status: 200})
		if err != nil || done.State != Executed {
			t.Errorf("Finish with the fence = %s, %v; want executed", done.State, err)
		}
	})
	t.Run("gives back the principal's place", func(t *testing.T) {
		s, _ := newStore(t, caps(0, 1))
		c := park(t, s, sampleCall(), long)
		approve(t, s, c.ID, "bob")
		if _, _, err := s.Park(t.Context(), sampleCall(), long); err != nil {
			t.Errorf("Park after the only call was claimed = %v; an executing call no longer counts", err)
		}
	})
	t.Run("quorum", func(t *testing.T) {
		s, _ := newStore(t)
		in := sampleCall()
		in.Quorum = []int{2}
		c := park(t, s, in, long)
		if got := approve(t, s, c.ID, "ann", 0); got.State != Waiting || got.Fence != 0 || got.Request != nil {
			t.Fatalf("one approval of two, with a claim: %s, fence %d, request %q; want waiting as Decide leaves it", got.State, got.Fence, got.Request)
		}
		if got := approve(t, s, c.ID, "bob", 0); got.State != Executing || got.Fence != 1 || len(got.Approvals) != 2 {
			t.Errorf("the approval that meets the quorum: %s, fence %d, %d approvals; want executing, fence 1, two", got.State, got.Fence, len(got.Approvals))
		}
	})
	t.Run("rejection", func(t *testing.T) {
		s, _ := newStore(t)
		c := park(t, s, sampleCall(), long)
		got, err := s.Decide(t.Context(), c.ID, Decision{To: Rejected, By: "bob", Claim: time.Minute})
		if err != nil || got.State != Rejected || got.Fence != 0 {
			t.Errorf("a rejection with a claim: %s, fence %d, %v; want rejected, no fence", got.State, got.Fence, err)
		}
	})
	t.Run("overdue", func(t *testing.T) {
		s, advance := newStore(t, approvedWindow(time.Millisecond))
		c := park(t, s, sampleCall(), short)
		advance(2 * short)
		_, err := s.Decide(t.Context(), c.ID, Decision{To: Approved, By: "bob", Claim: time.Minute})
		var se *StateError
		if !errors.As(err, &se) || !se.Ended || se.Call.State != Expired {
			t.Errorf("an approval with a claim past the expiry = %v; want it ended expired", err)
		}
	})
	t.Run("negative lease", func(t *testing.T) {
		s, _ := newStore(t)
		c := park(t, s, sampleCall(), long)
		if _, err := s.Decide(t.Context(), c.ID, Decision{To: Approved, By: "bob", Claim: -time.Second}); err == nil {
			t.Error("a negative lease was taken")
		}
		if got := get(t, s, c.ID); got.State != Waiting {
			t.Errorf("after a refused decision the call is %s, want waiting", got.State)
		}
	})
}
