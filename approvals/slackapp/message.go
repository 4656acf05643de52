package slackapp

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/toolgate/toolgate/internal/reveal"
	"github.com/toolgate/toolgate/notify"
)

// statusBlockID names the line saying who decided, so a later update
// replaces it rather than adding another.
const statusBlockID = "toolgate_status"

// ephemeral is a message only the clicking user sees; the original stays.
func ephemeral(text string) *slack.WebhookMessage {
	return &slack.WebhookMessage{
		Text:            text,
		ResponseType:    slack.ResponseTypeEphemeral,
		ReplaceOriginal: false,
	}
}

// updated is the original message with its buttons replaced by the
// outcome, or, while more approvals are needed, with the outcome so far
// above the buttons. It keeps the original's summary blocks as Slack sent
// them back; a payload without them (a message Slack did not include)
// gets a summary built from o.
func updated(ic *slack.InteractionCallback, o Outcome, approver string) *slack.WebhookMessage {
	line, open := statusLine(o, approver)

	var kept []slack.Block
	var buttons slack.Block
	for _, b := range ic.Message.Blocks.BlockSet {
		switch {
		case b.ID() == notify.SlackActionsBlockID:
			buttons = b
		case b.ID() == statusBlockID:
			// the previous partial outcome: replaced below
		default:
			kept = append(kept, b)
		}
	}
	rebuilt := len(kept) == 0
	if rebuilt {
		kept = summary(o)
	}
	blocks := append(kept, slack.NewSectionBlock(mrkdwn(line), nil, nil, slack.SectionBlockOptionBlockID(statusBlockID)))
	if open {
		if buttons == nil || rebuilt {
			// A summary shows the call's tool, upstream and caller, not
			// its target or arguments: no Approve under it, as notify
			// offers none under a message that shows only part of a
			// call. Its approvers decide on the approval page.
			blocks = append(blocks, slack.NewContextBlock("", mrkdwn("This message no longer shows the call: approve it on its approval page.")))
			buttons = rejectButton(o.CallID)
		}
		blocks = append(blocks, buttons)
	}
	return &slack.WebhookMessage{
		Text:            fmt.Sprintf("%s: %s on %s for %s", line, esc(o.Tool, 120), esc(o.Upstream, 120), esc(o.Subject, 120)),
		Blocks:          &slack.Blocks{BlockSet: blocks},
		ReplaceOriginal: true,
	}
}

// statusLine says what the call's state is now and who made it so, and
// whether the call still waits for decisions (open).
func statusLine(o Outcome, approver string) (line string, open bool) {
	by := o.DecidedBy
	if by == "" {
		by = approver
	}
	by = esc(by, 200)
	count := ""
	if o.Needed > 1 {
		count = fmt.Sprintf(" (%d of %d)", o.Approvals, o.Needed)
	}
	switch o.State {
	case "approved", "executing", "executed":
		return "✅ Approved by " + by + count, false
	case "rejected":
		return "❌ Rejected by " + by, false
	case "waiting":
		return "☑️ Approved by " + esc(approver, 200) + count + "; waiting for more approvers", true
	}
	return "This call is " + esc(o.State, 50) + ".", false
}

// summary stands in for the original message's blocks.
func summary(o Outcome) []slack.Block {
	toolCode := func(s string) string { // the agent's, as code (notify.SlackCode)
		if s == "" {
			return "—"
		}
		return notify.SlackCode(s, 300)
	}
	orDash := func(s string) string {
		if s == "" {
			return "—"
		}
		return esc(s, 300)
	}
	return []slack.Block{
		slack.NewSectionBlock(nil, []*slack.TextBlockObject{
			mrkdwn("*Tool*\n" + toolCode(o.Tool)),
			mrkdwn("*Upstream*\n" + orDash(o.Upstream)),
			mrkdwn("*Caller*\n" + orDash(o.Subject)),
		}, nil),
		slack.NewContextBlock("", mrkdwn("Call ID "+esc(o.CallID, 100))),
	}
}

// rejectButton is notify's Reject button alone, for a message rebuilt
// from a summary.
func rejectButton(callID string) slack.Block {
	reject := slack.NewButtonBlockElement(notify.SlackRejectActionID, callID, slack.NewTextBlockObject(slack.PlainTextType, "Reject", false, false))
	reject.Style = slack.StyleDanger
	return slack.NewActionBlock(notify.SlackActionsBlockID, reject)
}

// mrkdwn is a verbatim mrkdwn text: Slack links nothing in it by itself.
// Everything put in it is escaped by esc or is toolgate's own.
func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, true)
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// esc makes untrusted text (tool names, approver names, error messages)
// safe in mrkdwn, as notify does: no links, no mentions, one line, at most
// max runes, and the characters that hide or reorder text spelled out (a
// right-to-left override in a tool name would reorder the line around it).
func esc(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max-1]) + "…"
	}
	s = reveal.String(s)
	return escaper.Replace(s)
}
