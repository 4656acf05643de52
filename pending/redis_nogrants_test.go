package pending

import (
	"context"
	"crypto/rand"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
)

// commands counts the commands a client sends.
type commands struct{ n atomic.Int64 }

func (h *commands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestRedisNoGrantsRemembered: a replica that found no live grant answers
// the next lookups without asking Redis, until a grant is made on any
// replica (its message), the subscription is made again, or the poll
// interval passes; and it never misses a grant for longer than that.
func TestRedisNoGrantsRemembered(t *testing.T) {
	const poll = 1500 * time.Millisecond // long beside a lookup, even under -race on a busy machine
	opts := Options{Prefix: "toolgate-test:" + rand.Text() + ":", PollInterval: poll}
	rdbA := newRedisClient(t)
	sent := &commands{}
	rdbA.AddHook(sent)
	a := newRedisStoreOn(t, rdbA, opts)
	b := newRedisStoreOn(t, newRedisClient(t), opts)
	g := sampleGrant()
	find := func() (Grant, error) {
		return a.FindGrant(t.Context(), soleTarget([4]string{g.Subject, g.Upstream, g.Tool, g.Target}))
	}
	asks := func(name string, want int64) {
		t.Helper()
		before := sent.n.Load()
		if _, err := find(); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: FindGrant = %v, want none", name, err)
		}
		if got := sent.n.Load() - before; got != want {
			t.Errorf("%s: FindGrant sent %d commands, want %d", name, got, want)
		}
	}

	// Before the subscription is confirmed, every lookup asks (the first
	// loads the script too).
	if _, err := find(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindGrant = %v, want none", err)
	}
	asks("no subscription yet, again", 1)
	c := park(t, a, sampleCall(), long)
	res := waitAsync(t, a, c.ID, Waiting)
	t.Cleanup(func() {
		_, _ = a.Decide(context.Background(), c.ID, Decision{To: Rejected, By: "alice"})
		<-res
	})
	waitLive(t, a)
	asks("subscribed", 1)
	asks("none remembered", 0)

	// The subscription made again: asks.
	a.subscribed()
	asks("resubscribed", 1)
	asks("none remembered again", 0)

	// Older than the poll interval: asks.
	time.Sleep(poll)
	asks("past the poll interval", 1)

	// A grant on another replica is found as soon as its message is heard,
	// well before the poll interval.
	asks("none remembered before the grant", 0)
	made := grant(t, b, g, time.Hour)
	start := time.Now()
	testkit.WaitFor(t, "the grant to be found", func() bool {
		got, err := find()
		return err == nil && got.ID == made.ID
	})
	if d := time.Since(start); d >= poll {
		t.Errorf("the grant was found after %v: the message was not heard", d)
	}
	// While a grant is live, every lookup asks, whatever its scope.
	other := g
	other.Tool = "notes.other"
	before := sent.n.Load()
	for range 3 {
		if _, err := a.FindGrant(t.Context(), soleTarget([4]string{other.Subject, other.Upstream, other.Tool, other.Target})); !errors.Is(err, ErrNotFound) {
			t.Fatalf("FindGrant(other) = %v", err)
		}
	}
	if got := sent.n.Load() - before; got != 3 {
		t.Errorf("3 lookups with a grant live sent %d commands, want 3", got)
	}

	// Revoked: none live again, remembered once looked up; a grant made on
	// this replica is found at once.
	if _, err := b.Revoke(t.Context(), made.ID); err != nil {
		t.Fatal(err)
	}
	asks("revoked", 1)
	asks("none remembered after the revocation", 0)
	mine := grant(t, a, g, time.Hour)
	if got, err := find(); err != nil || got.ID != mine.ID {
		t.Errorf("FindGrant right after this replica's Grant = %v, %v; want %s", got.ID, err, mine.ID)
	}
}
