package lifecycle

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/pending"
)

const (
	capAlice = "key:alice"
	capBob   = "jwt:https://idp.example.com#alice" // another principal with the same subject
)

// eachCappedStore runs test against a memory store and a Redis store, both
// with the caps of opts.
func eachCappedStore(t *testing.T, opts pending.Options, test func(t *testing.T, s pending.Store)) {
	t.Run("memory", func(t *testing.T) { test(t, pending.NewMemory(opts)) })
	t.Run("redis", func(t *testing.T) { test(t, newCappedRedis(t, opts)) })
}

// newCappedRedis is newRedis with opts; the count keys of the principals of
// these tests are deleted at the end too.
func newCappedRedis(tb testing.TB, opts pending.Options) *pending.RedisStore {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr(tb), ContextTimeoutEnabled: true})
	tb.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(tb.Context()).Err(); err != nil {
		tb.Fatalf("test Redis: %v", err)
	}
	tag := "toolgate-lifecycle-test:" + rand.Text()
	opts.Prefix, opts.PollInterval = tag+":", 50*time.Millisecond
	s, err := pending.NewRedis(rdb, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Close()
		base := "{" + tag + "}:"
		keys := []string{base + "due", base + "parked", base + "parked:" + capAlice, base + "parked:" + capBob}
		for _, st := range []pending.State{
			pending.Waiting, pending.Approved, pending.Executing, pending.Executed, pending.Rejected,
			pending.Expired, pending.Failed, pending.Unknown, pending.Cancelled,
		} {
			keys = append(keys, base+"state:"+string(st))
		}
		rdb.Del(context.Background(), keys...)
	})
	return s
}

// A new call past its principal's cap is TooMany: nothing is parked,
// nothing runs, OnPark is not called. A retry of a parked call still
// attaches, another principal still parks, and a place freed by a decision
// can be taken again.
func TestAskTooMany(t *testing.T) {
	eachCappedStore(t, pending.Options{MaxParkedPerPrincipal: 1}, testAskTooMany)
}

func testAskTooMany(t *testing.T, s pending.Store) {
	exec, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exec, ev)
	as := func(principal string) pending.Call {
		pc := withKey(newCall())
		pc.Principal = principal
		return pc
	}
	first := as(capAlice)
	if o := l.Ask(t.Context(), first, Hold{}); o.Kind != Waiting || o.Call.Principal != capAlice {
		t.Fatalf("Ask(first) = %s (principal %q), want Waiting", describe(o), o.Call.Principal)
	}

	second := as(capAlice)
	o := l.Ask(t.Context(), second, Hold{For: long})
	if o.Kind != TooMany || !errors.Is(o.Err, pending.ErrTooMany) || o.Call.ID != second.ID {
		t.Fatalf("Ask(second, at the cap) = %s, want TooMany with pending.ErrTooMany", describe(o))
	}
	if _, err := s.Get(t.Context(), second.ID); !errors.Is(err, pending.ErrNotFound) {
		t.Errorf("Get(refused call) = %v, want ErrNotFound: nothing parked", err)
	}
	if p := ev.parks(); len(p) != 1 || p[0].ID != first.ID {
		t.Errorf("OnPark called for %d calls, want only %s", len(p), first.ID)
	}

	// A retry of the parked call attaches to it: never refused.
	again := retry(first)
	again.Principal = capAlice
	if o := l.Ask(t.Context(), again, Hold{}); o.Kind != Waiting || o.Call.ID != first.ID {
		t.Errorf("Ask(retry at the cap) = %s, want Waiting on %s", describe(o), first.ID)
	}
	// Another principal has a place of its own.
	if o := l.Ask(t.Context(), as(capBob), Hold{}); o.Kind != Waiting {
		t.Errorf("Ask(another principal) = %s, want Waiting", describe(o))
	}
	// A rejection frees the place.
	decide(t, s, first.ID, pending.Rejected)
	third := as(capAlice)
	if o := l.Ask(t.Context(), third, Hold{}); o.Kind != Waiting || o.Call.ID != third.ID {
		t.Errorf("Ask(after a rejection) = %s, want Waiting on %s", describe(o), third.ID)
	}
	if n := exec.total(); n != 0 {
		t.Errorf("executed %d times", n)
	}
}

// TooMany is the store's refusal, not an outage: a store that cannot park
// for another reason is still NotParked.
func TestAskTooManyIsNotAnOutage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		kind Kind
	}{
		{pending.ErrTooMany, TooMany},
		{errDown, NotParked},
	} {
		s := &hookStore{Store: pending.NewMemory(pending.Options{})}
		s.park = func(context.Context, pending.Call, time.Duration) (pending.Call, bool, error) {
			return pending.Call{}, false, tc.err
		}
		exec, ev := newExec(), newEvents()
		l := newLifecycle(t, s, exec, ev)
		if o := l.Ask(t.Context(), newCall(), Hold{For: long}); o.Kind != tc.kind || !errors.Is(o.Err, tc.err) {
			t.Errorf("Park failing with %v: Ask = %s, want Kind %d", tc.err, describe(o), tc.kind)
		}
		if p := ev.parks(); len(p) != 0 {
			t.Errorf("Park failing with %v: OnPark called", tc.err)
		}
	}
}
