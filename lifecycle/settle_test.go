package lifecycle

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// shardDownStore refuses cancels of the ids in bad (a shard of the store
// down: its calls' abandons fail, the others' are taken), and of every
// id while allDown.
type shardDownStore struct {
	pending.Store
	mu      sync.Mutex
	allDown bool
	bad     map[string]bool
}

func (s *shardDownStore) Cancel(ctx context.Context, id string) (pending.Call, error) {
	s.mu.Lock()
	down := s.allDown || s.bad[id]
	s.mu.Unlock()
	if down {
		return pending.Call{}, errStoreDown
	}
	return s.Store.Cancel(ctx, id)
}

// TestSettleAbandonsPastAShardDown: with one shard of the store down, the
// abandons of its calls fail and the others' are taken. Settle stopped at
// the first batch that gained nothing, drawn in map order, often wholly
// from that shard's calls, and gave up the calls the store would have
// taken (approvable after the agent was told they were not parked). It
// now tries every one in each pass. Repeated: the order is the map's.
func TestSettleAbandonsPastAShardDown(t *testing.T) {
	for trial := range 4 {
		s := &shardDownStore{Store: &landedStore{Store: pending.NewMemory(pending.Options{})}, allDown: true, bad: map[string]bool{}}
		l := newLifecycle(t, s, newExec(), newEvents())
		ctx := t.Context()
		var good pending.Call
		for i := range 10 * sweepBatch {
			pc := newCall()
			if o := l.Ask(ctx, pc, Hold{For: time.Second}); o.Kind != NotParked {
				t.Fatalf("Ask = %s, want NotParked", describe(o))
			}
			if i == 0 {
				good = pc
			} else {
				s.bad[pc.ID] = true
			}
		}
		s.mu.Lock()
		s.allDown = false
		s.mu.Unlock()
		l.Settle(ctx, false)
		if _, err := s.Decide(ctx, good.ID, pending.Decision{To: pending.Approved, By: "approver"}); err == nil {
			t.Fatalf("trial %d: a call the store would have abandoned was given up by Settle and could be approved (%d abandons left)", trial, l.abandoned.count())
		}
	}
}
