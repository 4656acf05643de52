package approvals_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/pending"
)

// askedStore is a store that records every ID it is asked to get.
type askedStore struct {
	pending.Store
	mu  sync.Mutex
	ids []string
}

func (s *askedStore) Get(ctx context.Context, id string) (pending.Call, error) {
	s.mu.Lock()
	s.ids = append(s.ids, id)
	s.mu.Unlock()
	return s.Store.Get(ctx, id)
}

// TestDecideAs_MalformedID: the call ID of a Slack click is a button's
// value; one that no store could hold is an unknown call before the store
// is asked, as on the page and the API, and decides nothing. A well-formed
// ID of a waiting call is decided.
func TestDecideAs_MalformedID(t *testing.T) {
	asked := &askedStore{}
	e := newEnv(t, func(c *approvals.Config) { asked.Store = c.Store; c.Store = asked })
	c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
	for _, id := range []string{"", "a/b", "a%2Fb", c.ID + " ", c.ID + "\n", "{" + c.ID + "}", "é", strings.Repeat("A", 129)} {
		o, err := e.h.DecideAs(t.Context(), id, "alice", true)
		if err == nil || !strings.Contains(err.Error(), "unknown call") || o.State != "" {
			t.Errorf("DecideAs(%q) = %+v, %v; want unknown call", id, o, err)
		}
	}
	if len(asked.ids) != 0 {
		t.Errorf("the store was asked for %q", asked.ids)
	}
	o, err := e.h.DecideAs(t.Context(), c.ID, "alice", true)
	if err != nil || o.State != string(pending.Approved) || o.CallID != c.ID {
		t.Fatalf("DecideAs(%s) = %+v, %v; want it approved", c.ID, o, err)
	}
	if got := e.onDecisionCalls(); len(got) != 1 || got[0].ID != c.ID {
		t.Errorf("decisions %v, want the one call", got)
	}
}
