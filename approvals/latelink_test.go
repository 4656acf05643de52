package approvals_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestLinkAfterALateApproval: an approval in a call's last 30 seconds moves
// its expiry on (the approved window). The links notified before still
// show the decided call, and a decision through them is 409 with the
// outcome; they answered 403, as a forged link.
func TestLinkAfterALateApproval(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"a"}`)
	link := e.pageURL(c)
	e.clock.Advance(c.ExpiresAt.Sub(e.clock.Now()) - 10*time.Second)
	if res := e.decideForm(c, "approve", ""); res.status != http.StatusOK || e.state(c.ID) != pending.Approved {
		t.Fatalf("the approval: %d, call %s", res.status, e.state(c.ID))
	}
	e.clock.Advance(time.Second)
	if late := e.decideForm(c, "reject", ""); late.status != http.StatusConflict {
		t.Errorf("a later decision through the same link: %d, want 409", late.status)
	}
	if page := e.do(http.MethodGet, link, nil, ""); page.status != http.StatusOK || !strings.Contains(page.body, "no longer waiting") {
		t.Errorf("the link's page after the decision: %d, want 200 with the decided call", page.status)
	}
	// A token for a later expiry than the call's is no token of this call.
	later := c
	later.ExpiresAt = c.ExpiresAt.Add(time.Hour)
	got, _ := e.store.Get(t.Context(), c.ID)
	if err := e.signer.Check(e.signer.Token(later), got, e.clock.Now()); err == nil {
		t.Error("a token for a later expiry than the call's was accepted")
	}
}
