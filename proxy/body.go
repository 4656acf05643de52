package proxy

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
)

// readBody reads r's body as readBody does, within the budget of body
// bytes (bodyBudget): what the body may take as it arrives (its
// Content-Length; the limit when it has none or is gzip, which decodes to
// more) is reserved before it is read, then what deciding it costs, until
// releaseBody. A body that does not fit is refused at once (503), never
// waited for; one whose cost alone passes a principal's share, 413.
func (s *Server) readBody(r *http.Request, c *call) ([]byte, *answer) {
	limit := s.cfg.MaxBodyBytes
	n := limit
	if r.ContentLength >= 0 && r.ContentLength <= limit && r.Header.Get("Content-Encoding") == "" {
		n = r.ContentLength
	}
	if n > 0 && !s.holdBody(c, n) {
		return nil, tooManyBodies()
	}
	body, a := readBody(r, limit)
	if a != nil {
		return nil, a
	}
	switch cost := bodyCost(body); {
	case cost > s.bodies.share:
		return nil, invalid(http.StatusRequestEntityTooLarge, "Body too complex",
			fmt.Sprintf("the body holds too many JSON values to decide: deciding it would take some %d MiB, more than one caller's share of limits.max_body_bytes_total (%d MiB)", cost>>20, s.bodies.share>>20))
	case cost > c.bodyHeld:
		if !s.holdBody(c, cost-c.bodyHeld) {
			return nil, tooManyBodies()
		}
	case cost < c.bodyHeld:
		s.bodies.give(c.subject.Principal, c.bodyHeld-cost)
		c.bodyHeld = cost
	}
	return body, nil
}

// holdBody reserves n more bytes of the body budget for c.
func (s *Server) holdBody(c *call, n int64) bool {
	if !s.bodies.take(c.subject.Principal, n) {
		return false
	}
	c.bodyHeld += n
	return true
}

// keepParsedBelow is what deciding a call may cost beyond its body's
// bytes for keepOnlyBody to leave it as it is: most calls' parsed input is
// a few KiB, not worth two allocations a call to give back.
const keepParsedBelow = 64 << 10

// keepOnlyBody drops a forwarded call's parsed arguments once its
// upstream answered, and gives back what deciding it cost beyond its
// body's bytes, which the outbound request keeps until the answer is
// passed on: an answer may stream for as long as the upstream writes.
func (c *call) keepOnlyBody() {
	if c.bodyHeld-int64(len(c.body)) < keepParsedBelow {
		return // holding so little costs less than copying the input
	}
	if t := c.input.Tool; t != nil && t.Arguments != nil {
		// Decided and logged (the decision log has its own copy). A copy
		// of the input without them: the decider was handed the input
		// itself, and its document is not changed after the fact.
		in, tool := *c.input, *t
		tool.Arguments = nil
		in.Tool = &tool
		c.input = &in
	}
	if keep := int64(len(c.body)); c.bodyHeld > keep {
		c.forwarding.give(c.subject.Principal, c.bodyHeld-keep)
		c.bodyHeld = keep
	}
}

// releaseBody gives back what c holds of the body budget: its call is
// decided (or forwarded), and what deciding it cost is garbage.
func (s *Server) releaseBody(c *call) {
	if c.bodyHeld > 0 {
		s.bodies.give(c.subject.Principal, c.bodyHeld)
		c.bodyHeld = 0
	}
}

func tooManyBodies() *answer {
	a := unavailable("Too many bodies being read", "toolgate is reading, deciding and forwarding as many request bodies as limits.max_body_bytes_total allows (for this caller or for all); retry shortly")
	a.retryAfter = "1"
	return &a
}

// readBody reads the whole request body, at most limit bytes after any
// decoding, and returns the decoded bytes: the bytes the policy evaluates and
// the upstream receives. A body over the limit is refused, never truncated.
// Content-Encoding gzip is decoded; any other encoding is refused, since
// toolgate could not evaluate what the upstream would decode.
func readBody(r *http.Request, limit int64) ([]byte, *answer) {
	enc, err := contentEncoding(r.Header)
	if err != nil {
		a := invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Encoding", err.Error())
		a.logDetail = fmt.Sprintf("Content-Encoding (%d bytes) is not supported (only gzip)", len(strings.Join(r.Header.Values("Content-Encoding"), ", ")))
		return nil, a
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body := http.MaxBytesReader(nil, r.Body, limit)
	raw, err := readAll(body, r.ContentLength)
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return nil, tooLarge(limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, invalid(http.StatusRequestTimeout, "Body too slow", "the request body did not arrive within limits.body_timeout")
		}
		return nil, invalid(http.StatusBadRequest, "Unreadable body", "the request body could not be read in full")
	}
	if enc == "" {
		return raw, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, invalid(http.StatusBadRequest, "Bad gzip body", "the gzip body cannot be decoded")
	}
	// Read one byte past the limit to tell "exactly the limit" from "over".
	decoded, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, invalid(http.StatusBadRequest, "Bad gzip body", "the gzip body cannot be decoded")
	}
	if int64(len(decoded)) > limit {
		return nil, tooLarge(limit)
	}
	return decoded, nil
}

func tooLarge(limit int64) *answer {
	return invalid(http.StatusRequestEntityTooLarge, "Body too large", fmt.Sprintf("the request body is larger than %d bytes (limits.max_body_bytes)", limit))
}

// contentEncoding returns "" for no encoding (or identity) and "gzip" for
// gzip; anything else, including stacked encodings, is an error.
func contentEncoding(h http.Header) (string, error) {
	vals := h.Values("Content-Encoding")
	var codings []string
	for _, v := range vals {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0:
		return "", nil
	case len(codings) == 1 && (codings[0] == "gzip" || codings[0] == "x-gzip"):
		return "gzip", nil
	}
	return "", fmt.Errorf("Content-Encoding %q is not supported (only gzip)", strings.Join(vals, ", "))
}

// checkJSONContentType refuses tool calls whose body is not declared JSON:
// a body the upstream might parse as a form or as text is not what the
// policy would see.
func checkJSONContentType(h http.Header) *answer {
	ct := h.Values("Content-Type")
	if len(ct) != 1 {
		return invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", "a tool call needs exactly one Content-Type: application/json")
	}
	mt, params, err := mime.ParseMediaType(ct[0])
	if err != nil || mt != "application/json" {
		// The agent is told what it sent; the log only its length: a
		// header toolgate refuses may hold anything.
		a := invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", fmt.Sprintf("a tool call needs Content-Type application/json, not %q", ct[0]))
		a.logDetail = fmt.Sprintf("a tool call needs Content-Type application/json, not one of %d bytes", len(ct[0]))
		return a
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", "a tool call body must be UTF-8")
	}
	// ParseMediaType reads RFC 2231 too: "charset*=utf-8''utf-8" takes the
	// place of a "charset=utf-7" beside it, which the upstream, reading
	// the plain parameter, decodes the body by. What is forwarded is the
	// header as sent, so it is held to the one form both read alike.
	if _, rest, has := strings.Cut(ct[0], ";"); has && strings.TrimSpace(rest) != "" && !plainUTF8(rest) {
		return invalid(http.StatusUnsupportedMediaType, "Unsupported Content-Type", `a tool call's Content-Type is application/json, with no parameter but charset=utf-8`)
	}
	return nil
}

// plainUTF8 reports whether params, what follows a media type's first
// ";", is the one parameter charset=utf-8 (any case, quoted or not).
func plainUTF8(params string) bool {
	name, value, ok := strings.Cut(params, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(name), "charset") {
		return false
	}
	value = strings.TrimSpace(value)
	if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
		value = value[1 : len(value)-1]
	}
	return strings.EqualFold(value, "utf-8")
}

// parseArguments decodes a tool call body strictly: invalid JSON, a top
// level that is not an object, duplicate or case-variant keys at any depth
// and invalid UTF-8 are refused rather than read one way by toolgate and
// another by the upstream.
func (s *Server) parseArguments(body []byte) (map[string]any, *answer) {
	args, err := s.json.DecodeObject(body)
	if err != nil {
		return nil, invalid(http.StatusBadRequest, "Bad JSON body", err.Error())
	}
	return args, nil
}

// readAll reads rd to its end into a buffer sized for a body of size
// bytes (-1: unknown), so that a body of known length takes its length
// once and not the doublings io.ReadAll grows by.
func readAll(rd io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return io.ReadAll(rd)
	}
	// One byte more, so that the read that meets the end needs no growth.
	buf := make([]byte, 0, size+1)
	for {
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			// Longer than announced: net/http refuses that before it
			// gets here, but a reader may not.
			rest, err := io.ReadAll(rd)
			return append(buf, rest...), err
		}
	}
}
