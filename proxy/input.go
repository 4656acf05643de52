package proxy

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/policy"
)

// secretHeaders never reach the policy input: credentials and cookies.
// Nor does any header whose name says it carries one (secretWords): the
// input is stored with a parked call, shown to every approver through the
// approvals API and written to the decision log.
var secretHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"cookie":              true,
	"x-api-key":           true,
	"x-auth-token":        true,
}

// secretWords, within a lower-cased header name, mark a credential:
// Private-Token, X-Goog-Api-Key, Api-Key, X-Amz-Security-Token,
// Ocp-Apim-Subscription-Key, X-Client-Secret and their kind.
var secretWords = []string{"token", "secret", "passw", "apikey", "api-key", "subscription-key", "credential"}

func secretHeader(lk string) bool {
	if secretHeaders[lk] {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(lk, w) {
			return true
		}
	}
	return false
}

// overrideHeaders ask some frameworks to act as if the method or path were
// other than the request's; the policy decides on the real ones, so these
// never reach an upstream.
var overrideHeaders = []string{
	"X-Http-Method-Override", "X-Http-Method", "X-Method-Override", "X-Rewrite-Url",
}

// claimPrefixes start the names of headers that assert identity or
// routing: only toolgate may make such claims to an upstream (it sets
// X-Forwarded-For, -Host and -Proto itself, and its own X-Toolgate-*); an
// agent's would be believed.
var claimPrefixes = []string{"X-Toolgate-", "X-Forwarded-", "X-Remote-", "X-Authenticated-", "X-Original-", "X-Envoy-"}

// hopHeaders belong to one connection, never to what is forwarded; with
// Upgrade and HTTP2-Settings gone, no request can switch the upstream
// connection to a protocol whose later bytes no policy would see.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Http2-Settings",
}

// sanitizeHeaders removes, in place, what must neither be evaluated nor
// forwarded, before anything is evaluated: hop-by-hop headers and those the
// Connection header names (first, so that a client's Connection cannot
// later strip a header toolgate adds); headers whose name holds "_" (some
// stacks read X_Foo as X-Foo, a second spelling the policy would not see);
// identity and routing claims (claimPrefixes, Forwarded, X-Real-Ip, the
// upstream's strip list); method and path overrides; and Expect (the body
// is read in full before anything is forwarded).
func sanitizeHeaders(h http.Header, strip []string) {
	for _, v := range h.Values("Connection") {
		for k := range strings.SplitSeq(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				h.Del(k)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.ContainsRune(k, '_') || k == "Forwarded" || k == "X-Real-Ip" || hasAnyPrefix(k, claimPrefixes) {
			delete(h, k)
		}
	}
	for _, k := range overrideHeaders {
		h.Del(k)
	}
	for _, k := range strip {
		h.Del(k)
	}
	h.Del("Expect")
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// policyHeaders is h lower-cased, without credentials and cookies.
func policyHeaders(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		lk := strings.ToLower(k)
		if secretHeader(lk) {
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
// path relative to the upstream, its query (as checkPath parsed it) and
// its headers.
func httpInput(r *http.Request, rel string, query url.Values) policy.HTTP {
	return policy.HTTP{Method: r.Method, Path: rel, Query: query, Headers: policyHeaders(r.Header)}
}
