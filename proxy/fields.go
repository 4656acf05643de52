package proxy

import (
	"net/http"
	"strconv"

	"github.com/toolgate/toolgate/internal/callinfo"
)

// maxHeaderFields bounds the header fields a request may carry. Stacks
// drop fields past a count of their own without a word (Node's http
// server, Express's included, keeps the first 2,000): a header the policy
// read could be past an upstream's count and never reach it, and with it
// toolgate's own X-Toolgate-* and X-Forwarded-For. A hundred is what
// Python's http.server takes and far more than an agent sends.
const maxHeaderFields = 100

// listHeaders may be sent as several field lines: HTTP defines them as
// comma-separated lists, which every stack reads as one list. Any other
// header sent twice is read differently by upstreams (Go and Python take
// the first value, Node joins them with ", ", PHP keeps the last), so the
// policy could judge one value and the upstream act on another.
var listHeaders = map[string]bool{
	"Accept": true, "Accept-Charset": true, "Accept-Encoding": true, "Accept-Language": true,
	"Cache-Control": true, "Pragma": true, "Via": true, "Warning": true, "Cookie": true,
	"If-Match": true, "If-None-Match": true, "Prefer": true, "Link": true,
	"Tracestate": true, "Baggage": true, "Cdn-Loop": true,
}

// checkFields refuses, before anything else is read, a request whose
// method or header fields upstreams could read otherwise than the policy
// does: a method in lower or mixed case (Werkzeug and others upper-case
// it, so "post" runs as POST while a policy compares "POST"), more than
// maxHeaderFields fields, and a field name longer than approvers are shown.
func checkFields(r *http.Request) *answer {
	for i := 0; i < len(r.Method); i++ {
		if c := r.Method[i]; 'a' <= c && c <= 'z' {
			a := invalid(http.StatusMethodNotAllowed, "Method not allowed", "methods are upper case (POST, not "+strconv.Quote(r.Method)+"): some upstreams upper-case a method the policy would judge as sent")
			a.allow = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
			return a
		}
	}
	n := 0
	for k, vs := range r.Header {
		n += len(vs)
		if len(k) > callinfo.MaxHeaderName {
			// Approvers are shown such a name cut, and two cut alike
			// would look the same.
			return invalid(http.StatusRequestHeaderFieldsTooLarge, "Header name too long", "a header's name is at most "+strconv.Itoa(callinfo.MaxHeaderName)+" bytes")
		}
	}
	if n > maxHeaderFields {
		return invalid(http.StatusRequestHeaderFieldsTooLarge, "Too many header fields", "a request carries at most "+strconv.Itoa(maxHeaderFields)+" header fields: some upstreams drop fields past a count of their own")
	}
	return nil
}

// checkRepeated refuses a header other than a list sent more than once,
// among those left to forward (after sanitizeHeaders). It runs last, so
// that the checks with answers of their own answer first: two
// Authorization headers 401, two Content-Types on a tool call 415, two
// MCP session IDs 404.
func checkRepeated(h http.Header) *answer {
	for k, vs := range h {
		if len(vs) > 1 && !listHeaders[k] {
			return invalid(http.StatusBadRequest, "Repeated header", strconv.Quote(k)+" is sent more than once: upstreams read such a header differently (the first value, the last, or both joined)")
		}
	}
	return nil
}
