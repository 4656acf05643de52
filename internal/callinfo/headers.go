package callinfo

import (
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Bounds of the headers an Info lists: an agent chooses how many headers
// it sends and how long they are (up to the listener's 64 KiB), and every
// page, message and API answer shows the list.
const (
	// MaxHeaders is how many headers (one per value) an Info lists.
	MaxHeaders = 64
	// MaxHeaderName is the longest name listed; MaxHeaderValue the
	// longest value. Longer ones are cut and end with "…"; a cut value
	// has its Size.
	MaxHeaderName  = 256
	MaxHeaderValue = 1024
	// MaxHeadersBytes bounds the names and values listed, together.
	MaxHeadersBytes = 16 << 10
)

// Headers are the request headers a parked call will send upstream once
// approved that its agent chose: every header of the stored request but
// those toolgate writes itself. Headers past MaxHeaders or
// MaxHeadersBytes are sent but not listed (the list is the first ones by
// name): Omitted counts them.
type Headers struct {
	// List is sorted by name; a header sent with two values is listed
	// twice, in the order sent.
	List    []Header `json:"list"`
	Omitted int      `json:"omitted,omitempty"`
}

// Header is one header line a parked call will send.
type Header struct {
	Name string `json:"name"`
	// Value is the value sent, cut to MaxHeaderValue bytes; "" when
	// Hidden.
	Value string `json:"value,omitempty"`
	// Hidden is true when the name marks a credential (Cookie, X-Api-Key,
	// X-Auth-Key, a name holding "token", "session" or "secret", ...: the
	// proxy's rule, which the caller passes as hide): approvers learn that it is
	// sent and how long it is, never its value, which is another system's
	// secret.
	Hidden bool `json:"hidden,omitempty"`
	// Size is the length in bytes of a value that is hidden or cut.
	Size int `json:"size,omitempty"`
	// NotUTF8 is true when the value sent holds bytes that are not UTF-8:
	// Value shows each of them as \xNN (showBytes).
	NotUTF8 bool `json:"not_utf8,omitempty"`
}

// Count is how many header lines are sent: those listed and those not.
func (h *Headers) Count() int {
	if h == nil {
		return 0
	}
	return len(h.List) + h.Omitted
}

// HeadersOf lists the headers h will send, but for the names skip
// reports (toolgate's own), with the values of the names hide reports
// hidden. A value's bytes that are not UTF-8 are shown as \xNN, and the
// header is marked NotUTF8; a name's have U+FFFD in their place (Go's
// server refuses such names). It never returns nil: a call parked with no
// headers lists none.
func HeadersOf(h map[string][]string, skip, hide func(name string) bool) *Headers {
	names := make([]string, 0, len(h))
	for k := range h {
		if !skip(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	out := &Headers{List: []Header{}}
	size := 0
	for _, k := range names {
		vs := h[k]
		if out.Omitted > 0 {
			out.Omitted += len(vs) // the list is the first headers by name
			continue
		}
		hidden := hide(k)
		name := CutTo(strings.ToValidUTF8(k, "\uFFFD"), MaxHeaderName)
		for _, v := range vs {
			hd := Header{Name: name, Hidden: hidden}
			if hidden {
				hd.Size = len(v)
			} else {
				shown, bad := showBytes(v)
				hd.Value, hd.NotUTF8 = CutTo(shown, MaxHeaderValue), bad
				if len(shown) > MaxHeaderValue {
					hd.Size = len(v)
				}
			}
			if n := len(hd.Name) + len(hd.Value); len(out.List) >= MaxHeaders || size+n > MaxHeadersBytes {
				out.Omitted++
				continue
			}
			size += len(hd.Name) + len(hd.Value)
			out.List = append(out.List, hd)
		}
	}
	return out
}

// showBytes is v with each byte that is not UTF-8 written as \xNN, and
// whether there was one: replacing a run of them with one U+FFFD would
// show an approver neither what is sent nor how much.
func showBytes(v string) (string, bool) {
	if utf8.ValidString(v) {
		return v, false
	}
	return string(appendShown(make([]byte, 0, len(v)+8), v, false)), true
}

// ShowBody is a body that is not JSON as approvers see it: as it is when it
// is UTF-8; else with each byte that is not written as \xNN and each
// backslash as \\, so that no byte sent is folded into another (a run of
// them as one U+FFFD shows neither what is sent nor how much) and a "\xE9"
// the agent wrote stays told apart from the byte.
func ShowBody(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(appendShown(make([]byte, 0, len(b)+16), string(b), true))
}

// appendShown appends s with each byte that is not UTF-8 as \xNN, and
// each backslash as \\ when escapeBackslash.
func appendShown(out []byte, s string, escapeBackslash bool) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = append(out, '\\', 'x', hex[s[i]>>4], hex[s[i]&0xf])
		case escapeBackslash && s[i] == '\\':
			out = append(out, '\\', '\\')
		default:
			out = append(out, s[i:i+n]...)
		}
		i += n
	}
	return out
}

// CutTo returns s cut to max bytes, at a rune boundary, ending with "…"
// when it was cut.
func CutTo(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ellipsis = "…"
	n := max - len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}

// clone returns a deep copy of h.
func (h *Headers) clone() *Headers {
	if h == nil {
		return nil
	}
	c := *h
	c.List = slices.Clone(h.List) // its strings are never changed in place
	return &c
}

// validUTF8 reports whether every name and value is UTF-8 (encoding/json
// would read any other back changed).
func (h *Headers) validUTF8() bool {
	if h == nil {
		return true
	}
	for _, hd := range h.List {
		if !utf8.ValidString(hd.Name) || !utf8.ValidString(hd.Value) {
			return false
		}
	}
	return true
}
