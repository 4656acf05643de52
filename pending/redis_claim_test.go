package pending

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

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
