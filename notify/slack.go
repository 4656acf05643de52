package notify

import (
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/reveal"
)

// A Slack incoming-webhook message in Block Kit. Everything shown comes
// from the agent or the policy, so it is untrusted: it is mrkdwn-escaped
// (&, <, >: no links, no @channel) and sent verbatim (no auto-linked URLs
// or mentions), so an argument cannot draw its own "Approve" link.
//
// By default the only button is a URL button to toolgate's approval page,
// where approving is a POST, so Slack's link expander and other
// previewers, which GET, cannot approve. With [Options.SlackInteractive]
// the message also carries Approve and Reject buttons. They are not links:
// a click makes Slack itself POST a request signed with the app's signing
// secret to the approvals listener (approvals/slackapp), which checks the
// signature and maps the clicking Slack user to an approver before
// deciding anything. A previewer fetching the message decides nothing, and
// the buttons carry only the call ID, which is not a credential. The link
// to the page stays, so the full arguments remain one click away.
type slackMsg struct {
	Text        string       `json:"text"` // notification and fallback text
	Blocks      []slackBlock `json:"blocks"`
	UnfurlLinks bool         `json:"unfurl_links"` // false: no previews of anything in the message
	UnfurlMedia bool         `json:"unfurl_media"`
}

type slackBlock struct {
	Type     string      `json:"type"`
	BlockID  string      `json:"block_id,omitempty"`
	Text     *slackText  `json:"text,omitempty"`
	Fields   []slackText `json:"fields,omitempty"`
	Elements []any       `json:"elements,omitempty"`
}

type slackText struct {
	Type     string `json:"type"` // plain_text | mrkdwn
	Text     string `json:"text"`
	Verbatim bool   `json:"verbatim,omitempty"`
}

type slackButton struct {
	Type     string    `json:"type"` // button
	Text     slackText `json:"text"`
	ActionID string    `json:"action_id,omitempty"`
	URL      string    `json:"url,omitempty"`
	Value    string    `json:"value,omitempty"`
	Style    string    `json:"style,omitempty"`
}

// The block and action IDs of an interactive message. The approvals
// listener's Slack handler matches clicks on them, and messages already
// posted keep them, so they never change.
const (
	// SlackActionsBlockID names the actions block holding the buttons.
	SlackActionsBlockID = "toolgate_actions"
	// SlackApproveActionID is the Approve button; its value is the call ID.
	SlackApproveActionID = "toolgate_approve"
	// SlackRejectActionID is the Reject button; its value is the call ID.
	SlackRejectActionID = "toolgate_reject"
	// SlackOpenActionID is the link to the approval page. Slack reports
	// clicks on link buttons too; the handler answers them and does nothing.
	SlackOpenActionID = "toolgate_open"
)

func plainText(s string) *slackText { return &slackText{Type: "plain_text", Text: s} }

// mrkdwn is a verbatim mrkdwn text: Slack links nothing in it by itself.
func mrkdwn(s string) slackText { return slackText{Type: "mrkdwn", Text: s, Verbatim: true} }

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// slackEsc escapes s and folds it onto one line, shortened to max runes.
func slackEsc(s string, max int) string {
	// Hidden characters spelled out (a right-to-left override in a
	// reason that quotes an argument would reorder what the approver reads).
	return slackEscaper.Replace(reveal.String(truncateRunes(oneLine(s), max)))
}

// SlackCode shows s as code, on one line, shortened to max runes:
// Slack has no escape for "*", "_" and "~", and outside code a caller's
// "~rm -rf /~" would show struck through. A value without a backtick is
// inline code; one with a backtick, which would close inline code, is a
// code block on one line (slackCodeRune keeps it from closing that).
func SlackCode(s string, max int) string {
	v := reveal.String(truncateRunes(oneLine(s), max))
	if !strings.ContainsRune(v, '`') {
		return "`" + slackEscaper.Replace(v) + "`"
	}
	var b strings.Builder
	b.WriteString("```")
	for _, r := range v {
		b.WriteString(slackCodeRune(r))
	}
	b.WriteString("```")
	return b.String()
}

// slackCodeRune escapes one rune of a code block. A zero-width space after
// every backtick keeps the arguments from closing the block with "```"
// and formatting the rest.
func slackCodeRune(r rune) string {
	switch r {
	case '&':
		return "&amp;"
	case '<':
		return "&lt;"
	case '>':
		return "&gt;"
	case '`':
		return "`\u200b"
	}
	return string(r)
}

// slackMessage renders e. interactive adds the Approve and Reject buttons
// to a requested message (see [Options.SlackInteractive]).
func slackMessage(e *Event, interactive bool) slackMsg {
	if e.Type == TypeResolved {
		return slackResolved(e)
	}
	orDash := func(s string) string {
		if s == "" {
			return "—"
		}
		return slackEsc(s, 300)
	}
	// The tool and the target are the agent's, shown as code so that
	// their characters cannot format the message.
	orDashCode := func(s string) string {
		if s == "" {
			return "—"
		}
		return SlackCode(s, 300)
	}
	fields := []slackText{
		mrkdwn("*Tool*\n" + orDashCode(e.Tool)),
		mrkdwn("*Upstream*\n" + orDash(e.Upstream)),
		mrkdwn("*Caller*\n" + orDash(e.Subject)),
	}
	if e.ToolTarget != "" || e.TargetsBeyond {
		fields = append(fields, mrkdwn("*Target*\n"+orDashCode(e.ToolTarget)+beyondNote(e)))
	}
	// whole stays true while the message shows everything approving sends;
	// past any cut it offers no Approve (slackInteractiveActions).
	req, reqCut := requestLine(e)
	// An MCP tool's name is shown in the Tool field alone: cut or folded
	// there, the message does not show what approving runs.
	whole := !reqCut && shownWhole(e.Tool, 300)
	if req != "" {
		fields = append(fields, mrkdwn("*Request*\n"+SlackCode(req, requestLimit)))
	}
	title := e.Tool
	if title == "" {
		title = req // a plain HTTP call has no tool: its request names it
	}
	blocks := []slackBlock{
		{Type: "header", Text: plainText("Approval needed: " + reveal.String(truncateRunes(oneLine(title), 120)))},
		{Type: "section", Fields: fields},
	}

	if len(e.Reasons) > 0 || len(e.RuleIDs) > 0 {
		blocks = append(blocks, slackWhy(e))
	}

	pretty, complete := prettyArguments(e.Arguments)
	code, shown, truncated := slackCode(pretty, argumentsLimit)
	args := "*Arguments*\n" + code
	if truncated || !complete {
		args += "\n_" + truncatedNote(shown, pretty, complete, len(e.Arguments)) + "_"
		whole = false
	}
	blocks = append(blocks, slackBlock{Type: "section", Text: new(mrkdwn(args))})
	if e.OtherParams.Count() > 0 {
		text, all := paramsListing(e.OtherParams).slack()
		blocks = append(blocks, slackBlock{Type: "section", Text: new(mrkdwn(text))})
		whole = whole && all
	}

	var ctx []string
	if h := e.Headers; h != nil {
		lines, usual, shortened := headerParts(h)
		if len(lines) == 0 && h.Omitted == 0 {
			ctx = append(ctx, slackEsc(headersSummary(h, usual), 1000))
		} else {
			text, all := headersListing(h, lines, usual, shortened).slack()
			blocks = append(blocks, slackBlock{Type: "section", Text: new(mrkdwn(text))})
			whole = whole && all
		}
	}
	if !e.ExpiresAt.IsZero() {
		// <!date^…> shows the time in each reader's own time zone.
		ctx = append(ctx, fmt.Sprintf("Expires <!date^%d^{date_short_pretty} at {time}|%s>",
			e.ExpiresAt.Unix(), e.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	ctx = append(ctx, "Call ID "+slackEsc(e.CallID, 100))
	if interactive && !whole {
		ctx = append(ctx, "This message cannot show all the call sends: approve it on the approval page")
	}
	// Not verbatim, or the date would not be formatted; everything in it
	// is ours or escaped.
	blocks = append(blocks, slackBlock{
		Type:     "context",
		Elements: []any{slackText{Type: "mrkdwn", Text: strings.Join(ctx, " · ")}},
	})

	if interactive {
		blocks = append(blocks, slackInteractiveActions(e, whole))
	} else if e.ApprovalURL != "" {
		blocks = append(blocks, slackBlock{Type: "actions", Elements: []any{slackButton{
			Type:  "button",
			Text:  *plainText("Review & approve"),
			URL:   e.ApprovalURL,
			Style: "primary",
		}}})
	}

	return slackMsg{
		Text: fmt.Sprintf("Approval needed: %s on %s for %s",
			slackEsc(oneLine(title), 100), slackEsc(e.Upstream, 100), slackEsc(e.Subject, 100)),
		Blocks: blocks,
	}
}

// slackWhy is the reasons and rules as rich text, which Slack shows as
// written: a reason may quote the agent's input (a Rego rule's sprintf of
// the target), and in mrkdwn, which has no escape for "*", "_" and "~",
// that input could format the message ("~rm -rf /~" struck through). Each
// reason is one list item on one line, hidden characters spelled out, the
// whole cut to whyLimit bytes.
func slackWhy(e *Event) slackBlock {
	budget := whyLimit
	take := func(s string, max int) (string, bool) {
		v, over := cut(reveal.String(truncateRunes(oneLine(s), max)), budget, nil)
		budget -= len(v)
		return v, !over
	}
	items := make([]any, 0, len(e.Reasons))
	for _, r := range e.Reasons {
		v, whole := take(r, 500)
		if v != "" {
			items = append(items, richSection(richText{Type: "text", Text: v}))
		}
		if !whole {
			break
		}
	}
	elements := []any{richSection(richText{Type: "text", Text: "Why", Style: &richStyle{Bold: true}})}
	if len(items) > 0 {
		elements = append(elements, richList{Type: "rich_text_list", Style: "bullet", Elements: items})
	}
	if len(e.RuleIDs) > 0 && budget > 0 {
		if v, _ := take("Rules: "+strings.Join(e.RuleIDs, ", "), 500); v != "" {
			elements = append(elements, richSection(richText{Type: "text", Text: v, Style: &richStyle{Italic: true}}))
		}
	}
	return slackBlock{Type: "rich_text", Elements: elements}
}

// whyLimit bounds the reasons and rules of a message, in bytes.
const whyLimit = 2900

// The rich text elements of [slackWhy]: a text element's characters are
// shown as they are, never read as mrkdwn, links or mentions.
type (
	richSectionEl struct {
		Type     string     `json:"type"` // rich_text_section
		Elements []richText `json:"elements"`
	}
	richList struct {
		Type     string `json:"type"`  // rich_text_list
		Style    string `json:"style"` // bullet
		Elements []any  `json:"elements"`
	}
	richText struct {
		Type  string     `json:"type"` // text
		Text  string     `json:"text"`
		Style *richStyle `json:"style,omitempty"`
	}
	richStyle struct {
		Bold   bool `json:"bold,omitempty"`
		Italic bool `json:"italic,omitempty"`
	}
)

func richSection(t ...richText) richSectionEl {
	return richSectionEl{Type: "rich_text_section", Elements: t}
}

// slackCode is text in a code block, escaped and cut to limit bytes as
// escaped; shown is what of text it shows.
func slackCode(text string, limit int) (code, shown string, truncated bool) {
	shown, truncated = cut(text, limit, slackCodeRune)
	var b strings.Builder
	b.WriteString("```\n")
	for _, r := range shown {
		b.WriteString(slackCodeRune(r))
	}
	b.WriteString("\n```")
	return b.String(), shown, truncated
}

// slack is l as a section's mrkdwn text.
func (l listing) slack() (text string, whole bool) {
	var b strings.Builder
	b.WriteString("*" + l.title + "*")
	truncated := l.cut
	if len(l.lines) > 0 {
		code, _, over := slackCode(strings.Join(l.lines, "\n"), l.limit)
		b.WriteString("\n" + code)
		truncated = truncated || over
	}
	if truncated {
		b.WriteString("\n_" + l.cutNote + "_")
	}
	for _, n := range l.notes {
		b.WriteString("\n_" + slackEsc(n, 500) + "_")
	}
	return b.String(), !truncated && !l.unshown
}

// slackInteractiveActions is the actions block of an interactive message:
// Approve and Reject, which Slack posts to the approvals listener, and the
// link to the approval page when there is one. A message that could not
// show the whole call (whole false: arguments, headers, params or the
// request cut, or values the record did not keep) has no Approve: an agent
// orders its arguments and could put what matters past the cut, and
// Approve would send it unseen. Rejecting needs no more than was shown.
func slackInteractiveActions(e *Event, whole bool) slackBlock {
	var elements []any
	if whole {
		elements = append(elements, slackButton{
			Type: "button", Text: *plainText("Approve"), Style: "primary",
			ActionID: SlackApproveActionID, Value: e.CallID,
		})
	}
	elements = append(elements, slackButton{
		Type: "button", Text: *plainText("Reject"), Style: "danger",
		ActionID: SlackRejectActionID, Value: e.CallID,
	})
	if e.ApprovalURL != "" {
		elements = append(elements, slackButton{
			Type: "button", Text: *plainText("Open approval page"),
			ActionID: SlackOpenActionID, URL: e.ApprovalURL,
		})
	}
	return slackBlock{Type: "actions", BlockID: SlackActionsBlockID, Elements: elements}
}

// slackResolved is the short follow-up: "approved by X" and the like.
// Incoming webhooks cannot edit the first message, so this is a new one.
func slackResolved(e *Event) slackMsg {
	icon := outcomeIcon(e.Outcome)
	what := slackEsc(outcomeText(e), 300)
	text := fmt.Sprintf("%s %s on %s for %s: %s", icon,
		SlackCode(e.Tool, 120), slackEsc(e.Upstream, 120), slackEsc(e.Subject, 120), what)
	if e.Comment != "" {
		text += "\n>" + slackEsc(e.Comment, 1000)
	}
	return slackMsg{
		Text: fmt.Sprintf("%s %s: %s", icon, slackEsc(e.Tool, 120), what),
		Blocks: []slackBlock{
			{Type: "section", Text: new(mrkdwn(text))},
			{Type: "context", Elements: []any{mrkdwn("Call ID " + slackEsc(e.CallID, 100))}},
		},
	}
}
