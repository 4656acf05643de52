package lifecycle

import (
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// A call belongs to its principal: the same subject through another kind
// of credential neither sees nor cancels it.
func TestOwnerIsThePrincipal(t *testing.T) {
	s, _ := newMemory(time.Now(), time.Hour)
	l := newLifecycle(t, s, newExec(), newEvents())
	in := newCall()
	in.Principal = "key:alice"
	if o := l.Ask(t.Context(), in, Hold{}); o.Kind != Waiting {
		t.Fatalf("Ask = %s", describe(o))
	}
	for _, other := range []string{"alice", "jwt:https://idp.example#alice", "anonymous"} {
		if _, err := l.Status(t.Context(), other, in.ID, 0, false); !errors.Is(err, pending.ErrNotFound) {
			t.Errorf("Status as %q: %v, want not found", other, err)
		}
		if _, err := l.Cancel(t.Context(), other, in.ID); !errors.Is(err, pending.ErrNotFound) {
			t.Errorf("Cancel as %q: %v, want not found", other, err)
		}
	}
	if pc, err := l.Status(t.Context(), "key:alice", in.ID, 0, false); err != nil || pc.State != pending.Waiting {
		t.Fatalf("Status as the owner: %s %v", pc.State, err)
	}
}
