package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

// sseEvent is one event of a text/event-stream body: its data (the values
// of its data lines joined by "\n", as the SSE specification reads them)
// and its other lines (event, id, retry, comments), kept as sent.
type sseEvent struct {
	other   []string
	data    string
	hasData bool
}

// name is the event's type: the value of its last event field, "" when
// it has none (a client reads it as "message").
func (ev sseEvent) name() string {
	name := ""
	for _, l := range ev.other {
		if v, ok := strings.CutPrefix(l, "event"); ok && (v == "" || v[0] == ':') {
			name = strings.TrimPrefix(strings.TrimPrefix(v, ":"), " ")
		}
	}
	return name
}

// bom is the byte order mark a stream may start with, which the SSE
// specification's decoder drops (TextDecoderStream does): left in, the
// first line would not read as the field it is to toolgate alone.
const bom = "\ufeff"

// Some SSE readers end lines at more than the specification's CR, LF and
// CRLF: Python's str.splitlines, which httpx's line decoder uses (and so
// httpx-sse before 0.4.2, the MCP Python SDK client's reader), also ends
// them at \v, \f, \x1c, \x1d, \x1e, U+0085, U+2028 and U+2029. A line
// holding one reads as several there, so a line toolgate reads as a
// comment or a field could hold a data line such a client reads. A
// rewritten stream drops such lines (splitsElsewhere), and the list filters
// write their JSON with the three that JSON strings may hold escaped
// (escapeLineSeparators).
const elsewhereBreaks = "\v\f\x1c\x1d\x1e\u0085\u2028\u2029"

// splitsElsewhere reports whether a reader could split line where the
// SSE specification does not.
func splitsElsewhere(line string) bool { return strings.ContainsAny(line, elsewhereBreaks) }

// escapeLineSeparators returns b, valid JSON, with U+0085, U+2028 and
// U+2029 written as escapes: the same JSON (raw, they can only stand in a
// string), which no reader splits. b is returned as it is when it holds
// none.
func escapeLineSeparators(b []byte) []byte {
	if !bytes.ContainsAny(b, "\u0085\u2028\u2029") {
		return b
	}
	return []byte(separatorEscapes.Replace(string(b)))
}

var separatorEscapes = strings.NewReplacer("\u0085", `\u0085`, "\u2028", `\u2028`, "\u2029", `\u2029`)

// sseEvents reads a whole text/event-stream body. Lines end with "\n",
// "\r\n" or "\r"; an empty line ends an event; a field's value loses one
// leading space. A data field split over several lines is one value, which
// is what a JSON-RPC message spread over data lines needs.
func sseEvents(body []byte) []sseEvent {
	return sseEventsOf(strings.TrimPrefix(string(body), bom))
}

// sseEventsOf reads the events of text, a part of a stream that may not
// be its start: a byte order mark in it is no mark.
func sseEventsOf(text string) []sseEvent {
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	var (
		out  []sseEvent
		ev   sseEvent
		data []string
	)
	flush := func() {
		if ev.hasData || len(ev.other) > 0 {
			ev.data = strings.Join(data, "\n")
			out = append(out, ev)
		}
		ev, data = sseEvent{}, nil
	}
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			flush()
			continue
		}
		if strings.HasPrefix(line, bom) {
			// Not a stream's first line (sseEvents drops that mark): a
			// field every reader ignores, dropped so that no rewriting
			// can bring it to the start of an answer, where a reader
			// would drop the mark and read the field.
			continue
		}
		if v, ok := strings.CutPrefix(line, "data"); ok && (v == "" || v[0] == ':') {
			v = strings.TrimPrefix(strings.TrimPrefix(v, ":"), " ")
			data, ev.hasData = append(data, v), true
			continue
		}
		if splitsElsewhere(line) {
			continue // read as more lines by some readers (elsewhereBreaks)
		}
		ev.other = append(ev.other, line)
	}
	flush()
	return out
}

// appendSSE writes an event: its other lines, then its data, one data line
// per line of it, then the empty line that ends it.
func appendSSE(b []byte, other []string, data string, hasData bool) []byte {
	for _, l := range other {
		b = append(b, l...)
		b = append(b, '\n')
	}
	if hasData {
		for l := range strings.SplitSeq(data, "\n") {
			b = append(b, "data: "...)
			b = append(b, l...)
			b = append(b, '\n')
		}
	}
	return append(b, '\n')
}

// rewriteSSE applies f to the data of every event of an SSE body that
// has data, and writes the body again.
func rewriteSSE(body []byte, f func(data []byte) []byte) []byte {
	return rewriteSSEEvents(body, func(_ string, data []byte) []byte { return f(data) })
}

// rewriteSSEEvents is rewriteSSE with each event's name (sseEvent.name)
// given to f.
func rewriteSSEEvents(body []byte, f func(name string, data []byte) []byte) []byte {
	return rewriteEvents(sseEvents(body), f)
}

// rewriteEvents writes evs again, each event's data passed through f.
func rewriteEvents(evs []sseEvent, f func(name string, data []byte) []byte) []byte {
	var out []byte
	for _, ev := range evs {
		data := ev.data
		if ev.hasData && strings.TrimSpace(data) != "" {
			data = string(f(ev.name(), []byte(data)))
		}
		out = appendSSE(out, ev.other, data, ev.hasData)
	}
	return out
}

// sseFilter is an SSE body read event by event, each event's data passed
// through f as rewriteSSEEvents does: for a stream that stays open, which cannot
// be read whole first. A comment or an empty line outside an event goes on
// at once (a keep-alive must reach the client while no event comes).
type sseFilter struct {
	body   io.ReadCloser
	br     *bufio.Reader
	f      func(name string, data []byte) []byte
	limit  int
	begun  bool   // a byte was read: a byte order mark can only come first
	event  []byte // the lines of the event being read
	line   []byte // the line being read
	skipLF bool   // the last line ended with "\r": a "\n" next is part of its end
	out    bytes.Buffer
	err    error
}

// errSSEEventTooLarge ends a stream whose event outgrows the filter's limit.
var errSSEEventTooLarge = errors.New("an SSE event larger than the filter takes")

func newSSEFilter(body io.ReadCloser, limit int, f func(name string, data []byte) []byte) io.ReadCloser {
	return &sseFilter{body: body, br: bufio.NewReader(body), f: f, limit: limit}
}

func (s *sseFilter) Read(p []byte) (int, error) {
	for s.out.Len() == 0 && s.err == nil {
		c, err := s.br.ReadByte()
		if err != nil {
			s.end() // a last event without its empty line
			s.err = err
			break
		}
		if s.skipLF {
			s.skipLF = false
			if c == '\n' {
				continue
			}
		}
		if c != '\n' && c != '\r' {
			s.line = append(s.line, c)
			if !s.begun {
				// The stream's first bytes: a byte order mark is dropped
				// once read whole, anything else ends the check.
				switch {
				case string(s.line) == bom:
					s.line, s.begun = s.line[:0], true
				case !strings.HasPrefix(bom, string(s.line)):
					s.begun = true
				}
			}
			if len(s.event)+len(s.line) > s.limit {
				s.err = errSSEEventTooLarge
			}
			continue
		}
		// A line ends: "\n", "\r\n" or "\r" (the SSE specification's three).
		s.begun = true
		s.skipLF = c == '\r'
		switch {
		case len(s.line) == 0 && len(s.event) == 0:
			s.out.WriteByte('\n') // an empty line outside an event
		case len(s.line) == 0:
			s.end()
		case len(s.event) == 0 && s.line[0] == ':':
			if !splitsElsewhere(string(s.line)) { // as sseEventsOf drops it
				s.out.Write(s.line) // a comment outside an event
				s.out.WriteByte('\n')
			}
		default:
			s.event = append(append(s.event, s.line...), '\n')
		}
		s.line = s.line[:0]
	}
	if s.out.Len() > 0 {
		return s.out.Read(p)
	}
	return 0, s.err
}

// end writes the event read so far, rewritten, and starts the next.
func (s *sseFilter) end() {
	if len(s.line) > 0 {
		s.event = append(append(s.event, s.line...), '\n')
		s.line = s.line[:0]
	}
	if len(s.event) > 0 {
		s.out.Write(rewriteEvents(sseEventsOf(string(s.event)), s.f)) // its mark, if any, was dropped as read
		s.event = s.event[:0]
	}
}

func (s *sseFilter) Close() error { return s.body.Close() }
