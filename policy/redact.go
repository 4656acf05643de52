package policy

import (
	"strings"

	"github.com/toolgate/toolgate/internal/logurl"
)

// Redacted is t as the decision log keeps it when arguments are not
// logged (log.arguments off): without its arguments, and with its targets,
// which are argument values, cut to what they name: a command (which may
// hold anything, a token in a header it sets) as [REDACTED] whole, any
// other target without its query, fragment and user information (a URL's
// ?api_key=, svc:password@), and no raw spellings. The strings are copies,
// so that a queued event does not keep the call's arguments alive through
// them. t is not changed.
func (t *Tool) Redacted() *Tool {
	r := *t
	r.Arguments = nil
	// tool.target is the first string target, which may come after an
	// opaque one: read it as its own argument's, and as a command's when
	// any argument of that value is one. One that no readable target
	// gives (a value toolgate could not read, JSON text) is hidden whole.
	arg, found := "", false
	for _, a := range t.Targets {
		if !a.Opaque && a.Target == t.Target && (!found || commandArg(a.Arg)) {
			arg, found = a.Arg, true
		}
	}
	if !found {
		arg = "command" // hidden whole
	}
	// The first target is tool.target too: one copy for both.
	var lastArg, last, lastOut string
	cut := func(arg, s string) string {
		if arg != lastArg || s != last || lastOut == "" {
			lastArg, last, lastOut = arg, s, redactTarget(arg, s)
		}
		return lastOut
	}
	r.Target, r.TargetRaw = cut(arg, t.Target), ""
	if t.Targets != nil {
		r.Targets = make([]TargetArg, len(t.Targets))
		for i, a := range t.Targets {
			a.Target, a.Raw = cut(a.Arg, a.Target), ""
			a.Relative = redactTarget(a.Arg, a.Relative)
			r.Targets[i] = a
		}
	}
	return &r
}

// TargetBytes is about what t's targets hold in memory, for a queue that
// bounds what its entries hold.
func (t *Tool) TargetBytes() int64 {
	n := len(t.Target) + len(t.TargetRaw)
	for _, a := range t.Targets {
		n += len(a.Arg) + len(a.Target) + len(a.Relative) + len(a.Raw)
	}
	return int64(n)
}

// redactTarget is target s of argument arg without what may be a
// credential (Redacted): a command whole; a query and a fragment; the
// user information, before the last "@" of the first segment after a
// scheme and any slashes, whatever their number ("https:/u:p@h",
// "//u:p@h" cleaned to "/u:p@h", "u:p@h/x"); and in a value with a scheme,
// parameters after ";" (jdbc:…;password=, /x;token=).
func redactTarget(arg, s string) string {
	if s == "" {
		return ""
	}
	if commandArg(arg) {
		return "[" + logurl.Redacted + "]"
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		if s[i] == '?' {
			s = s[:i] + "?" + logurl.Redacted
		} else {
			s = s[:i]
		}
	}
	if schemeEnd(s) > 0 {
		// A URL, or its path reading ("https:/h/x;token="): its
		// parameters after ";" may be credentials.
		if i := strings.IndexByte(s, ';'); i >= 0 {
			s = s[:i] + ";" + logurl.Redacted
		}
	}
	start := 0
	i := schemeEnd(s)
	slashed := i > 0 && i < len(s) && (s[i] == '/' || s[i] == '\\')
	if slashed {
		start = i
	}
	for start < len(s) && (s[start] == '/' || s[start] == '\\') {
		start++
	}
	auth := s[start:]
	if i > 0 && !slashed {
		// A scheme without slashes, or a user name read as one
		// ("svc:pw@h"): the user information may hold a slash
		// (jdbc:oracle:thin:scott/tiger@db): all before the last "@" goes.
		start, auth = 0, s
	} else if k := strings.IndexAny(auth, `/\`); k >= 0 {
		auth = auth[:k]
	}
	if k := strings.LastIndexByte(auth, '@'); k >= 0 {
		s = s[:start] + logurl.Redacted + "@" + s[start+k+1:]
	}
	return strings.Clone(s)
}

// schemeEnd is the index just after s's scheme and its ":" (RFC 3986: a
// letter, then letters, digits, "+", "-" or "."), or 0 when s has none.
func schemeEnd(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':' && i > 0:
			return i + 1
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return 0
		}
	}
	return 0
}
