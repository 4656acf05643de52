package lifecycle

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// getLog is a real store that records each Get in log.
type getLog struct {
	pending.Store
	log *[]string
}

func (g getLog) Get(ctx context.Context, id string) (pending.Call, error) {
	*g.log = append(*g.log, "get")
	return g.Store.Get(ctx, id)
}

// TestOwnedOneResultAtATime: Owned reads an executed call whole (for its
// result) only after it handed the one before to its caller, so that a
// list holds one result at a time, however many it lists.
func TestOwnedOneResultAtATime(t *testing.T) {
	mem := pending.NewMemory(pending.Options{})
	var log []string
	l := newLifecycle(t, getLog{mem, &log}, &fakeExec{}, &events{})
	ctx := t.Context()
	for range 3 {
		c := newCall()
		if _, _, err := mem.Park(ctx, c, time.Hour); err != nil {
			t.Fatal(err)
		}
		decide(t, mem, c.ID, pending.Approved)
		claimed, err := mem.Claim(ctx, c.ID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Finish(ctx, c.ID, claimed.Fence, pending.Executed, pending.Result{Status: 200, Body: []byte("big")}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	err := l.Owned(ctx, "alice", 10, func(pending.Call) bool { return true }, func(pc pending.Call) {
		log = append(log, "each")
		if pc.Result == nil || string(pc.Result.Body) != "big" {
			t.Errorf("executed call %s handed without its result", pc.ID)
		}
		n++
	})
	if err != nil || n != 3 {
		t.Fatalf("Owned: %d calls, %v; want 3", n, err)
	}
	if got := strings.Join(log, ","); got != "get,each,get,each,get,each" {
		t.Errorf("reads and hand-offs %s, want each call handed before the next is read", got)
	}
}
