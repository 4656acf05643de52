package lifecycle

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// TestLateParkAbandoned: Redis stalls (a fork, a long script) while a
// call is parked, for longer than the park may take. The agent is told
// the call was not parked; once Redis goes on and runs the park it had
// received, the call must not wait for a decision: not announced, not
// approvable, never run.
func TestLateParkAbandoned(t *testing.T) {
	p := testkit.NewRedisProc(t, nil, "--save", "", "--appendonly", "no")
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	s, err := pending.NewRedis(rdb, pending.Options{Prefix: "late:", PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	if err := s.Ping(ctx); err != nil { // the layout checked and the functions loaded before the stall
		t.Fatal(err)
	}
	exe, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exe, ev)

	for _, stall := range []time.Duration{
		4 * time.Second, // over once the abandon is sent: it lands beside the park
		8 * time.Second, // past the abandon's own timeout too: the sweeper's retry lands it
	} {
		pc := newCall()
		p.Pause()
		resumed := make(chan struct{})
		go func() {
			defer close(resumed)
			time.Sleep(stall)
			p.Resume()
		}()
		if o := l.Ask(ctx, pc, Hold{For: time.Second}); o.Kind != NotParked {
			t.Fatalf("stall %v: Ask = %s, want NotParked", stall, describe(o))
		}
		<-resumed
		// Whatever Redis runs first, the park or the abandon, the call
		// ends up not waiting once the sweeper had its round.
		testkit.WaitFor(t, "the abandon to land", func() bool {
			l.SweepOnce(ctx, 0)
			got, err := s.Get(ctx, pc.ID)
			return errors.Is(err, pending.ErrNotFound) || err == nil && got.State == pending.Cancelled
		})
		if un, err := s.Unannounced(ctx, 0, 100, 0); err != nil {
			t.Fatal(err)
		} else {
			for _, c := range un {
				if c.ID == pc.ID {
					t.Errorf("stall %v: the call is still to be announced to the approvers", stall)
				}
			}
		}
		if _, err := s.Decide(ctx, pc.ID, pending.Decision{To: pending.Approved, By: "approver"}); err == nil {
			t.Errorf("stall %v: the call the agent was told was not parked could be approved", stall)
		}
		l.SweepOnce(ctx, 0)
		if n := exe.count(pc.ID); n != 0 {
			t.Errorf("stall %v: the call ran %d time(s)", stall, n)
		}
	}
}

// TestParkLandedAnswerLostAbandoned: a park that ran in the store, whose
// answer was lost and whose client's retries could not connect, fails
// with a dial error. The agent is told the call was not parked, so the
// call is abandoned: it was not, a dial error being read as "never
// sent", and it waited for an approver and ran.
func TestParkLandedAnswerLostAbandoned(t *testing.T) {
	s := &landedStore{Store: pending.NewMemory(pending.Options{})}
	exe, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exe, ev)
	ctx := t.Context()
	pc := newCall()
	if o := l.Ask(ctx, pc, Hold{For: time.Second}); o.Kind != NotParked {
		t.Fatalf("Ask = %s, want NotParked", describe(o))
	}
	if _, err := s.Decide(ctx, pc.ID, pending.Decision{To: pending.Approved, By: "approver"}); err == nil {
		t.Error("the call the agent was told was not parked could be approved")
	}
	l.SweepOnce(ctx, 0)
	if n := exe.count(pc.ID); n != 0 {
		t.Errorf("the call ran %d time(s)", n)
	}
}

// landedStore parks, then answers as a client whose reconnects were
// refused after the park's answer was lost.
type landedStore struct{ pending.Store }

func (s *landedStore) Park(ctx context.Context, pc pending.Call, ttl time.Duration) (pending.Call, bool, error) {
	if _, _, err := s.Store.Park(ctx, pc, ttl); err != nil {
		return pending.Call{}, false, err
	}
	return pending.Call{}, false, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

// TestSettleAbandons: the abandons the store did not take are tried again,
// all of them, when the process settles at shutdown, since no sweep of it
// will try them: they were left to a sweeper that never ran, and once more
// than a sweep's batch (64) was kept, all but one batch were.
func TestSettleAbandons(t *testing.T) {
	s := &cancelDownStore{Store: &landedStore{Store: pending.NewMemory(pending.Options{})}}
	exe, ev := newExec(), newEvents()
	l := newLifecycle(t, s, exe, ev)
	ctx := t.Context()
	s.down.Store(true)
	var calls []pending.Call
	for range 100 {
		pc := newCall()
		if o := l.Ask(ctx, pc, Hold{For: time.Second}); o.Kind != NotParked {
			t.Fatalf("Ask = %s, want NotParked", describe(o))
		}
		calls = append(calls, pc)
	}
	s.down.Store(false)
	if !l.Settle(ctx, false) {
		t.Fatal("Settle did not finish")
	}
	approvable := 0
	for _, pc := range calls {
		if _, err := s.Decide(ctx, pc.ID, pending.Decision{To: pending.Approved, By: "approver"}); err == nil {
			approvable++
		}
	}
	if approvable != 0 {
		t.Errorf("%d of %d calls whose agents were told they were not parked could be approved after their replica settled", approvable, len(calls))
	}
}
