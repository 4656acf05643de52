package pending

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/testkit"
)

// newMemoryStore returns a MemoryStore on a clock that only moves when the
// test says so.
func newMemoryStore(t *testing.T, with ...func(*Options)) (Store, func(time.Duration)) {
	t.Helper()
	clock := testkit.NewClock(time.Now())
	opts := contractOptions(with)
	opts.Now = clock.Now
	return NewMemory(opts), clock.Advance
}

func TestMemoryStore(t *testing.T)     { testStore(t, newMemoryStore) }
func TestMemoryStoreRace(t *testing.T) { testStoreRace(t, newMemoryStore) }

// TestMemoryEndedBounded: ended calls are kept for ResultTTL, but no more
// of them than the parked caps allow, per principal and in all, the oldest
// ended forgotten first; live calls are never forgotten for them, and an
// agent that parks and cancels in a loop holds a bounded number of calls
// and queue entries.
func TestMemoryEndedBounded(t *testing.T) {
	const perPrincipal, all = 20, 50 // ended kept: 20 per principal, 50 in all
	ctx := t.Context()
	st, advance := newMemoryStore(t, caps(all, perPrincipal))
	s := st.(*MemoryStore)
	cycle := func(principal string, n int) []string { return parkAndCancel(t, s, principal, n) }
	kept := func(ids []string) (n int) {
		t.Helper()
		for i, id := range ids {
			c, err := s.Get(ctx, id)
			switch {
			case err == nil && c.State == Cancelled:
				n++
			case errors.Is(err, ErrNotFound):
				if n > 0 {
					t.Fatalf("call %d of %d forgotten after a later one was kept: the oldest go first", i, len(ids))
				}
			default:
				t.Fatalf("Get(%s) = %s, %v", id, c.State, err)
			}
		}
		return n
	}
	live := park(t, s, asPrincipal(sampleCall(), "key:a"), long) // waiting throughout

	a := cycle("key:a", 25)
	if n := kept(a); n != 20 {
		t.Fatalf("after 25 cancelled calls of one principal, %d kept; want 20", n)
	}
	b := cycle("key:b", 20)
	if na, nb := kept(a), kept(b); na != 20 || nb != 20 {
		t.Fatalf("kept %d of a's and %d of b's; want 20 and 20 (40 of 50 in all)", na, nb)
	}
	c := cycle("key:c", 15)
	if na, nb, nc := kept(a), kept(b), kept(c); na != 15 || nb != 20 || nc != 15 {
		t.Fatalf("kept %d, %d, %d; want 15, 20, 15: past 50 in all, the oldest ended (a's) go", na, nb, nc)
	}
	if got := get(t, s, live.ID); got.State != Waiting {
		t.Fatalf("the waiting call is %s", got.State)
	}

	// A long loop of one principal: the store and its queues stay bounded.
	cycle("key:d", 10_000)
	s.mu.Lock()
	calls, queued, byD := len(s.calls), len(s.endedAll.q)-s.endedAll.head, s.endedBy["key:d"]
	s.mu.Unlock()
	if calls > 51 || queued > 2*50+64 || byD == nil || byD.n != 20 || len(byD.q)-byD.head > 2*20+64 {
		t.Fatalf("after 10,000 cycles: %d calls kept, %d queued in all, principal's queue %+v; want at most 51, 164, 20 kept", calls, queued, byD)
	}

	// Retention forgets the rest; the counts go back to nothing.
	advance(long + DefaultResultTTL + time.Hour)
	if _, err := s.Expire(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	cycle("key:e", 1) // an end drops the queues' forgotten fronts
	advance(DefaultResultTTL + time.Hour)
	for _, id := range append(a, live.ID) {
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s) after retention = %v", id, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetDue(s.now())
	if s.endedAll.n != 0 || len(s.endedBy) != 0 || len(s.calls) != 0 {
		t.Fatalf("after retention: %d counted, principals %v, %d calls; want none", s.endedAll.n, s.endedBy, len(s.calls))
	}
}

// TestCloneHeader: a copied header shares nothing with the original, and
// no list of values reaches into another's, even when appended to.
func TestCloneHeader(t *testing.T) {
	h := map[string][]string{"A": {"1", "2"}, "B": {"3"}, "C": {}, "D": nil}
	c := cloneHeader(h)
	want := map[string][]string{"A": {"1", "2"}, "B": {"3"}, "C": {}, "D": nil}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Fatalf("cloneHeader (-want +got):\n%s", diff)
	}
	c["A"] = append(c["A"], "x")
	c["B"][0] = "y"
	if !slices.Equal(c["B"], []string{"y"}) || !slices.Equal(h["A"], []string{"1", "2"}) || !slices.Equal(h["B"], []string{"3"}) {
		t.Fatalf("after writes to the copy: copy %v, original %v", c, h)
	}
	if cloneHeader(nil) != nil {
		t.Fatal("cloneHeader(nil) is not nil")
	}
}

// big3K is a sample call of principal whose request is 3 KiB.
func big3K(principal string) Call {
	c := asPrincipal(sampleCall(), principal)
	c.Request = make([]byte, 3<<10)
	return c
}

// TestMemoryBytesPerPrincipal: the bytes one principal's waiting calls
// hold in memory are capped, whatever their count; a call that ends gives
// its request's bytes back, and another principal is not held to the cap.
func TestMemoryBytesPerPrincipal(t *testing.T) {
	st, _ := newMemoryStore(t, func(o *Options) { o.MaxBytesPerPrincipal = 10 << 10 })
	s := st.(*MemoryStore)
	ctx := t.Context()
	var first Call
	for i := range 3 { // 9 KiB and some
		c := park(t, s, big3K("key:a"), long)
		if i == 0 {
			first = c
		}
	}
	if _, _, err := s.Park(ctx, big3K("key:a"), long); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a fourth 3 KiB call past a 10 KiB cap: %v, want ErrTooMany", err)
	}
	park(t, s, big3K("key:b"), long) // another principal
	if _, err := s.Cancel(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	park(t, s, big3K("key:a"), long) // room again
}

// TestMemoryEndedBytesPerPrincipal: the ended calls one principal keeps
// hold no more than MaxBytesPerPrincipal either; the oldest ended are
// forgotten first.
func TestMemoryEndedBytesPerPrincipal(t *testing.T) {
	st, _ := newMemoryStore(t, func(o *Options) { o.MaxBytesPerPrincipal = 10 << 10 })
	s := st.(*MemoryStore)
	ctx := t.Context()
	var ids []string
	for range 6 {
		c := asPrincipal(sampleCall(), "key:a")
		c.Info = []byte(`{"args":"` + strings.Repeat("x", 3<<10) + `"}`)
		c = park(t, s, c, long)
		if _, err := s.Cancel(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	for i, id := range ids {
		_, err := s.Get(ctx, id)
		if kept := err == nil; kept != (i >= 3) {
			t.Errorf("ended call %d of 6 (3 KiB each, a 10 KiB cap): kept %v (%v), want the last 3 kept", i+1, kept, err)
		}
	}
}

// TestMemoryBytesInAll: MaxBytes bounds the waiting calls of all
// principals together, each under its own cap, and the ended ones as
// much; a call that moves between waiting and approved counts once.
func TestMemoryBytesInAll(t *testing.T) {
	st, _ := newMemoryStore(t, func(o *Options) { o.MaxBytesPerPrincipal, o.MaxBytes = 10<<10, 16<<10 })
	s := st.(*MemoryStore)
	ctx := t.Context()
	var parked []Call
	for _, p := range []string{"key:a", "key:b", "key:c", "key:d", "key:e"} { // 15 KiB and some
		parked = append(parked, park(t, s, big3K(p), long))
	}
	decide(t, s, parked[0].ID, Approved) // still parked: counted once
	if _, _, err := s.Park(ctx, big3K("key:f"), long); !errors.Is(err, ErrTooMany) {
		t.Fatalf("a sixth principal's 3 KiB call past 16 KiB in all: %v, want ErrTooMany", err)
	}
	if _, err := s.Cancel(ctx, parked[1].ID); err != nil {
		t.Fatal(err)
	}
	park(t, s, big3K("key:f"), long) // room again
	for _, c := range parked[2:] {
		if _, err := s.Cancel(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if want := heldBytes(parked[0]) + heldBytes(big3K("key:f")); s.parkedBytes != want {
		t.Errorf("parked bytes %d, want %d: what the two calls still waiting hold", s.parkedBytes, want)
	}
	if s.endedAll.bytes > 16<<10 {
		t.Errorf("ended calls hold %d bytes, past the cap", s.endedAll.bytes)
	}
}
