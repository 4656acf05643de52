package callinfo

// usualHeaders are the headers most clients send with every call, whose
// values differ from call to call (a trace, a request ID, a session, an
// idempotency key) or only say how the call is encoded. Messages name them
// only, a remembered grant is not bound to them, and a retry may send them
// otherwise than the call it attaches to (UsualHeader).
var usualHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true, "Content-Type": true, "User-Agent": true,
	"Idempotency-Key": true, "Mcp-Protocol-Version": true, "Mcp-Session-Id": true, "Traceparent": true, "Tracestate": true,
	// Trace context and request IDs of other tracers and platforms, new
	// with every attempt.
	"Baggage": true, "Sentry-Trace": true, "X-Request-Id": true, "Request-Id": true, "X-Correlation-Id": true,
	"X-Amzn-Trace-Id": true, "X-Cloud-Trace-Context": true, "B3": true, "X-B3-Traceid": true, "X-B3-Spanid": true,
	"X-B3-Parentspanid": true, "X-B3-Sampled": true, "X-B3-Flags": true,
}

// UsualHeader reports whether name, in canonical form (as net/http keeps
// it), is one of the usual headers: the one list that notifications and
// remembered grants share.
func UsualHeader(name string) bool { return usualHeaders[name] }
