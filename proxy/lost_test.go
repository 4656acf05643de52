package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/lifecycle"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// TestLostAnswerSaysWhatIsKnown: a call the store lost while it waited
// was sent nowhere (503, "nothing was forwarded"); one it lost once
// approved or executing may have been sent by an executor, here or on
// another replica, so the agent is told its outcome is unknown, never
// that nothing was forwarded: it would send the call again.
func TestLostAnswerSaysWhatIsKnown(t *testing.T) {
	for _, tc := range []struct {
		state   pending.State
		status  int
		outcome string
	}{
		{pending.Waiting, http.StatusServiceUnavailable, outcomeUnavailable},
		{pending.Approved, http.StatusGatewayTimeout, "unknown"},
		{pending.Executing, http.StatusGatewayTimeout, "unknown"},
	} {
		a := outcomeAnswer(lifecycle.Outcome{Kind: lifecycle.Lost, Call: pending.Call{ID: "ID", State: tc.state}}, policy.Decision{})
		forwarded := strings.Contains(a.detail, "nothing was forwarded")
		if a.status != tc.status || a.outcome != tc.outcome || forwarded != (tc.state == pending.Waiting) || a.callID != "ID" {
			t.Errorf("lost while %s: %d %s %q, want %d %s", tc.state, a.status, a.outcome, a.detail, tc.status, tc.outcome)
		}
	}
}
