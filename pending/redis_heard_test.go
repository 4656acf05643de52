package pending

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// stateReads counts the GETRANGE reads of a call's state (RedisStore.state)
// a client sends, and in gets its GET reads of a whole call (Get).
type stateReads struct{ n, gets atomic.Int64 }

func (h *stateReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stateReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch strings.ToLower(cmd.Name()) {
		case "getrange":
			h.n.Add(1)
		case "get":
			h.gets.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *stateReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

var _ redis.Hook = (*stateReads)(nil)

// TestRedisWaitAfterPark: a held agent's Wait on the call its replica just
// parked skips the first read of the call's state while the subscription
// has heard everything since the park, and reads it otherwise: after a
// transition it heard, or after the subscription was made again. No
// transition is missed either way: the poll here is 10 s, and every Wait
// must return at once.
func TestRedisWaitAfterPark(t *testing.T) {
	a, b, _, reads := readsCounted(t)

	// The subscription starts with the first Wait, and is confirmed
	// after it: that first Wait reads.
	first := park(t, a, sampleCall(), long)
	firstRes := waitAsync(t, a, first.ID, Waiting)
	waitLive(t, a)
	decide(t, b, first.ID, Approved)
	if r := <-firstRes; r.err != nil || r.c.State != Approved {
		t.Fatalf("first Wait = %s, %v", r.c.State, r.err)
	}

	approveAfter := func(id string) {
		t.Helper()
		waiting(t, a, id)
		decide(t, b, id, Approved)
	}
	waitApproved := func(name string, res <-chan waitResult, wantReads int64, before int64) {
		t.Helper()
		select {
		case r := <-res:
			if r.err != nil || r.c.State != Approved {
				t.Errorf("%s: Wait = %s, %v; want approved", name, r.c.State, r.err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: Wait missed the approval (the poll is 10 s)", name)
		}
		if got := reads.n.Load() - before; got != wantReads {
			t.Errorf("%s: %d reads of the state before waiting, want %d", name, got, wantReads)
		}
	}

	// Parked here, nothing heard since: no first read.
	c := park(t, a, sampleCall(), long)
	before := reads.n.Load()
	res := waitAsync(t, a, c.ID, Waiting)
	approveAfter(c.ID)
	waitApproved("parked, then waited", res, 0, before)

	// Approved between the park and the Wait, and heard: the Wait reads
	// and returns at once.
	d := park(t, a, sampleCall(), long)
	decide(t, b, d.ID, Approved)
	testkit.WaitFor(t, "the approval to be heard", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.heard.ring[(a.heard.n-1)%heardRing] == d.ID
	})
	before = reads.n.Load()
	waitApproved("approved before the Wait", waitAsync(t, a, d.ID, Waiting), 1, before)

	// The subscription made again after the park: what was published in
	// between may be lost, so the Wait reads.
	e := park(t, a, sampleCall(), long)
	a.subscribed()
	before = reads.n.Load()
	res = waitAsync(t, a, e.ID, Waiting)
	approveAfter(e.ID)
	waitApproved("resubscribed after the park", res, 1, before)

	// A Wait from another state than the park's, or on a call parked
	// elsewhere, reads.
	f := park(t, b, sampleCall(), long)
	before = reads.n.Load()
	res = waitAsync(t, a, f.ID, Waiting)
	approveAfter(f.ID)
	waitApproved("parked on another replica", res, 1, before)
}

// readsCounted returns two replicas' stores on one prefix, with a 10 s
// poll (a missed message would show), B's client, and the reads A sends.
func readsCounted(t *testing.T) (a, b *RedisStore, rdbB *redis.Client, reads *stateReads) {
	opts := Options{Prefix: "toolgate-test:" + rand.Text() + ":", PollInterval: 10 * time.Second}
	rdbA := newRedisClient(t)
	rdbB = newRedisClient(t)
	reads = &stateReads{}
	rdbA.AddHook(reads)
	return newRedisStoreOn(t, rdbA, opts), newRedisStoreOn(t, rdbB, opts), rdbB, reads
}

// waiting waits until s has a waiter for id that has made its choice of
// a first read (it used the park's mark): what is published from then on
// reaches it, and cannot change that choice.
func waiting(t *testing.T, s *RedisStore, id string) {
	t.Helper()
	testkit.WaitFor(t, "the wait to start", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, marked := s.heard.marks[id]
		return len(s.waiters[id]) > 0 && !marked
	})
}

// waitLive waits until the subscription of s is confirmed, and returns
// its epoch.
func waitLive(t *testing.T, s *RedisStore) (epoch uint64) {
	t.Helper()
	testkit.WaitFor(t, "the subscription to be confirmed", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		epoch = s.heard.epoch
		return s.heard.live
	})
	return epoch
}

// TestRedisWaitAfterParkCut: an approval published while the
// subscription is away, between the park and the Wait, is not missed: the
// subscription made again says what was published meanwhile may be lost,
// and the Wait reads instead of waiting for its poll.
func TestRedisWaitAfterParkCut(t *testing.T) {
	name := "toolgate-test-" + rand.Text()
	rdb := dialRedis(t, &redis.Options{Addr: redisAddr(t), ClientName: name})
	s := newRedisStoreOn(t, rdb, Options{PollInterval: 10 * time.Second})

	first := park(t, s, sampleCall(), long)
	firstRes := waitAsync(t, s, first.ID, Waiting)
	epoch := waitLive(t, s)

	c := park(t, s, sampleCall(), long)
	cutAndApprove(t, rdb, s, name, c.ID)
	testkit.WaitFor(t, "the subscription to be made again", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.heard.epoch > epoch
	})
	start := time.Now()
	r := <-waitAsync(t, s, c.ID, Waiting)
	if r.err != nil || r.c.State != Approved {
		t.Fatalf("Wait after the cut = %s, %v; want approved", r.c.State, r.err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Wait took %v: it waited for its poll instead of reading", d)
	}
	decide(t, s, first.ID, Approved)
	<-firstRes
}

// TestRedisWaitHeld: the held request's wait takes an approval (or an
// approval that claimed) from the message that publishes it, reading
// nothing, and the claim that follows
// is what checks it. A forged "approved" message wakes it, and the claim
// refuses a call that is still waiting. A message without a state (an
// earlier release's) wakes it to read, as before.
func TestRedisWaitHeld(t *testing.T) {
	a, b, rdbB, reads := readsCounted(t)
	held := func(id string) <-chan waitResult { return waitWith(t, a.WaitHeld, id, Waiting) }
	// The subscription is confirmed once a first Wait has started it.
	first := park(t, a, sampleCall(), long)
	firstRes := waitAsync(t, a, first.ID, Waiting)
	waitLive(t, a)
	decide(t, b, first.ID, Approved)
	<-firstRes

	c := park(t, a, sampleCall(), long)
	before, beforeGets := reads.n.Load(), reads.gets.Load()
	res := held(c.ID)
	waiting(t, a, c.ID)
	decide(t, b, c.ID, Approved)
	r := <-res
	if r.err != nil || r.c.ID != c.ID || r.c.State != Approved {
		t.Fatalf("WaitHeld = %s %s, %v; want %s approved", r.c.ID, r.c.State, r.err, c.ID)
	}
	if n, g := reads.n.Load()-before, reads.gets.Load()-beforeGets; n != 0 || g != 0 {
		t.Errorf("WaitHeld read the call %d times (%d of its state, %d whole), want 0", n+g, n, g)
	}
	if got, err := a.Claim(t.Context(), c.ID, long); err != nil || got.State != Executing || string(got.Request) != string(c.Request) {
		t.Errorf("Claim after WaitHeld = %s, %v; want the call whole, executing", got.State, err)
	}

	// An approval that claims (Decision.Claim): the wait takes the move
	// to executing from its message as well, reading nothing.
	cl := park(t, a, sampleCall(), long)
	before, beforeGets = reads.n.Load(), reads.gets.Load()
	res = held(cl.ID)
	waiting(t, a, cl.ID)
	if _, err := b.Decide(t.Context(), cl.ID, Decision{To: Approved, By: "alice", Claim: long}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.c.ID != cl.ID || r.c.State != Executing {
		t.Fatalf("WaitHeld after an approval that claims = %s %s, %v; want %s executing", r.c.ID, r.c.State, r.err, cl.ID)
	}
	if n, g := reads.n.Load()-before, reads.gets.Load()-beforeGets; n != 0 || g != 0 {
		t.Errorf("WaitHeld read the claimed call %d times (%d of its state, %d whole), want 0", n+g, n, g)
	}

	// A forged approval: the wait takes it, the claim does not.
	forged := park(t, a, sampleCall(), long)
	res = held(forged.ID)
	waiting(t, a, forged.ID)
	if err := rdbB.Publish(t.Context(), a.channel, forged.ID+" approved").Err(); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.c.State != Approved {
		t.Fatalf("WaitHeld after a forged message = %s, %v", r.c.State, r.err)
	}
	_, err := a.Claim(t.Context(), forged.ID, long)
	if se := (*StateError)(nil); !errors.As(err, &se) || se.Call.State != Waiting {
		t.Fatalf("Claim of a call a forged message called approved = %v; want a conflict, still waiting", err)
	}

	// A message without a state wakes the wait to read; it waits on.
	res = held(forged.ID)
	waiting(t, a, forged.ID)
	beforeGets = reads.gets.Load()
	if err := rdbB.Publish(t.Context(), a.channel, forged.ID).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the wait to read the call", func() bool { return reads.gets.Load() > beforeGets })
	select {
	case r := <-res:
		t.Fatalf("WaitHeld returned %s, %v on a message without a state", r.c.State, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	decide(t, b, forged.ID, Rejected)
	if r := <-res; r.err != nil || r.c.State != Rejected || r.c.DecidedBy != "alice" {
		t.Errorf("WaitHeld after a rejection = %s by %q, %v; want the call whole, rejected", r.c.State, r.c.DecidedBy, r.err)
	}
}
