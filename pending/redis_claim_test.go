package pending

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// loseReply lets the next command it is armed for run in Redis, then
// answers its caller with fail instead of Redis' reply: a reply lost or
// late, or a caller gone while the command was on its way.
type loseReply struct{ fail atomic.Pointer[error] }

func (h *loseReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if fail := h.fail.Swap(nil); fail != nil {
			return *fail
		}
		return err
	}
}

func (h *loseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRedisClaimReplyLost: a claim that ran in Redis without its answer
// reaching the executor is asked again with the same nonce, and the
// executor holds it: the call is not left executing under a claim nobody
// holds, to end unknown without ever having been sent.
func TestRedisClaimReplyLost(t *testing.T) {
	for name, fail := range map[string]error{
		"reply timed out": errors.New("read tcp 127.0.0.1:6379: i/o timeout"),
		"caller gone":     context.Canceled,
	} {
		t.Run(name, func(t *testing.T) {
			rdb := newRedisClient(t)
			lose := &loseReply{}
			rdb.AddHook(lose)
			s := newRedisStoreOn(t, rdb, Options{})
			c := park(t, s, sampleCall(), long)
			if _, err := s.Decide(t.Context(), c.ID, Decision{To: Approved, By: "alice"}); err != nil {
				t.Fatal(err)
			}
			lose.fail.Store(&fail)
			claimed, err := s.Claim(t.Context(), c.ID, long)
			if err != nil {
				t.Fatalf("Claim = %v, want the claim its first ask made", err)
			}
			if claimed.State != Executing || claimed.Fence != 1 || string(claimed.Request) != string(c.Request) {
				t.Errorf("claimed %s fence %d request %q, want executing, fence 1, the parked request", claimed.State, claimed.Fence, claimed.Request)
			}
			if lose.fail.Load() != nil {
				t.Fatal("no command ran while the reply was to be lost")
			}
			// Held under the first ask's claim: the finish is not fenced.
			if _, err := s.Finish(t.Context(), c.ID, claimed.Fence, Executed, Result{Status: 200}); err != nil {
				t.Errorf("Finish under the recovered claim: %v", err)
			}
		})
	}
}

// TestRedisClaimCallerGoneBefore: a claim whose caller has gone before it
// asks (a replica shutting down) sends nothing, and is not asked again on
// its behalf: the call stays approved for another executor.
func TestRedisClaimCallerGoneBefore(t *testing.T) {
	s := newRedisStoreOn(t, newRedisClient(t), Options{})
	c := park(t, s, sampleCall(), long)
	if _, err := s.Decide(t.Context(), c.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Claim(ctx, c.ID, long); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim with a cancelled context = %v, want context.Canceled", err)
	}
	if got, err := s.Get(t.Context(), c.ID); err != nil || got.State != Approved {
		t.Errorf("after a claim whose caller had gone: %s, %v; want approved", got.State, err)
	}
}

// failFirst answers the next n commands it is armed for with fail,
// without sending them: a Redis that is down for a moment.
type failFirst struct {
	n    atomic.Int32
	fail error
}

func (h *failFirst) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.n.Add(-1) >= 0 {
			cmd.SetErr(h.fail)
			return h.fail
		}
		return next(ctx, cmd)
	}
}

func (h *failFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestRedisFinishAskedAgain: an executed call's result whose finish got
// no answer, because the reply was lost after the finish ran, or because
// Redis was away for a moment and it never ran, is asked again with the
// same nonce: the result is recorded once and the call is executed, not
// left to end unknown with its result lost.
func TestRedisFinishAskedAgain(t *testing.T) {
	timeout := errors.New("read tcp 127.0.0.1:6379: i/o timeout")
	for name, arm := range map[string]func(*loseReply, *failFirst){
		"reply lost": func(l *loseReply, _ *failFirst) { l.fail.Store(&timeout) },
		"redis away": func(_ *loseReply, f *failFirst) { f.n.Store(3) },
	} {
		t.Run(name, func(t *testing.T) {
			rdb := newRedisClient(t)
			lose, away := &loseReply{}, &failFirst{fail: errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")}
			away.n.Store(-1 << 30)
			rdb.AddHook(lose)
			rdb.AddHook(away)
			s := newRedisStoreOn(t, rdb, Options{})
			c, claimed := parkedAndClaimed(t, s)
			arm(lose, away)
			done, err := s.Finish(t.Context(), c.ID, claimed.Fence, Executed, Result{Status: 200, Body: []byte("ran")})
			if err != nil {
				t.Fatalf("Finish = %v, want the result recorded by asking again", err)
			}
			if done.State != Executed || done.Result == nil || string(done.Result.Body) != "ran" {
				t.Errorf("Finish returned %s %+v, want executed with its result", done.State, done.Result)
			}
			if got, err := s.Get(t.Context(), c.ID); err != nil || got.State != Executed || got.Result == nil || string(got.Result.Body) != "ran" {
				t.Errorf("stored: %s %+v, %v; want executed with its result", got.State, got.Result, err)
			}
		})
	}
}

// TestRedisDecideReplyLost: a decision that ran in Redis without its
// answer reaching the approvals listener is asked again with the same
// nonce, and answers as it did: the approver is not told "not recorded"
// of a decision that stands.
func TestRedisDecideReplyLost(t *testing.T) {
	timeout := errors.New("read tcp 127.0.0.1:6379: i/o timeout")
	for _, to := range []State{Approved, Rejected} {
		t.Run(string(to), func(t *testing.T) {
			rdb := newRedisClient(t)
			lose := &loseReply{}
			rdb.AddHook(lose)
			s := newRedisStoreOn(t, rdb, Options{})
			c := park(t, s, sampleCall(), long)
			lose.fail.Store(&timeout)
			decided, err := s.Decide(t.Context(), c.ID, Decision{To: to, By: "alice"})
			if err != nil {
				t.Fatalf("Decide = %v, want the decision its first ask made", err)
			}
			if lose.fail.Load() != nil {
				t.Fatal("no command ran while the reply was to be lost")
			}
			if decided.State != to || decided.DecidedBy != "alice" {
				t.Errorf("Decide returned %s by %q, want %s by alice", decided.State, decided.DecidedBy, to)
			}
		})
	}
}

// TestRedisFinishBoundedByItsCaller: a finish whose caller waits on it
// (a context with a deadline: a held agent) is asked again only until
// then, not for finishRecovery.
func TestRedisFinishBoundedByItsCaller(t *testing.T) {
	rdb := newRedisClient(t)
	away := &failFirst{fail: errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")}
	away.n.Store(-1 << 30)
	rdb.AddHook(away)
	s := newRedisStoreOn(t, rdb, Options{})
	c, claimed := parkedAndClaimed(t, s)
	away.n.Store(1 << 30) // away for good
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Finish(ctx, c.ID, claimed.Fence, Executed, Result{Status: 200}); err == nil {
		t.Fatal("Finish with Redis away succeeded")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Finish took %v past its caller's 300 ms", took)
	}
}

// parkedAndClaimed parks a call in s, approves it and claims it.
func parkedAndClaimed(t *testing.T, s *RedisStore) (parked, claimed Call) {
	t.Helper()
	parked = park(t, s, sampleCall(), long)
	if _, err := s.Decide(t.Context(), parked.ID, Decision{To: Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(t.Context(), parked.ID, long)
	if err != nil {
		t.Fatal(err)
	}
	return parked, claimed
}
