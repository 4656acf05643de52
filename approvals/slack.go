package approvals

import (
	"context"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/approvals/slackapp"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// viaSlack is how a decision made with a Slack button is recorded.
const viaSlack = "slack"

// DecideAs decides callID as the approver called name (a Slack user the
// configuration maps to that name), with the groups the configuration
// gives that name: the slackapp.Decider of the listener. Its errors are
// written for the person who clicked.
func (h *Handler) DecideAs(ctx context.Context, callID, name string, approve bool) (slackapp.Outcome, error) {
	to := pending.Rejected
	if approve {
		to = pending.Approved
	}
	who := h.known(signin.Approver{Name: name, Via: viaSlack})
	// The ID is a button's value from a signed payload, but the page and
	// the API check its form before the store sees it, and so does this.
	if !validCallID(callID) {
		return slackapp.Outcome{}, &slackError{classify(pending.ErrNotFound, "POST").msg}
	}
	c, err := h.store.Get(ctx, callID)
	if err == nil {
		c, err = h.decide(ctx, "slack", decision{call: c, info: callinfo.Decode(c.Info), who: &who, to: to, via: viaSlack})
	}
	if err != nil {
		a := classify(err, "POST")
		if a.call != nil {
			return outcomeOf(*a.call), &slackError{a.msg}
		}
		return slackapp.Outcome{CallID: callID}, &slackError{a.msg}
	}
	return outcomeOf(c), nil
}

// slackError is a refusal as the clicking user reads it.
type slackError struct{ msg string }

func (e *slackError) Error() string { return e.msg }

func outcomeOf(c pending.Call) slackapp.Outcome {
	n := 0
	if needed(c) > 0 {
		n = len(c.Approvals)
	}
	return slackapp.Outcome{
		CallID: c.ID, Tool: c.Tool, Upstream: c.Upstream, Subject: c.Subject, State: string(c.State),
		DecidedBy: c.DecidedBy, Approvals: n, Needed: needed(c),
	}
}
