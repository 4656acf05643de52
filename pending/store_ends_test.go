package pending

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"
)

// testEnds checks Resolved and Unresolved, the contract of the "resolved"
// notifications that may have been lost: every end is recorded with its
// transition, and only ends are.
func testEnds(t *testing.T, newStore newStoreFunc) {
	t.Run("Recorded", func(t *testing.T) {
		s, advance := newStore(t, approvedWindow(time.Millisecond))
		ctx := t.Context()
		waiting := park(t, s, sampleCall(), long)
		approvedCall := park(t, s, sampleCall(), long)
		decide(t, s, approvedCall.ID, Approved)
		rejected := park(t, s, sampleCall(), long)
		decide(t, s, rejected.ID, Rejected)
		cancelled := park(t, s, sampleCall(), long)
		if _, err := s.Cancel(ctx, cancelled.ID); err != nil {
			t.Fatal(err)
		}
		// An executor's own outcome is not an end: its decision was.
		ran := claimed(t, s, long)
		if _, err := s.Finish(ctx, ran.ID, ran.Fence, Executed, Result{Status: 200}); err != nil {
			t.Fatal(err)
		}
		timedOut := claimed(t, s, long)
		if _, err := s.Finish(ctx, timedOut.ID, timedOut.Fence, Unknown, Result{Status: 504}); err != nil {
			t.Fatal(err)
		}
		if got := unresolved(t, s, short, 100); len(got) != 0 {
			t.Errorf("Unresolved(%v) right after the ends = %v, want none yet", short, got)
		}
		want := []string{
			"approved:" + approvedCall.ID, "rejected:" + rejected.ID, "cancelled:" + cancelled.ID,
			"approved:" + ran.ID, "approved:" + timedOut.ID,
		}
		if got := unresolved(t, s, 0, 100); !sameSet(got, want) {
			t.Errorf("Unresolved(0) = %v, want %v (and nothing for %s, still waiting)", got, want, waiting.ID)
		}

		// Ends nobody decided: a call expired waiting, one approved and
		// expired before it ran, one whose executor was lost (its lease
		// ran out), one whose executor finished too late.
		expiring := park(t, s, sampleCall(), short)
		approvedExpiring := park(t, s, sampleCall(), short)
		decide(t, s, approvedExpiring.ID, Approved)
		lost := claimed(t, s, short)
		late := claimed(t, s, short)
		advance(beyond)
		if _, err := s.Expire(ctx, 1); err != nil { // one by the sweeper, the late one by its Finish
			t.Fatal(err)
		}
		if _, err := s.Finish(ctx, late.ID, late.Fence, Executed, Result{Status: 200}); !errors.Is(err, ErrLapsed) {
			t.Fatalf("Finish after the lease = %v, want ErrLapsed", err)
		}
		if _, err := s.Expire(ctx, 10); err != nil {
			t.Fatal(err)
		}
		later := []string{
			"expired:" + expiring.ID, "approved:" + approvedExpiring.ID, "expired:" + approvedExpiring.ID,
			"approved:" + lost.ID, "unknown:" + lost.ID, "approved:" + late.ID, "unknown:" + late.ID,
		}
		got := unresolved(t, s, 0, 100)
		if !sameSet(got, append(slices.Clone(want), later...)) {
			t.Errorf("Unresolved(0) = %v, want %v and %v", got, want, later)
		}
		// Oldest first: the ends before the pause (the approvals among
		// them) come before those after.
		before := append(slices.Clone(want), "approved:"+approvedExpiring.ID, "approved:"+lost.ID, "approved:"+late.ID)
		if len(got) == len(want)+len(later) && !sameSet(got[:len(before)], before) {
			t.Errorf("Unresolved(0) = %v: want %v first, the oldest", got, before)
		}
		if got := unresolved(t, s, short, 100); !sameSet(got, before) {
			t.Errorf("Unresolved(%v) = %v, want only the ends older than that: %v", short, got, before)
		}
		if got := unresolved(t, s, 0, 2); len(got) != 2 {
			t.Errorf("Unresolved(0, limit 2) = %v, want 2", got)
		}
		if got, err := s.Unresolved(ctx, 0, 0, 0); err != nil || len(got) != 0 {
			t.Errorf("Unresolved(limit 0) = %v, %v", got, err)
		}
	})

	t.Run("BoundedInBytes", func(t *testing.T) {
		s, _ := newStore(t)
		for i := range 4 {
			decide(t, s, park(t, s, largeCall(i), long).ID, Rejected)
		}
		checkBounded(t, "Unresolved", func(maxBytes int64) []string {
			got, err := s.Unresolved(t.Context(), 0, 10, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			out := []string{}
			for _, o := range got {
				out = append(out, o.ID)
			}
			return out
		})
	})

	t.Run("CallAsItStands", func(t *testing.T) {
		s, _ := newStore(t)
		ran := claimed(t, s, long)
		if _, err := s.Finish(t.Context(), ran.ID, ran.Fence, Executed, Result{Status: 201, Body: []byte("done")}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Unresolved(t.Context(), 0, 10, 0)
		if err != nil || len(got) != 1 {
			t.Fatalf("Unresolved = %v, %v; want the approval", got, err)
		}
		o := got[0]
		if o.ID != ran.ID || o.State != Approved || o.Call.ID != ran.ID || o.Call.State != Executed ||
			o.Call.DecidedBy != "alice" || string(o.Call.Info) != string(ran.Info) {
			t.Errorf("Unresolved = %+v, want the approval of %s with the call as it stands (executed, decided by alice)", o, ran.ID)
		}
	})

	t.Run("Resolved", func(t *testing.T) {
		s, advance := newStore(t, approvedWindow(time.Millisecond))
		ctx := t.Context()
		a := park(t, s, sampleCall(), short)
		decide(t, s, a.ID, Approved)
		b := park(t, s, asPrincipal(sampleCall(), "key:another-agent"), long) // on another shard, where there are several
		decide(t, s, b.ID, Rejected)
		advance(beyond)
		if _, err := s.Expire(ctx, 10); err != nil { // a: approved, then expired
			t.Fatal(err)
		}
		for range 2 { // idempotent
			if err := s.Resolved(ctx, []End{{ID: a.ID, State: Approved}, {ID: b.ID, State: Rejected}, {ID: "no-such-call", State: Expired}}); err != nil {
				t.Fatalf("Resolved = %v", err)
			}
			if got := unresolved(t, s, 0, 10); !slices.Equal(got, []string{"expired:" + a.ID}) {
				t.Errorf("Unresolved(0) after Resolved = %v, want [expired:%s]: each end is settled on its own", got, a.ID)
			}
		}
		if err := s.Resolved(ctx, nil); err != nil {
			t.Errorf("Resolved(none) = %v", err)
		}
		if err := s.Resolved(ctx, []End{{ID: a.ID, State: Expired}}); err != nil {
			t.Fatal(err)
		}
		if got := unresolved(t, s, 0, 10); len(got) != 0 {
			t.Errorf("Unresolved(0) = %v, want none", got)
		}
		if rs, ok := s.(*RedisStore); ok {
			for _, b := range rs.bases {
				if n := rs.rdb.ZCard(ctx, b+"unresolved").Val(); n != 0 {
					t.Errorf("shard %s keeps %d unresolved entries", b, n)
				}
			}
		}
	})

	t.Run("KeptAnHour", func(t *testing.T) { testEndsKept(t, newStore) })

	t.Run("BoundedByEndedCap", func(t *testing.T) {
		// An agent that parks and cancels in a loop owes no more ends
		// than the store keeps ended calls of it: a forgotten call's
		// ends go with it, whether or not anyone settles them.
		s, _ := newStore(t, caps(0, 3))
		parkAndCancel(t, s, "key:alice", 10)
		park(t, s, asPrincipal(sampleCall(), "key:alice"), long)
		if rs, ok := s.(*RedisStore); ok { // before Unresolved, which drops what it finds gone
			var n int64
			for _, b := range rs.bases {
				n += rs.rdb.ZCard(t.Context(), b+"unresolved").Val()
			}
			if n != 3 {
				t.Errorf("the unresolved indexes hold %d entries, want 3", n)
			}
		}
		if ms, ok := s.(*MemoryStore); ok && len(ms.owing) != 3 {
			t.Errorf("the memory store owes ends of %d calls, want 3", len(ms.owing))
		}
		if got := unresolved(t, s, 0, 100); len(got) != 3 {
			t.Errorf("Unresolved(0) = %v, want the 3 ends of the ended calls kept", got)
		}
	})

	t.Run("KeptResultTTL", func(t *testing.T) {
		// An end is owed for ResultTTL at most, even while its call
		// lives on (approved, with a long expiry).
		s, advance := newStore(t)
		endsBounded(t, s, advance, Approved, contractResultTTL, true)
	})
}

// testEndsKept: with a ResultTTL longer than EndsKept, an end is owed for
// EndsKept only (memory: past it; Redis: its index's TTL; an hour is too
// long to wait for).
func testEndsKept(t *testing.T, newStore newStoreFunc) {
	s, advance := newStore(t, func(o *Options) { o.ResultTTL = 3 * EndsKept })
	_, isRedis := s.(*RedisStore)
	endsBounded(t, s, advance, Rejected, EndsKept, !isRedis)
}

// endsBounded decides a call parked for long (to) and checks that its end
// is owed for bound at most while the call lives on: on Redis the index's
// TTL, and, when wait, past bound Unresolved lists it no more.
func endsBounded(t *testing.T, s Store, advance func(time.Duration), to State, bound time.Duration, wait bool) {
	t.Helper()
	c := park(t, s, sampleCall(), long)
	decide(t, s, c.ID, to)
	if rs, ok := s.(*RedisStore); ok {
		d := rs.rdb.PTTL(t.Context(), rs.baseOf(c.ID)+"unresolved").Val()
		if d <= 0 || d > bound {
			t.Errorf("PTTL of the unresolved index = %v, want at most %v", d, bound)
		}
	}
	if !wait {
		return
	}
	advance(bound + beyond)
	if got := unresolved(t, s, 0, 10); len(got) != 0 {
		t.Errorf("Unresolved(0) past %v = %v, want none", bound, got)
	}
	if ms, ok := s.(*MemoryStore); ok && ms.owing[c.ID] != nil {
		t.Errorf("the memory store still owes %v of %s past %v", ms.owing[c.ID].owed, c.ID, bound)
	}
	if got := get(t, s, c.ID); got.State != to {
		t.Fatalf("the call is %s, want still kept (%s)", got.State, to)
	}
}

func TestEndsKeptMS(t *testing.T) {
	if want := strconv.FormatInt(EndsKept.Milliseconds(), 10); endsKeptMS != want {
		t.Errorf("endsKeptMS = %s, want %s (EndsKept)", endsKeptMS, want)
	}
}

// unresolved lists the store's owed ends as "state:id".
func unresolved(t *testing.T, s Store, olderThan time.Duration, limit int) []string {
	t.Helper()
	got, err := s.Unresolved(t.Context(), olderThan, limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, o := range got {
		if o.Call.ID != o.ID {
			t.Errorf("Unresolved: end of %s with call %s", o.ID, o.Call.ID)
		}
		out = append(out, string(o.State)+":"+o.ID)
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
