package proxy

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/policy"
)

// secretHeaders never reach the policy input: credentials and cookies.
var secretHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"cookie":              true,
	"x-api-key":           true,
	"x-auth-token":        true,
}

// overrideHeaders ask some frameworks to act as if the method or path were
// other than the request's; the policy decides on the real ones, so these
// never reach an upstream.
var overrideHeaders = []string{
	"X-Http-Method-Override", "X-Http-Method", "X-Method-Override",
	"X-Original-Url", "X-Rewrite-Url", "X-Original-Method",
}

// sanitizeHeaders removes, in place, what must neither be evaluated nor
// forwarded: headers whose name holds "_" (some stacks read X_Foo as X-Foo,
// a second spelling the policy would not see), toolgate's own X-Toolgate-*
// headers (only toolgate sets them), forwarding and remote-user claims,
// method and path overrides, and Expect (the body has already been read in
// full).
func sanitizeHeaders(h http.Header) {
	for k := range h {
		// X-Forwarded-* and X-Remote-User are identity and routing claims
		// only toolgate may make to an upstream (it sets X-Forwarded-For,
		// -Host and -Proto itself); an agent's would be believed.
		if strings.ContainsRune(k, '_') || strings.HasPrefix(k, "X-Toolgate-") ||
			strings.HasPrefix(k, "X-Forwarded-") || k == "Forwarded" || k == "X-Remote-User" || k == "X-Real-Ip" {
			delete(h, k)
		}
	}
	for _, k := range overrideHeaders {
		h.Del(k)
	}
	h.Del("Expect")
}

// policyHeaders is h lower-cased, without credentials and cookies.
func policyHeaders(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		lk := strings.ToLower(k)
		if secretHeaders[lk] {
			continue
		}
		out[lk] = vs
	}
	return out
}

func policySubject(s identity.Subject) policy.Subject {
	return policy.Subject{ID: s.ID, Groups: s.Groups, Claims: s.Claims, Authenticated: s.Authenticated}
}

// httpInput describes the request as it will be forwarded: its method, its
// path relative to the upstream, its query and its headers.
func httpInput(r *http.Request, rel string) policy.HTTP {
	q, _ := url.ParseQuery(r.URL.RawQuery) // already checked by checkPath
	return policy.HTTP{Method: r.Method, Path: rel, Query: q, Headers: policyHeaders(r.Header)}
}
