package notify

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// settled records OnSettled calls by call ID.
type settled struct {
	mu    sync.Mutex
	calls map[string][]bool
}

func (s *settled) record(e Event, delivered bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = make(map[string][]bool)
	}
	s.calls[e.CallID] = append(s.calls[e.CallID], delivered)
}

func (s *settled) get() map[string][]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

func TestSettledDelivered(t *testing.T) {
	a, b := testkit.NewUpstream(t, nil), testkit.NewUpstream(t, statuses(503, 503))
	var res results
	var set settled
	opts := fast(&res, Target{URL: a.URL}, Target{URL: b.URL, Format: FormatSlack})
	opts.OnSettled = set.record
	n := start(t, opts)
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "both deliveries", func() bool { return res.final(2) })
	testkit.WaitFor(t, "settlement", func() bool { return len(set.get()) == 1 })
	if got := set.get()["c1"]; !slices.Equal(got, []bool{true}) {
		t.Fatalf("OnSettled for c1 = %v, want once, delivered", got)
	}
}

func TestSettledFailed(t *testing.T) {
	a := testkit.NewUpstream(t, nil)
	b := testkit.NewUpstream(t, statuses(500, 500, 500, 500))
	var res results
	var set settled
	opts := fast(&res, Target{URL: a.URL}, Target{URL: b.URL})
	opts.MaxAttempts = 3
	opts.OnSettled = set.record
	n := start(t, opts)
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "both targets finished", func() bool { return res.final(2) })
	testkit.WaitFor(t, "settlement", func() bool { return len(set.get()) == 1 })
	if got := set.get()["c1"]; !slices.Equal(got, []bool{false}) {
		t.Fatalf("OnSettled for c1 = %v, want once, not delivered", got)
	}
	if got := len(b.Requests()); got != 3 {
		t.Errorf("failing target got %d attempts, want 3", got)
	}
}

// An event one target dropped does not settle, even though the other
// target delivered it; the events that target did attempt do.
func TestSettledNotWhenDropped(t *testing.T) {
	release, open := releaser(t)
	slow := testkit.NewUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	quick := testkit.NewUpstream(t, nil)
	var res results
	var set settled
	opts := fast(&res, Target{URL: slow.URL}, Target{URL: quick.URL})
	opts.QueueSize, opts.Lanes = 1, 1
	opts.OnSettled = set.record
	n := start(t, opts)

	// The quick target delivers each event before the next comes: its own
	// one-place queue must not be what drops one.
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "c1 in flight at the slow target", func() bool { return len(slow.Requests()) == 1 })
	testkit.WaitFor(t, "c1 delivered by the quick target", func() bool { return res.count(ResultDelivered) == 1 })
	n.Notify(requested("c2")) // queued behind c1
	testkit.WaitFor(t, "c2 delivered by the quick target", func() bool { return res.count(ResultDelivered) == 2 })
	n.Notify(requested("c3")) // the slow target's queue is full: dropped there
	if got := res.count(ResultDropped); got != 1 {
		t.Fatalf("dropped = %d, want 1", got)
	}
	if !n.InFlight(Event{Type: TypeRequested, CallID: "c1"}) || !n.InFlight(Event{Type: TypeRequested, CallID: "c2"}) {
		t.Error("InFlight(c1, c2) = false while the slow target holds them")
	}
	if n.InFlight(Event{Type: TypeResolved, CallID: "c1"}) || n.InFlight(Event{Type: TypeRequested, CallID: "c9"}) {
		t.Error("InFlight is true for events never sent")
	}
	open()
	testkit.WaitFor(t, "every target finished", func() bool { return res.final(6) })
	testkit.WaitFor(t, "nothing in flight", func() bool {
		return !n.InFlight(Event{Type: TypeRequested, CallID: "c1"}) && !n.InFlight(Event{Type: TypeRequested, CallID: "c2"}) && !n.InFlight(Event{Type: TypeRequested, CallID: "c3"})
	})
	testkit.WaitFor(t, "c1 and c2 settled", func() bool { return len(set.get()) >= 2 })
	got := set.get()
	if !slices.Equal(got["c1"], []bool{true}) || !slices.Equal(got["c2"], []bool{true}) {
		t.Errorf("OnSettled = %v, want c1 and c2 once each, delivered", got)
	}
	if _, ok := got["c3"]; ok || len(got) != 2 {
		t.Errorf("OnSettled = %v: the dropped c3 settled", got)
	}
}

func TestSettledNoTargets(t *testing.T) {
	var set settled
	n := start(t, Options{OnSettled: set.record})
	n.Notify(requested("c1"))
	n.Notify(Event{Type: "bogus", CallID: "c2"}) // dropped: never settles
	if got := set.get(); len(got) != 1 || !slices.Equal(got["c1"], []bool{true}) {
		t.Errorf("OnSettled = %v, want c1 once, delivered", got)
	}
}

// TestRoomAndPending: Room is the free places in the fullest queue and
// Pending the events some target has not finished with, so that a caller
// with a backlog sends only what will be queued.
func TestRoomAndPending(t *testing.T) {
	fastT, slowT := testkit.NewUpstream(t, nil), hangingReceiver(t)
	var res results
	opts := fast(&res, Target{URL: fastT.URL}, Target{URL: slowT.URL})
	opts.QueueSize, opts.Lanes = 3, 1
	n := start(t, opts)
	if got := n.Room(); got != 3 {
		t.Fatalf("Room() = %d with empty queues, want 3", got)
	}
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "c1 in delivery at the hanging target", func() bool { return len(slowT.Requests()) == 1 })
	n.Notify(requested("c2"))
	n.Notify(requested("c3"))
	// The hanging target's queue holds c2 and c3; the other's has drained.
	testkit.WaitFor(t, "the fast target's deliveries", func() bool { return len(fastT.Requests()) == 3 })
	if got := n.Room(); got != 1 {
		t.Errorf("Room() = %d, want 1 (the hanging target's queue holds 2 of 3)", got)
	}
	if got := n.Pending(); got != 3 {
		t.Errorf("Pending() = %d, want 3", got)
	}
}

// TestRoomForLanes: with lanes, Room counts the free places of the fullest
// target over all its lanes, and RoomFor says whether a call's own lane
// has one: a full lane does not stop calls that take another.
func TestRoomForLanes(t *testing.T) {
	slowT := hangingReceiver(t)
	var res results
	opts := fast(&res, Target{URL: slowT.URL})
	opts.QueueSize, opts.Lanes = 4, 2 // two lanes of 2
	n := start(t, opts)
	w := n.workers[0]
	// Three calls of one lane and one of the other.
	var same []string
	other := ""
	for i := 0; len(same) < 3 || other == ""; i++ {
		id := fmt.Sprint("c", i)
		switch {
		case w.lane(id) == w.lanes[0] && len(same) < 3:
			same = append(same, id)
		case w.lane(id) == w.lanes[1] && other == "":
			other = id
		}
	}
	n.Notify(requested(same[0]))
	testkit.WaitFor(t, "the first call in delivery", func() bool { return len(slowT.Requests()) == 1 })
	n.Notify(requested(same[1]))
	n.Notify(requested(same[2])) // its lane now holds two: full
	if n.RoomFor(same[0]) || !n.RoomFor(other) {
		t.Errorf("RoomFor = %v for a call of the full lane, %v for one of the empty lane; want false, true", n.RoomFor(same[0]), n.RoomFor(other))
	}
	if got := n.Room(); got != 2 {
		t.Errorf("Room() = %d, want 2 (the other lane's places)", got)
	}
}

// An event whose delivery Close abandons does not settle: it did not get
// its attempts, and a caller that records settled events sends it again
// (from another replica).
func TestSettledNotWhenAbandoned(t *testing.T) {
	slow := testkit.NewUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	var res results
	var set settled
	opts := fast(&res, Target{URL: slow.URL})
	opts.OnSettled = set.record
	n := start(t, opts)
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "c1 in flight", func() bool { return len(slow.Requests()) == 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := n.Close(ctx); err == nil {
		t.Fatal("Close returned nil with a delivery in flight past its context")
	}
	if got := res.count(ResultFailed); got != 1 {
		t.Errorf("failed = %d, want the abandoned delivery counted", got)
	}
	if got := set.get(); len(got) != 0 {
		t.Errorf("OnSettled = %v, want nothing: the abandoned event did not settle", got)
	}
	if n.InFlight(requested("c1")) {
		t.Error("the abandoned event is still in flight after Close")
	}
}

// An event is still in flight while OnSettled runs: a caller that records
// settled events and announces again what is neither in flight nor
// recorded never sees the event as neither.
func TestSettledWhileInFlight(t *testing.T) {
	var n *Notifier
	var mu sync.Mutex
	var seen []bool
	opts := fast(&results{}, Target{URL: testkit.NewUpstream(t, nil).URL})
	opts.OnSettled = func(e Event, _ bool) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, n.InFlight(e))
	}
	n = start(t, opts)
	n.Notify(requested("c1"))
	testkit.WaitFor(t, "settlement", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1 })
	mu.Lock()
	defer mu.Unlock()
	if !seen[0] {
		t.Error("the event was out of flight before OnSettled recorded it")
	}
	if n.InFlight(requested("c1")) {
		t.Error("the event is still in flight after OnSettled")
	}
}
