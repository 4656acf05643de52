package pending

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// testPrincipal checks that a call's principal is kept as given, and that a
// call without one is kept without one. Part of testStore.
func testPrincipal(t *testing.T, newStore newStoreFunc) {
	s, _ := newStore(t)
	for _, p := range []string{"key:alice", "jwt:https://idp.example.com#alice", "anonymous", "key:{odd}:#"} {
		c := asPrincipal(sampleCall(), p)
		if got := park(t, s, c, long); got.Principal != p {
			t.Errorf("Park kept principal %q, want %q", got.Principal, p)
		}
		decide(t, s, c.ID, Approved)
		if got := get(t, s, c.ID); got.Principal != p {
			t.Errorf("Get after Decide: principal %q, want %q", got.Principal, p)
		}
	}
	c := asPrincipal(sampleCall(), "")
	park(t, s, c, long)
	if got := get(t, s, c.ID); got.Principal != "" {
		t.Errorf("a call parked without a principal has %q", got.Principal)
	}
}

// testCaps checks Options.MaxParkedPerPrincipal and Options.MaxParked: a
// new call beyond a cap is refused with ErrTooMany and nothing is stored;
// attaching is always allowed; every way out of waiting and approved frees
// a place, an approval does not. Part of testStore.
func testCaps(t *testing.T, newStore newStoreFunc) {
	const alice, bob = "key:alice", "jwt:https://idp.example.com#alice"
	as := func(principal string) Call { return asPrincipal(sampleCall(), principal) }
	// full checks that principal cannot park a new call, and that the
	// refusal stored nothing.
	full := func(t *testing.T, s Store, principal string) {
		t.Helper()
		c := as(principal)
		got, attached, err := s.Park(t.Context(), c, long)
		if !errors.Is(err, ErrTooMany) || attached || got.ID != "" {
			t.Fatalf("Park(%q) at the cap = %s, attached %v, %v; want ErrTooMany and nothing", principal, got.ID, attached, err)
		}
		if _, err := s.Get(t.Context(), c.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(refused call) = %v, want ErrNotFound", err)
		}
	}

	t.Run("per principal", func(t *testing.T) {
		s, _ := newStore(t, caps(0, 2))
		ctx := t.Context()
		first := as(alice)
		first.AttachKey = "key-" + rand.Text()
		park(t, s, first, long)
		park(t, s, as(alice), long)
		full(t, s, alice)
		// Another principal, and a call without one, have places of their own.
		park(t, s, as(bob), long)
		park(t, s, as(bob), long)
		full(t, s, bob)
		for range 3 {
			park(t, s, as(""), long)
		}
		// A retry attaches at the cap; a retried Park is answered as before.
		retry := as(alice)
		retry.AttachKey = first.AttachKey
		if got, attached, err := s.Park(ctx, retry, long); err != nil || !attached || got.ID != first.ID {
			t.Errorf("Park(retry at the cap) = %s, attached %v, %v; want attached to %s", got.ID, attached, err, first.ID)
		}
		if got, attached, err := s.Park(ctx, first, long); err != nil || attached || got.ID != first.ID {
			t.Errorf("Park(same request again at the cap) = %s, attached %v, %v; want the stored call", got.ID, attached, err)
		}
		full(t, s, alice)
		if n, err := s.Count(ctx, Waiting); err != nil || n != 7 {
			t.Errorf("Count(waiting) = %d, %v; want 7", n, err)
		}
	})

	t.Run("all", func(t *testing.T) {
		s, _ := newStore(t, caps(3, 2))
		park(t, s, as(alice), long)
		park(t, s, as(bob), long)
		park(t, s, as(""), long)
		full(t, s, "key:carol")
		full(t, s, "")
		full(t, s, alice)
	})

	// Each way out of waiting or approved frees one place; an approval
	// keeps it taken.
	for _, tt := range []struct {
		name string
		out  func(t *testing.T, s Store, id string, advance func(time.Duration))
	}{
		{"rejected", func(t *testing.T, s Store, id string, _ func(time.Duration)) {
			decide(t, s, id, Rejected)
		}},
		{"cancelled", func(t *testing.T, s Store, id string, _ func(time.Duration)) {
			if _, err := s.Cancel(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}},
		{"claimed", func(t *testing.T, s Store, id string, _ func(time.Duration)) {
			decide(t, s, id, Approved)
			full(t, s, alice) // approved still counts
			if _, err := s.Claim(t.Context(), id, long); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired, unswept", func(_ *testing.T, _ Store, _ string, advance func(time.Duration)) {
			advance(beyond)
		}},
		{"expired, swept", func(t *testing.T, s Store, id string, advance func(time.Duration)) {
			advance(beyond)
			if got, err := s.Expire(t.Context(), 10); err != nil || len(got) != 1 || got[0].ID != id {
				t.Fatalf("Expire = %v, %v; want [%s]", ids(got), err, id)
			}
		}},
		{"expired by a transition", func(t *testing.T, s Store, id string, advance func(time.Duration)) {
			advance(beyond)
			if _, err := s.Decide(t.Context(), id, Decision{To: Approved, By: "alice", Comment: ""}); !isState(err, Expired) {
				t.Fatalf("Decide(past ttl) = %v, want a StateError (expired)", err)
			}
		}},
		{"approved, expired", func(t *testing.T, s Store, id string, advance func(time.Duration)) {
			decide(t, s, id, Approved)
			full(t, s, alice)
			advance(beyond)
		}},
	} {
		// The same with the cap per principal and across principals,
		// which the stores count apart.
		for _, cap := range []struct {
			name string
			opt  func(*Options)
		}{{"principal", caps(0, 2)}, {"all", caps(2, 0)}} {
			t.Run("frees/"+tt.name+"/"+cap.name, func(t *testing.T) {
				// The approved window is shorter than the ttl, so that an
				// approved call expires at its ttl.
				s, advance := newStore(t, cap.opt, approvedWindow(time.Millisecond))
				out := park(t, s, as(alice), short)
				park(t, s, as(alice), long)
				full(t, s, alice)
				tt.out(t, s, out.ID, advance)
				park(t, s, as(alice), long)
				full(t, s, alice) // exactly one place was freed
			})
		}
	}
}

// testApprovedWindow checks that an approval moves a waiting call's expiry
// to at least now + Options.ApprovedWindow, so that an approval landing just
// before the expiry can still be claimed. Part of testStore.
func testApprovedWindow(t *testing.T, newStore newStoreFunc) {
	t.Run("near the expiry", func(t *testing.T) {
		// Times a loaded machine keeps apart: the Redis store's clock is
		// Redis', and advance sleeps.
		const window, ttl, left = 2 * time.Second, 1500 * time.Millisecond, 600 * time.Millisecond
		s, advance := newStore(t, approvedWindow(window))
		ctx := t.Context()
		a := park(t, s, sampleCall(), ttl)
		b := park(t, s, sampleCall(), ttl)
		advance(ttl - left) // the approvals land in the last moments of the ttl
		for _, c := range []Call{a, b} {
			got, err := s.Decide(ctx, c.ID, Decision{To: Approved, By: "alice", Comment: ""})
			if err != nil {
				t.Fatal(err)
			}
			if !got.ExpiresAt.Equal(got.DecidedAt.Add(window)) {
				t.Errorf("approved with %v left: ExpiresAt = DecidedAt + %v, want + the window %v",
					c.ExpiresAt.Sub(got.DecidedAt), got.ExpiresAt.Sub(got.DecidedAt), window)
			}
			if stored := get(t, s, c.ID); !stored.ExpiresAt.Equal(got.ExpiresAt) {
				t.Errorf("Get: ExpiresAt %v, Decide answered %v", stored.ExpiresAt, got.ExpiresAt)
			}
		}
		advance(left + 150*time.Millisecond) // past the ttl, within the window
		if got, err := s.Expire(ctx, 10); err != nil || len(got) != 0 {
			t.Errorf("Expire past the ttl, within the window = %v, %v; want nothing", states(got), err)
		}
		if got := approved(t, s, 0); len(got) != 2 {
			t.Errorf("Approved = %v, want both calls", got)
		}
		if c, err := s.Claim(ctx, a.ID, long); err != nil || c.State != Executing {
			t.Fatalf("Claim past the ttl, within the window = %s, %v; want executing", c.State, err)
		}
		advance(window) // past the window: the unclaimed call expires
		got, err := s.Expire(ctx, 10)
		if err != nil || len(got) != 1 || got[0].ID != b.ID || got[0].State != Expired {
			t.Errorf("Expire past the window = %v, %v; want [%s expired]", states(got), err, b.ID)
		}
	})
	t.Run("kept for the window", func(t *testing.T) {
		// A ResultTTL shorter than the window: the call must be kept
		// until its new expiry, not forgotten after its ttl's retention.
		s, advance := newStore(t, approvedWindow(time.Second), func(o *Options) { o.ResultTTL = short })
		c := park(t, s, sampleCall(), short)
		advance(short - 100*time.Millisecond)
		decide(t, s, c.ID, Approved)
		advance(beyond + short) // past the ttl and its retention, within the window
		if got, err := s.Claim(t.Context(), c.ID, long); err != nil || got.State != Executing {
			t.Errorf("Claim past the ttl's retention, within the window = %s, %v; want executing", got.State, err)
		}
	})
	t.Run("default", func(t *testing.T) {
		s, _ := newStore(t)
		c := park(t, s, sampleCall(), short)
		got, err := s.Decide(t.Context(), c.ID, Decision{To: Approved, By: "alice", Comment: ""})
		if err != nil {
			t.Fatal(err)
		}
		if d := got.ExpiresAt.Sub(got.DecidedAt); d != DefaultApprovedWindow {
			t.Errorf("ExpiresAt = DecidedAt + %v, want the default window %v", d, DefaultApprovedWindow)
		}
	})
	t.Run("far from the expiry", func(t *testing.T) {
		s, _ := newStore(t, approvedWindow(time.Second))
		c := park(t, s, sampleCall(), long)
		got, err := s.Decide(t.Context(), c.ID, Decision{To: Approved, By: "alice", Comment: ""})
		if err != nil || !got.ExpiresAt.Equal(c.ExpiresAt) {
			t.Errorf("Decide = ExpiresAt %v, %v; want the ttl's %v unchanged", got.ExpiresAt, err, c.ExpiresAt)
		}
	})
	t.Run("rejected", func(t *testing.T) {
		s, _ := newStore(t, approvedWindow(time.Minute))
		c := park(t, s, sampleCall(), short)
		got, err := s.Decide(t.Context(), c.ID, Decision{To: Rejected, By: "alice", Comment: ""})
		if err != nil || !got.ExpiresAt.Equal(c.ExpiresAt) {
			t.Errorf("Decide(rejected) = ExpiresAt %v, %v; want %v unchanged", got.ExpiresAt, err, c.ExpiresAt)
		}
	})
}

// testCapsRace checks that the caps are exact under concurrency: 50
// goroutines park new calls for one principal with a cap of 10, then 60
// for six principals with a total cap of 30. Part of testStoreRace.
func testCapsRace(t *testing.T, newStore newStoreFunc) {
	// parkAll parks n new calls at once, the i-th for principal(i), and
	// returns how many were parked for each principal.
	parkAll := func(t *testing.T, s Store, n int, principal func(i int) string) map[string]int {
		t.Helper()
		var (
			mu     sync.Mutex
			parked = map[string]int{}
			wg     sync.WaitGroup
		)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				c := asPrincipal(sampleCall(), principal(i))
				_, attached, err := s.Park(t.Context(), c, long)
				switch {
				case errors.Is(err, ErrTooMany):
				case err != nil || attached:
					t.Errorf("Park = attached %v, %v", attached, err)
				default:
					mu.Lock()
					parked[c.Principal]++
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		return parked
	}
	t.Run("per principal", func(t *testing.T) {
		s, _ := newStore(t, caps(0, 10))
		got := parkAll(t, s, 50, func(int) string { return "key:alice" })
		if got["key:alice"] != 10 {
			t.Errorf("50 parks at once with a cap of 10: %d parked, want 10", got["key:alice"])
		}
		if n, err := s.Count(t.Context(), Waiting); err != nil || n != 10 {
			t.Errorf("Count(waiting) = %d, %v; want 10", n, err)
		}
	})
	t.Run("all", func(t *testing.T) {
		s, _ := newStore(t, caps(30, 10))
		got := parkAll(t, s, 60, func(i int) string { return fmt.Sprintf("key:agent-%d", i%6) })
		total := 0
		for p, n := range got {
			total += n
			if n > 10 {
				t.Errorf("%s: %d parked, over its cap of 10", p, n)
			}
		}
		if total != 30 {
			t.Errorf("60 parks at once with a total cap of 30: %d parked (%v), want 30", total, got)
		}
	})
}

// testEndedCapped checks that a principal's ended calls are kept for
// ResultTTL but no more of them than Options.MaxParkedPerPrincipal once it
// parks again, the oldest forgotten first, and that calls still waiting are
// not forgotten for them: an agent that parks and cancels in a loop, with
// no human involved, holds a bounded number of calls. Part of testStore.
func testEndedCapped(t *testing.T, newStore newStoreFunc) {
	const alice, bob = "key:alice", "key:bob"
	s, _ := newStore(t, caps(0, 3))
	ctx := t.Context()
	waiting := park(t, s, asPrincipal(sampleCall(), alice), long)
	theirs := park(t, s, asPrincipal(sampleCall(), bob), long)
	if _, err := s.Cancel(ctx, theirs.ID); err != nil {
		t.Fatal(err)
	}
	ended := parkAndCancel(t, s, alice, 10)
	park(t, s, asPrincipal(sampleCall(), alice), long)
	for i, id := range ended {
		c, err := s.Get(ctx, id)
		if i < len(ended)-3 {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("ended call %d of %d: %s, %v; want it forgotten (only the last 3, the cap, are kept)", i+1, len(ended), c.State, err)
			}
			continue
		}
		if err != nil || c.State != Cancelled {
			t.Errorf("ended call %d of %d: %s, %v; want it kept, cancelled", i+1, len(ended), c.State, err)
		}
	}
	if got := get(t, s, waiting.ID); got.State != Waiting {
		t.Errorf("the waiting call is %s", got.State)
	}
	if got := get(t, s, theirs.ID); got.State != Cancelled {
		t.Errorf("another principal's ended call is %s", got.State)
	}
}

// parkAndCancel parks n calls of principal, cancelling each, and returns
// their IDs in that order.
func parkAndCancel(t *testing.T, s Store, principal string, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		c := park(t, s, asPrincipal(sampleCall(), principal), long)
		if _, err := s.Cancel(t.Context(), c.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	return ids
}
