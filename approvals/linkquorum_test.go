package approvals_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// TestLinkDoesNotFillAQuorum: a link opened without an identity does not
// approve a call that needs two approvals. A quorum counts distinct names,
// and a link has none but "link": alice approved by API key, then through
// the link of the same notification, and the call ran on one person's
// word. The link may still reject it, and its page says so.
func TestLinkDoesNotFillAQuorum(t *testing.T) {
	e := newEnv(t)
	c := e.parkFor("agent-42", callinfo.Approvers{Reason: "two", Requester: true, Min: 2})
	if res := e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"approve"}`); res.status != http.StatusOK {
		t.Fatalf("alice by key: %d %s", res.status, res.body)
	}
	page := e.do(http.MethodGet, e.pageURL(c), nil, "")
	if page.status != http.StatusOK || !strings.Contains(page.body, "This link can only reject it") || strings.Contains(page.body, `value="approve"`) {
		t.Errorf("the link's page: %d, want it to offer rejecting only:\n%s", page.status, page.body)
	}
	if res := e.decideForm(c, "approve", ""); res.status != http.StatusForbidden {
		t.Errorf("approving through the link: %d, want 403", res.status)
	}
	if st := e.state(c.ID); st != pending.Waiting {
		t.Fatalf("after alice and the link the call is %s, want waiting", st)
	}
	if res := e.decideForm(c, "reject", ""); res.status != http.StatusOK || e.state(c.ID) != pending.Rejected {
		t.Errorf("rejecting through the link: %d, call %s; want 200 and rejected", res.status, e.state(c.ID))
	}
}
