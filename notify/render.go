package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// argumentsLimit bounds the arguments shown in a Slack or Teams message:
// Slack refuses a section over 3,000 characters and Teams a card over
// ~28 KB. The approval page always shows them whole.
const argumentsLimit = 2500

// render builds the request body for format; it returns the body and its
// Content-Type. slackInteractive is [Options.SlackInteractive].
func render(format string, e *Event, slackInteractive bool) ([]byte, string, error) {
	var v any
	contentType := "application/json"
	switch format {
	case FormatCloudEvents:
		ev := cloudEvent(e)
		body, err := ev.appendJSON(make([]byte, 0, 1024))
		if err != nil {
			return nil, "", fmt.Errorf("encoding %s body: %w", format, err)
		}
		return body, "application/cloudevents+json", nil
	case FormatSlack:
		v = slackMessage(e, slackInteractive)
	case FormatTeams:
		v = teamsMessage(e)
	default:
		return nil, "", fmt.Errorf("unknown format %q", format)
	}
	body, err := encodeJSON(v)
	if err != nil {
		return nil, "", fmt.Errorf("encoding %s body: %w", format, err)
	}
	return body, contentType, nil
}

// encodeJSON marshals v without HTML escaping, so URLs keep their "&"
// rather than "\u0026" for whoever reads the raw payload.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// prettyArguments indents the arguments for people. Arguments that are not
// JSON are shown as they are: a message is a display, not a contract.
func prettyArguments(args json.RawMessage) string {
	if len(args) == 0 {
		return "(none)"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, args, "", "  "); err != nil {
		return string(args)
	}
	return buf.String()
}

// cut returns the longest prefix of s whose escaped form, escape applied
// rune by rune, fits in limit bytes, and whether anything was cut. It cuts
// at rune boundaries, so the result stays valid UTF-8.
func cut(s string, limit int, escape func(rune) string) (string, bool) {
	n := 0
	for i, r := range s {
		size := utf8.RuneLen(r) // an invalid byte counts as U+FFFD, 3 bytes: an overestimate
		if escape != nil {
			size = len(escape(r))
		}
		if n+size > limit {
			return s[:i], true
		}
		n += size
	}
	return s, false
}

// oneLine folds line breaks so a value cannot start a new line of its own
// (a fake "Approved by" line, for example).
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// truncateRunes shortens s to at most max runes, marking the cut with "…".
func truncateRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// outcomeText is the resolved event's outcome for people.
func outcomeText(e *Event) string {
	by := ""
	if e.DecidedBy != "" {
		by = " by " + e.DecidedBy
	}
	switch e.Outcome {
	case "approved":
		return "approved" + by
	case "rejected":
		return "rejected" + by
	case "expired":
		return "expired: nobody decided in time"
	case "cancelled":
		return "cancelled" + by
	}
	return "resolved (" + e.Outcome + ")" + by
}

// outcomeIcon marks the outcome for quick scanning in a channel.
func outcomeIcon(outcome string) string {
	switch outcome {
	case "approved":
		return "✅"
	case "rejected":
		return "❌"
	case "expired":
		return "⌛"
	}
	return "🚫"
}

// headersLimit bounds the header lines a Slack or Teams message shows:
// with argumentsLimit, well within Slack's 3,000 characters a section and
// Teams' ~28 KB a card. The approval page lists every header it keeps.
const headersLimit = 1500

// usualHeaders are the headers most clients send with every call. A
// message names them only; a call that sends no others gets one line.
var usualHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true, "Content-Type": true, "User-Agent": true,
	"Idempotency-Key": true, "Mcp-Protocol-Version": true, "Mcp-Session-Id": true, "Traceparent": true, "Tracestate": true,
}

// headerParts splits h for a message: a line "Name: value" for every
// header beyond the usual ("Name: (hidden: N bytes)" for a credential),
// and the names of the usual ones, once each.
func headerParts(h *Headers) (lines, usual []string) {
	for _, hd := range h.List {
		if usualHeaders[hd.Name] {
			if len(usual) == 0 || usual[len(usual)-1] != hd.Name {
				usual = append(usual, hd.Name)
			}
			continue
		}
		name := truncateRunes(oneLine(hd.Name), 100)
		switch {
		case hd.Hidden:
			lines = append(lines, name+": "+hiddenText(hd.Size))
		default:
			lines = append(lines, name+": "+truncateRunes(oneLine(hd.Value), 200))
		}
	}
	return lines, usual
}

func hiddenText(size int) string {
	if size == 1 {
		return "(hidden: 1 byte)"
	}
	return fmt.Sprintf("(hidden: %d bytes)", size)
}

// headersSummary is the one line of a call that sends only the usual
// headers, or none.
func headersSummary(h *Headers, usual []string) string {
	if len(usual) == 0 {
		return "Headers sent: none of the agent's"
	}
	return fmt.Sprintf("Headers sent: %d, all usual: %s", h.Count(), strings.Join(usual, ", "))
}

// omittedText says how many headers are sent that nothing lists.
func omittedText(h *Headers) string {
	if h.Omitted == 1 {
		return "1 more header is sent that neither this message nor the approval page lists."
	}
	return fmt.Sprintf("%d more headers are sent that neither this message nor the approval page lists.", h.Omitted)
}

// Count is how many header lines are sent: those listed and those not.
func (h *Headers) Count() int { return len(h.List) + h.Omitted }

// otherParamsNote follows the names of a call's other parameters.
const otherParamsNote = "Approving sends them with the arguments; the approval page shows their values."
