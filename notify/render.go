package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/internal/reveal"
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
		ev := uncheckedCloudEvent(e) // appendJSON checks the arguments as it copies them
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

// prettyArguments indents the arguments for people, with what hides or
// reorders text spelled out (reveal.String: a right-to-left override or a
// zero-width space in a value must not pass unseen in a chat message as
// it would not on the approval page). Arguments that are not JSON are
// shown as they are, spelled out too: a message is a display, not a
// contract. Only the first prettyBytes of the indented text are made:
// a message shows argumentsLimit characters of them, and indenting a
// megabyte of deeply nested arrays whole made tens of megabytes (two
// spaces a level before every element) for each message. complete is
// false when the text was cut there.
func prettyArguments(args json.RawMessage) (text string, complete bool) {
	if len(args) == 0 {
		return "(none)", true
	}
	if !json.Valid(args) {
		raw, truncated := cut(string(args), prettyBytes, nil)
		return reveal.String(raw), !truncated
	}
	indented, complete := indentPrefix(args, prettyBytes)
	return reveal.String(indented), complete
}

// prettyBytes bounds the indented arguments a message is made from: well
// past argumentsLimit, so that cut still finds what it shows whatever
// reveal.String spells out.
const prettyBytes = 4*argumentsLimit + 1024

// indentPrefix writes valid JSON src as json.Indent does with an indent of
// two spaces, until limit bytes are written; complete is false when it
// stopped there. It makes no more than limit bytes whatever src's size.
func indentPrefix(src []byte, limit int) (out string, complete bool) {
	var b strings.Builder
	b.Grow(min(limit, 2*len(src)+64))
	depth, inString, escaped := 0, false, false
	newline := func() {
		b.WriteByte('\n')
		for range depth {
			b.WriteString("  ")
		}
	}
	for i := 0; i < len(src); i++ {
		if b.Len() >= limit {
			s, _ := cut(b.String(), limit, nil)
			return s, false
		}
		c := src[i]
		if inString {
			b.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			// insignificant whitespace: indentation replaces it
		case '"':
			inString = true
			b.WriteByte(c)
		case '{', '[':
			b.WriteByte(c)
			if j := nextSignificant(src, i+1); j < len(src) && (src[j] == '}' || src[j] == ']') {
				b.WriteByte(src[j]) // an empty object or array stays on its line
				i = j
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			b.WriteByte(c)
		case ',':
			b.WriteByte(c)
			newline()
		case ':':
			b.WriteString(": ")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// nextSignificant is the index of the first byte of src from i on that is
// not JSON whitespace.
func nextSignificant(src []byte, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
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

// requestLimit bounds the request line a message shows, in runes.
const requestLimit = 1000

// requestLine is e's HTTP request as messages show it, "DELETE
// /admin/users/42?cascade=all" (with the JSON-RPC method after it for an
// MCP call), and whether it is longer than requestLimit (a message then
// shows a part). "" for an event that carries none.
func requestLine(e *Event) (line string, cut bool) {
	if e.Method == "" && e.Path == "" {
		return "", false
	}
	line = strings.TrimSpace(e.Method + " " + e.Path)
	if e.MCPMethod != "" {
		line += " · " + e.MCPMethod
	}
	return line, utf8.RuneCountInString(oneLine(line)) > requestLimit
}

// oneLine folds line breaks so a value cannot start a new line of its own
// (a fake "Approved by" line, for example): each run of ASCII white space
// becomes one space. Other breaks and spaces are left for reveal.String,
// which every caller applies after it: U+0085, U+2028 and U+2029 are
// spelled out there, as on the approval page, rather than shown as a space.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, asciiSpace), " ")
}

// shownWhole reports whether s is shown as it is when cut to max runes on
// one line: nothing cut, no run of spaces folded.
func shownWhole(s string, max int) bool { return truncateRunes(oneLine(s), max) == s }

func asciiSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
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

// headersLimit and paramsLimit bound the header lines and the other
// params' lines a Slack or Teams message shows, in bytes (as escaped, for
// Slack). Each of them and argumentsLimit is a Slack section of its own,
// well within Slack's 3,000 characters a section, and the three together,
// 5,500 bytes, are well within Teams' ~28 KB a card. The approval page
// lists every header and param it keeps.
const (
	headersLimit = 1500
	paramsLimit  = 1500
)

// paramValueMax is the longest value of one param a message shows, in
// runes; a longer one is cut and ends with "…", so that one large value
// cannot crowd the others out of paramsLimit.
const paramValueMax = 300

// headerParts splits h for a message: a line "Name: value" for every
// header beyond the usual ("Name: (hidden: N bytes)" for a credential),
// and the names of the usual ones, once each.
func headerParts(h *Headers) (lines, usual []string, shortened bool) {
	for _, hd := range h.List {
		if callinfo.UsualHeader(hd.Name) {
			if len(usual) == 0 || usual[len(usual)-1] != hd.Name {
				usual = append(usual, hd.Name)
			}
			continue
		}
		name := reveal.String(truncateRunes(oneLine(hd.Name), 100))
		shortened = shortened || !shownWhole(hd.Name, 100)
		switch {
		case hd.Hidden:
			lines = append(lines, name+": "+sizeText("hidden", hd.Size))
		default:
			v := truncateRunes(oneLine(hd.Value), 200)
			shortened = shortened || v != oneLine(hd.Value)
			lines = append(lines, name+": "+reveal.String(v))
		}
	}
	return lines, usual, shortened
}

// sizeText is "(what: N bytes)".
func sizeText(what string, size int) string {
	if size == 1 {
		return "(" + what + ": 1 byte)"
	}
	return fmt.Sprintf("(%s: %d bytes)", what, size)
}

// headersSummary is the one line of a call that sends only the usual
// headers, or none.
func headersSummary(h *Headers, usual []string) string {
	if len(usual) == 0 {
		return "Headers sent: none of the agent's"
	}
	return fmt.Sprintf("Headers sent: %d, all usual: %s", h.Count(), strings.Join(usual, ", "))
}

// omittedText says how many headers or params (one, many: the word for
// each) are sent that nothing lists.
func omittedText(n int, one, many string) string {
	if n == 1 {
		return "1 more " + one + " is sent that neither this message nor the approval page lists."
	}
	return fmt.Sprintf("%d more %s are sent that neither this message nor the approval page lists.", n, many)
}

// Count is how many header lines are sent: those listed and those not.
func (h *Headers) Count() int { return len(h.List) + h.Omitted }

// A listing is a message's section of "name: value" lines that approving
// sends beside the arguments: a call's headers or its other params. Its
// lines go in a code block (Slack) or a text run (Teams), cut to limit
// bytes; the title and notes are toolgate's words, or escaped by each
// format.
type listing struct {
	title   string
	lines   []string
	limit   int
	cut     bool   // a line is shortened already
	cutNote string // said when anything is cut
	notes   []string
	// unshown: something sent is not in the lines at all (values the
	// call's record did not keep, entries past the display bounds).
	unshown bool
}

// headersListing is the section of a call that sends headers beyond the
// usual: those with their values, and the usual by name.
func headersListing(h *Headers, lines, usual []string, shortened bool) listing {
	l := listing{
		title: fmt.Sprintf("Headers sent (%d)", h.Count()), lines: lines, limit: headersLimit,
		cut:     shortened, // a value cut short says so, as a cut list does
		cutNote: "Truncated: the approval page lists them all.",
	}
	if len(usual) > 0 {
		l.notes = append(l.notes, "Also the usual: "+strings.Join(usual, ", ")+".")
	}
	if h.Omitted > 0 {
		l.notes = append(l.notes, omittedText(h.Omitted, "header", "headers"))
		l.unshown = true
	}
	return l
}

// paramsListing is the section of a call that sends other params: each
// member with its value, cut to paramValueMax ("(value not shown: N
// bytes)" for a value the call's record did not keep, as the approval
// page shows it).
func paramsListing(p *Params) listing {
	l := listing{
		title: fmt.Sprintf("Other parameters sent (%d)", p.Count()), limit: paramsLimit,
		cutNote: "Truncated: approving sends them whole; the approval page shows their values.",
	}
	for _, m := range p.List {
		name := reveal.String(truncateRunes(oneLine(m.Name), 100))
		l.cut = l.cut || !shownWhole(m.Name, 100)
		if m.Value == "" {
			l.lines = append(l.lines, name+": "+sizeText("value not shown", m.Size))
			l.unshown = true
			continue
		}
		v := lineBreaks.Replace(m.Value)
		if utf8.RuneCountInString(v) > paramValueMax {
			v, l.cut = truncateRunes(v, paramValueMax), true
		}
		l.lines = append(l.lines, name+": "+reveal.String(v))
	}
	if p.Omitted > 0 {
		l.notes = append(l.notes, omittedText(p.Omitted, "parameter", "parameters"))
		l.unshown = true
	}
	return l
}

// lineBreaks folds the line breaks a value may hold (compact JSON escapes
// \n and \r, and encoding/json U+2028 and U+2029, but not U+0085), so a
// value keeps to its line; its spaces are left as they are, unlike
// oneLine's, as they are part of what approving sends.
var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\v", " ", "\f", " ", "\u0085", " ", "\u2028", " ", "\u2029", " ")

// Count is how many members are sent: those listed and those not.
func (p *Params) Count() int {
	if p == nil {
		return 0
	}
	return len(p.List) + p.Omitted
}

// names are the names of the members listed, then "…" when some are not.
func (p *Params) names() []string {
	if p.Count() == 0 {
		return nil
	}
	names := make([]string, 0, len(p.List)+1)
	for _, m := range p.List {
		names = append(names, m.Name)
	}
	if p.Omitted > 0 {
		names = append(names, "…")
	}
	return names
}

// truncatedNote says how much of the arguments a message shows: shown of
// pretty (prettyArguments), which is all of them when complete, else a
// prefix of arguments of argBytes bytes.
func truncatedNote(shown, pretty string, complete bool, argBytes int) string {
	if complete {
		return fmt.Sprintf("Truncated: %d of %d characters shown. The approval page shows them all.",
			utf8.RuneCountInString(shown), utf8.RuneCountInString(pretty))
	}
	return fmt.Sprintf("Truncated: %d characters shown, of arguments of %d bytes. The approval page shows them all.",
		utf8.RuneCountInString(shown), argBytes)
}
