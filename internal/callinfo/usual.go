package callinfo

// usualHeaders are the headers most clients send with every call, whose
// values differ from call to call (a trace, a session, an idempotency
// key) or only say how the call is encoded. Messages name them only, and
// a remembered grant is not bound to them (UsualHeader).
var usualHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true, "Content-Type": true, "User-Agent": true,
	"Idempotency-Key": true, "Mcp-Protocol-Version": true, "Mcp-Session-Id": true, "Traceparent": true, "Tracestate": true,
}

// UsualHeader reports whether name, in canonical form (as net/http keeps
// it), is one of the usual headers: the one list that notifications and
// remembered grants share.
func UsualHeader(name string) bool { return usualHeaders[name] }
