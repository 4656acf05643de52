package pending

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testQuorum checks approvals by several approvers: each approver counts
// once, towards the requirements the caller names, and the call moves only
// when every requirement has its approvals; a rejection ends it at once.
func testQuorum(t *testing.T, newStore newStoreFunc) {
	approve := func(t *testing.T, s Store, id, by string, counts ...int) Call {
		t.Helper()
		c, err := s.Decide(t.Context(), id, Decision{To: Approved, By: by, Comment: "ok " + by, Counts: counts})
		if err != nil {
			t.Fatalf("Decide(approve by %s) = %v", by, err)
		}
		// the call as stored, field for field, but its request
		stored := get(t, s, id)
		stored.Request = nil
		if diff := cmp.Diff(stored, c); diff != "" {
			t.Errorf("Decide(approve by %s) returned (-get without request +decide):\n%s", by, diff)
		}
		return c
	}
	quorumCall := func(q ...int) Call {
		c := sampleCall()
		c.Quorum = q
		return c
	}
	t.Run("two of two", func(t *testing.T) {
		s, _ := newStore(t)
		c := park(t, s, quorumCall(2), long)
		if got := get(t, s, c.ID); len(got.Quorum) != 1 || got.Quorum[0] != 2 {
			t.Fatalf("Quorum after Park = %v, want [2]", got.Quorum)
		}
		got := approve(t, s, c.ID, "alice", 0)
		if got.State != Waiting || len(got.Approvals) != 1 || got.Approvals[0].By != "alice" || got.Approvals[0].Comment != "ok alice" {
			t.Fatalf("after one of two approvals: %s with %+v, want waiting with alice's", got.State, got.Approvals)
		}
		if got.Approvals[0].At.IsZero() || len(got.Approvals[0].Counts) != 1 || got.Approvals[0].Counts[0] != 0 {
			t.Errorf("approval = %+v, want a time and counts [0]", got.Approvals[0])
		}
		if again := approve(t, s, c.ID, "alice", 0); again.State != Waiting || len(again.Approvals) != 1 {
			t.Fatalf("alice approving twice: %s with %d approvals, want waiting with 1", again.State, len(again.Approvals))
		}
		if again := approve(t, s, c.ID, "ALICE", 0); again.State != Waiting || len(again.Approvals) != 1 {
			t.Fatalf("ALICE after alice: %s with %d approvals, want one approver counted once", again.State, len(again.Approvals))
		}
		got = approve(t, s, c.ID, "bob", 0)
		if got.State != Approved || got.DecidedBy != "bob" || len(got.Approvals) != 2 || got.DecidedAt.IsZero() {
			t.Fatalf("after two of two: %s by %q with %d approvals, want approved by bob with 2", got.State, got.DecidedBy, len(got.Approvals))
		}
		if stored := get(t, s, c.ID); stored.State != Approved || len(stored.Approvals) != 2 || stored.Approvals[1].By != "bob" {
			t.Errorf("stored: %s with %+v", stored.State, stored.Approvals)
		}
		if _, err := s.Decide(t.Context(), c.ID, Decision{To: Approved, By: "carol", Counts: []int{0}}); !errors.Is(err, ErrConflict) {
			t.Errorf("a third approval after the quorum = %v, want ErrConflict", err)
		}
	})
	t.Run("approvals count only towards their requirements", func(t *testing.T) {
		s, _ := newStore(t)
		c := park(t, s, quorumCall(1, 2), long)
		// alice counts towards both, bob towards the first only: the
		// second still needs one more.
		approve(t, s, c.ID, "alice", 0, 1)
		if got := approve(t, s, c.ID, "bob", 0); got.State != Waiting {
			t.Fatalf("requirement 1 has one of two approvals, yet the call is %s", got.State)
		}
		if got := approve(t, s, c.ID, "carol", 1); got.State != Approved {
			t.Fatalf("every requirement met, yet the call is %s", got.State)
		}
	})
	t.Run("an approval counting towards nothing changes no state", func(t *testing.T) {
		s, _ := newStore(t)
		c := park(t, s, quorumCall(1), long)
		if got := approve(t, s, c.ID, "mallory"); got.State != Waiting {
			t.Fatalf("an approval that counts towards no requirement moved the call to %s", got.State)
		}
	})
	t.Run("rejection after a partial approval", func(t *testing.T) {
		s, _ := newStore(t)
		c := park(t, s, quorumCall(2), long)
		approve(t, s, c.ID, "alice", 0)
		got, err := s.Decide(t.Context(), c.ID, Decision{To: Rejected, By: "bob", Comment: "no"})
		if err != nil || got.State != Rejected || got.DecidedBy != "bob" || got.Comment != "no" {
			t.Fatalf("reject = %s by %q (%q), %v; want rejected by bob", got.State, got.DecidedBy, got.Comment, err)
		}
		if len(got.Approvals) != 1 {
			t.Errorf("the rejected call keeps %d approvals, want alice's", len(got.Approvals))
		}
	})
	t.Run("a single approval is recorded too", func(t *testing.T) {
		s, _ := newStore(t)
		c := park(t, s, sampleCall(), long)
		got := approve(t, s, c.ID, "alice")
		if got.State != Approved || len(got.Approvals) != 1 || got.Approvals[0].By != "alice" {
			t.Fatalf("single approval: %s with %+v", got.State, got.Approvals)
		}
	})
	t.Run("approvals per call bounded", func(t *testing.T) {
		s, _ := newStore(t)
		c := park(t, s, quorumCall(1, maxApprover), long)
		for i := range maxApprover + 5 {
			approve(t, s, c.ID, fmt.Sprintf("approver-%d", i), 0)
		}
		if got := get(t, s, c.ID); got.State != Waiting || len(got.Approvals) != maxApprover {
			t.Fatalf("after %d approvals towards a met requirement: %s with %d recorded, want waiting with %d",
				maxApprover+5, got.State, len(got.Approvals), maxApprover)
		}
	})
	t.Run("invalid quorum refused", func(t *testing.T) {
		s, _ := newStore(t)
		for _, q := range [][]int{{0}, {-1}, {maxApprover + 1}, make([]int, maxQuorum+1)} {
			if _, _, err := s.Park(t.Context(), quorumCall(q...), long); err == nil {
				t.Errorf("Park with quorum %v succeeded", q)
			}
		}
		c := park(t, s, sampleCall(), long)
		if _, err := s.Decide(t.Context(), c.ID, Decision{To: Approved}); err == nil {
			t.Error("an approval without an approver succeeded")
		}
	})
}

// testQuorumRace checks that approvals made at once are all counted, once
// each: n approvers, each twice, against a quorum of n.
func testQuorumRace(t *testing.T, newStore newStoreFunc) {
	const n = 8
	s, _ := newStore(t)
	c := sampleCall()
	c.Quorum = []int{n}
	c = park(t, s, c, long)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		approved int
	)
	start := make(chan struct{})
	for i := range 2 * n {
		wg.Go(func() {
			<-start
			got, err := s.Decide(t.Context(), c.ID, Decision{To: Approved, By: fmt.Sprintf("approver-%d", i%n), Counts: []int{0}})
			if err != nil && !errors.Is(err, ErrConflict) {
				t.Errorf("Decide = %v", err)
				return
			}
			if err == nil && got.State == Approved {
				mu.Lock()
				approved++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	got := get(t, s, c.ID)
	if got.State != Approved || len(got.Approvals) != n {
		t.Fatalf("%d approvers twice each, quorum %d: %s with %d approvals, want approved with %d", n, n, got.State, len(got.Approvals), n)
	}
	seen := map[string]bool{}
	for _, a := range got.Approvals {
		if seen[a.By] {
			t.Errorf("%s counted twice", a.By)
		}
		seen[a.By] = true
	}
	if approved < 1 {
		t.Errorf("no Decide answered approved")
	}
}
