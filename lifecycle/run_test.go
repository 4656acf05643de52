package lifecycle

import (
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestRun checks that Run executes its owner's approved call once, even
// asked twice at once, and leaves other calls as they are.
func TestRun(t *testing.T) {
	eachStore(t, func(t *testing.T, s pending.Store) {
		exec := newExec()
		l := newLifecycle(t, s, exec, newEvents())
		ctx := t.Context()
		pc, _, err := s.Park(ctx, newCall(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := l.Run(ctx, "alice", pc.ID); err != nil || got.State != pending.Waiting {
			t.Fatalf("Run of a waiting call = %s, %v; want it left waiting", got.State, err)
		}
		if _, err := l.Run(ctx, "mallory", pc.ID); err == nil {
			t.Fatal("Run of another principal's call succeeded")
		}
		if _, err := s.Decide(ctx, pc.ID, pending.Decision{To: pending.Approved, By: "bob"}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, err := l.Run(ctx, "alice", pc.ID); err != nil {
					t.Errorf("Run = %v", err)
				}
			})
		}
		wg.Wait()
		if n := exec.count(pc.ID); n != 1 {
			t.Fatalf("two Runs at once executed the call %d times, want once", n)
		}
		if got, _ := s.Get(ctx, pc.ID); got.State != pending.Executed || got.Result == nil {
			t.Fatalf("after Run: %s, result %v", got.State, got.Result)
		}
	})
}
