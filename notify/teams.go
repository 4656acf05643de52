package notify

import (
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/reveal"
)

// A Microsoft Teams message for a Workflows (Power Automate) webhook: one
// Adaptive Card 1.4 attachment. Webhook cards cannot carry Action.Submit
// or Action.Execute, and toolgate would not want them: the one action is
// Action.OpenUrl to the approval page, where approving is a POST, so the
// Teams and Outlook link previewers, which GET, cannot approve.
//
// Teams renders a markdown subset in TextBlock and FactSet values, so
// untrusted values in facts are backslash-escaped, and free text (reasons,
// arguments, comments) goes into RichTextBlock TextRuns, which Adaptive
// Cards never treat as markdown.
type teamsMsg struct {
	Type        string            `json:"type"` // message
	Attachments []teamsAttachment `json:"attachments"`
}

type teamsAttachment struct {
	ContentType string    `json:"contentType"`
	ContentURL  *string   `json:"contentUrl"` // null, as the Workflows examples send it
	Content     teamsCard `json:"content"`
}

type teamsCard struct {
	Schema  string         `json:"$schema"`
	Type    string         `json:"type"` // AdaptiveCard
	Version string         `json:"version"`
	MSTeams map[string]any `json:"msteams,omitempty"`
	Body    []any          `json:"body"`
	Actions []teamsAction  `json:"actions,omitempty"`
}

type teamsAction struct {
	Type  string `json:"type"` // Action.OpenUrl
	Title string `json:"title"`
	URL   string `json:"url"`
	Style string `json:"style,omitempty"`
}

type teamsFact struct {
	Title string `json:"title"`
	Value string `json:"value"`
}

// teamsHeading is card text of ours only, so markdown does no harm.
func teamsHeading(s string) map[string]any {
	return map[string]any{"type": "TextBlock", "text": s, "weight": "Bolder", "size": "Medium", "wrap": true}
}

func teamsLabel(s string) map[string]any {
	return map[string]any{"type": "TextBlock", "text": s, "weight": "Bolder", "wrap": true, "spacing": "Medium"}
}

func teamsSubtle(s string) map[string]any {
	return map[string]any{"type": "TextBlock", "text": s, "isSubtle": true, "size": "Small", "wrap": true}
}

// teamsRich shows untrusted text as it is: TextRuns are never markdown.
func teamsRich(s string, monospace bool) map[string]any {
	run := map[string]any{"type": "TextRun", "text": s}
	if monospace {
		run["fontType"] = "Monospace"
	}
	return map[string]any{"type": "RichTextBlock", "inlines": []any{run}}
}

// teamsMarkdown escapes the markdown Teams honours in fact values (links,
// emphasis, code) and folds line breaks.
var teamsMarkdown = strings.NewReplacer(
	`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "~", `\~`,
	"[", `\[`, "]", `\]`, "(", `\(`, ")", `\)`, "<", `\<`, ">", `\>`, "#", `\#`,
)

func teamsFactValue(s string, max int) string {
	if s == "" {
		return "—"
	}
	return teamsMarkdown.Replace(reveal.String(truncateRunes(oneLine(s), max)))
}

func teamsMessage(e *Event) teamsMsg {
	card := teamsCard{
		Schema:  "http://adaptivecards.io/schemas/adaptive-card.json",
		Type:    "AdaptiveCard",
		Version: "1.4",
		MSTeams: map[string]any{"width": "Full"},
	}
	if e.Type == TypeResolved {
		card.Body = teamsResolved(e)
	} else {
		card.Body, card.Actions = teamsRequested(e)
	}
	return teamsMsg{
		Type: "message",
		Attachments: []teamsAttachment{{
			ContentType: "application/vnd.microsoft.card.adaptive",
			Content:     card,
		}},
	}
}

func teamsRequested(e *Event) ([]any, []teamsAction) {
	facts := []teamsFact{
		{"Tool", teamsFactValue(e.Tool, 300)},
		{"Upstream", teamsFactValue(e.Upstream, 300)},
		{"Caller", teamsFactValue(e.Subject, 300)},
	}
	if e.ToolTarget != "" || e.TargetsBeyond {
		facts = append(facts, teamsFact{"Target", teamsFactValue(e.ToolTarget, 300) + beyondNote(e)})
	}
	if req, _ := requestLine(e); req != "" {
		facts = append(facts, teamsFact{"Request", teamsFactValue(req, requestLimit)})
	}
	if !e.ExpiresAt.IsZero() {
		facts = append(facts, teamsFact{"Expires", e.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC")})
	}
	facts = append(facts, teamsFact{"Call ID", teamsFactValue(e.CallID, 100)})
	body := []any{
		teamsHeading("Approval needed"),
		map[string]any{"type": "FactSet", "facts": facts},
	}

	if len(e.Reasons) > 0 || len(e.RuleIDs) > 0 {
		lines := make([]string, 0, len(e.Reasons)+1)
		for _, r := range e.Reasons {
			lines = append(lines, "• "+reveal.String(truncateRunes(oneLine(r), 500)))
		}
		if len(e.RuleIDs) > 0 {
			lines = append(lines, "Rules: "+reveal.String(truncateRunes(strings.Join(e.RuleIDs, ", "), 500)))
		}
		body = append(body, teamsLabel("Why"), teamsRich(strings.Join(lines, "\n"), false))
	}

	pretty, complete := prettyArguments(e.Arguments)
	shown, truncated := cut(pretty, argumentsLimit, nil)
	body = append(body, teamsLabel("Arguments"), teamsRich(shown, true))
	if truncated || !complete {
		body = append(body, teamsSubtle(truncatedNote(shown, pretty, complete, len(e.Arguments))))
	}

	if e.OtherParams.Count() > 0 {
		body = append(body, paramsListing(e.OtherParams).teams()...)
	}
	if h := e.Headers; h != nil {
		body = append(body, teamsHeaders(h)...)
	}

	var actions []teamsAction
	if e.ApprovalURL != "" {
		actions = []teamsAction{{Type: "Action.OpenUrl", Title: "Review & approve", URL: e.ApprovalURL, Style: "positive"}}
	}
	return body, actions
}

// teamsHeaders shows the headers of a call: those beyond the usual with
// their values, in a text run (never markdown), and the usual by name.
func teamsHeaders(h *Headers) []any {
	lines, usual, shortened := headerParts(h)
	if len(lines) == 0 && h.Omitted == 0 {
		return []any{teamsSubtle(teamsMarkdown.Replace(headersSummary(h, usual)))}
	}
	return headersListing(h, lines, usual, shortened).teams()
}

// teams is l as card elements: a label, the lines in a text run (never
// markdown), and the notes.
func (l listing) teams() []any {
	body := []any{teamsLabel(l.title)}
	truncated := l.cut
	if len(l.lines) > 0 {
		shown, over := cut(strings.Join(l.lines, "\n"), l.limit, nil)
		body = append(body, teamsRich(shown, true))
		truncated = truncated || over
	}
	if truncated {
		body = append(body, teamsSubtle(l.cutNote))
	}
	for _, n := range l.notes {
		body = append(body, teamsSubtle(teamsMarkdown.Replace(n)))
	}
	return body
}

func teamsResolved(e *Event) []any {
	heading := map[string]string{
		"approved": "Approved", "rejected": "Rejected", "expired": "Expired", "cancelled": "Cancelled",
	}[e.Outcome]
	if heading == "" {
		heading = "Resolved"
	}
	facts := []teamsFact{
		{"Outcome", teamsFactValue(outcomeText(e), 300)},
		{"Tool", teamsFactValue(e.Tool, 300)},
		{"Upstream", teamsFactValue(e.Upstream, 300)},
		{"Caller", teamsFactValue(e.Subject, 300)},
		{"Call ID", teamsFactValue(e.CallID, 100)},
	}
	if !e.Time.IsZero() {
		facts = append(facts, teamsFact{"At", e.Time.UTC().Format(time.DateTime + " UTC")})
	}
	body := []any{
		teamsHeading(outcomeIcon(e.Outcome) + " " + heading),
		map[string]any{"type": "FactSet", "facts": facts},
	}
	if e.Comment != "" {
		body = append(body, teamsLabel("Comment"), teamsRich(truncateRunes(e.Comment, 1000), false))
	}
	return body
}
