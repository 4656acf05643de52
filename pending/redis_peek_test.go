package pending

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestRedisPeek: a call this replica parked is peeked without a round
// trip while nothing can have moved it unheard, and read from Redis once
// something may have: a transition of its own, one it heard from another
// replica, a subscription made again. A call parked elsewhere is read.
func TestRedisPeek(t *testing.T) {
	a, b, _, reads := readsCounted(t)
	listen(t, a)

	peek := func(name string, s *RedisStore, id string, want State, wantGets int64) {
		t.Helper()
		before := reads.gets.Load()
		c, err := s.Peek(t.Context(), id)
		if err != nil || c.ID != id || c.State != want {
			t.Fatalf("%s: Peek = %s %s, %v; want %s", name, c.ID, c.State, err, want)
		}
		if got := reads.gets.Load() - before; got != wantGets {
			t.Errorf("%s: Peek read the call %d times, want %d", name, got, wantGets)
		}
	}

	c := park(t, a, sampleCall(), long)
	peek("parked here", a, c.ID, Waiting, 0)
	got, _ := a.Peek(t.Context(), c.ID)
	stored, _ := a.Get(t.Context(), c.ID)
	if got.Request != nil || !bytes.Equal(got.Info, stored.Info) || !bytes.Equal(got.Brief, stored.Brief) ||
		got.Subject != stored.Subject || got.Principal != stored.Principal || !got.ExpiresAt.Equal(stored.ExpiresAt) {
		t.Errorf("Peek = %+v, want Get's call without its request: %+v", got, stored)
	}
	decide(t, a, c.ID, Approved)
	peek("decided here", a, c.ID, Approved, 1)

	// A transition on another replica, once heard.
	d := park(t, a, sampleCall(), long)
	peek("parked here again", a, d.ID, Waiting, 0)
	if _, err := b.Cancel(t.Context(), d.ID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the cancel to be heard", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		_, kept := a.peeks.calls[d.ID]
		return !kept
	})
	peek("cancelled elsewhere", a, d.ID, Cancelled, 1)

	// The subscription made again: nothing kept is vouched for.
	e := park(t, a, sampleCall(), long)
	a.subscribed()
	peek("resubscribed", a, e.ID, Waiting, 1)

	// Parked on another replica: read, there and here alike.
	f := park(t, b, sampleCall(), long)
	peek("parked elsewhere", a, f.ID, Waiting, 1)
	if _, err := a.Peek(t.Context(), "nosuchcall"); err == nil {
		t.Error("Peek of an unknown call: no error")
	}
}

// TestRedisPeekOwnMoves: a call this replica moves is read by the next
// Peek even before the move's message is heard. The store here listens on
// a channel nobody publishes to, so it hears no message at all.
func TestRedisPeekOwnMoves(t *testing.T) {
	rdb := newRedisClient(t)
	reads := &stateReads{}
	rdb.AddHook(reads)
	s := newRedisStoreOn(t, rdb, Options{PollInterval: long})
	s.channel += "-deaf" // the scripts still publish on the store's own
	listen(t, s)

	steps := []struct {
		name string
		move func(id string) error
		want State
	}{
		{"decided", func(id string) error {
			_, err := s.Decide(t.Context(), id, Decision{To: Approved, By: "alice"})
			return err
		}, Approved},
		{"cancelled", func(id string) error { _, err := s.Cancel(t.Context(), id); return err }, Cancelled},
	}
	for _, st := range steps {
		c := park(t, s, sampleCall(), long)
		before := reads.gets.Load()
		if got, err := s.Peek(t.Context(), c.ID); err != nil || got.State != Waiting || reads.gets.Load() != before {
			t.Fatalf("%s: Peek before = %s, %v, %d reads; want waiting, kept", st.name, got.State, err, reads.gets.Load()-before)
		}
		if err := st.move(c.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Peek(t.Context(), c.ID); err != nil || got.State != st.want {
			t.Errorf("%s: Peek after = %s, %v; want %s", st.name, got.State, err, st.want)
		}
	}
}

// TestRedisPeekBounded: what Peek keeps stays within its bounds, however
// many calls are parked and never moved, and the queue of kept IDs does
// not grow with calls that moved.
func TestRedisPeekBounded(t *testing.T) {
	s := newRedisStoreOn(t, newRedisClient(t), Options{PollInterval: long, MaxParked: 10000, MaxParkedPerPrincipal: 10000})
	listen(t, s)

	var last string
	for range peekCalls + 100 {
		last = park(t, s, sampleCall(), long).ID
	}
	s.mu.Lock()
	n, q := len(s.peeks.calls), len(s.peeks.fifo)
	_, kept := s.peeks.calls[last]
	s.mu.Unlock()
	if n != peekCalls || q != peekCalls || !kept {
		t.Errorf("after %d parks: %d kept, %d queued, newest kept %v; want %d, %d, true", peekCalls+100, n, q, kept, peekCalls, peekCalls)
	}
	// Calls decided soon after their park, as most are, leave the queue
	// in its compactions: on a store with few calls kept, it stays short.
	s = newRedisStoreOn(t, newRedisClient(t), Options{PollInterval: long})
	listen(t, s)
	for range 1000 {
		c := park(t, s, sampleCall(), long)
		decide(t, s, c.ID, Rejected)
	}
	s.mu.Lock()
	n, q = len(s.peeks.calls), len(s.peeks.fifo)
	s.mu.Unlock()
	if n != 0 || q > 64 {
		t.Errorf("after 1000 parks each decided: %d kept, %d queued; want 0 and at most 64", n, q)
	}
}

// TestRedisPeekKeeps: what keepPeek declines to keep. A call whose
// message came between the park being sent and the record being kept, or
// parked before the subscription was made again, could have moved; a
// call with a quorum can take approvals that publish nothing. And a kept
// record is trusted for one poll interval at most.
func TestRedisPeekKeeps(t *testing.T) {
	s := newRedisStoreOn(t, newRedisClient(t), Options{PollInterval: 200 * time.Millisecond})
	listen(t, s)
	kept := func(id string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := s.peeks.calls[id]
		return ok
	}
	for _, tc := range []struct {
		name    string
		between func(id string)
		quorum  []int
	}{
		{"a message for it", func(id string) {
			s.mu.Lock()
			s.hear(id)
			s.mu.Unlock()
		}, nil},
		{"a new subscription", func(string) { s.subscribed() }, nil},
		{"a quorum", func(string) {}, []int{2}},
	} {
		c := sampleCall()
		c.Quorum = tc.quorum
		m, heard := s.markHeard()
		if !heard {
			t.Fatal("the subscription does not vouch")
		}
		tc.between(c.ID)
		stored := c
		stored.State = Waiting
		s.keepPeek(stored, m)
		if kept(c.ID) {
			t.Errorf("%s: kept", tc.name)
		}
	}

	c := park(t, s, sampleCall(), long)
	if !kept(c.ID) {
		t.Fatal("a call parked with nothing between: not kept")
	}
	time.Sleep(250 * time.Millisecond) // past the poll interval
	if got, err := s.Peek(t.Context(), c.ID); err != nil || got.Request == nil {
		t.Errorf("Peek past the poll interval = request %q, %v; want the call read whole", got.Request, err)
	}
}

// listen starts the subscription of s (the first Wait does) and waits
// until it is confirmed.
func listen(t *testing.T, s *RedisStore) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, _ = s.Wait(ctx, "no-such-call", Waiting)
	cancel()
	waitLive(t, s)
}
