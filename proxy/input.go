package proxy

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/policy"
)

// secretHeader reports whether a header, by its lower-cased name, carries
// a credential: such a header never reaches the policy input, and its
// value is hidden from approvers (hiddenHeader), so from everything that
// shows a parked call (the approvals API and page, Slack and Teams, hooks,
// the store's record) and from the decision log. This is the one list;
// the header itself is still forwarded.
//
// Vendors name their credentials freely (X-Auth-Key, X-Functions-Key,
// DD-Application-Key, X-Sentry-Auth, X-Jwt-Assertion, X-Session-Id), so
// the rule is wide: a name holding one of secretWords, or one of whose
// words (between "-") is or ends in "key". A header that is not a
// secret and is hidden costs an approver its value; a secret that is
// shown is leaked to everyone who reads the log. notSecretHeaders are
// the few names the rule would hide that toolgate and policies need to
// see.
func secretHeader(lk string) bool {
	if notSecretHeaders[lk] {
		return false
	}
	for _, w := range secretWords {
		if strings.Contains(lk, w) {
			return true
		}
	}
	for w := range strings.SplitSeq(lk, "-") {
		if strings.HasSuffix(w, "key") || strings.HasSuffix(w, "keys") {
			return true
		}
	}
	return false
}

// secretWords, within a lower-cased header name, mark a credential:
// Authorization, Proxy-Authorization, Authentication, X-Auth-Token,
// Private-Token, X-Amz-Security-Token, X-Client-Secret, X-Password,
// Cookie, X-Csrf-Token, X-Hub-Signature-256, CB-Access-Passphrase (and
// the OKX, KuCoin and Bitget ones), X-Vercel-Protection-Bypass, X-Hmac and
// their kind.
var secretWords = []string{
	"auth", "token", "secret", "passw", "passphrase", "pwd", "credential", "jwt", "session", "cookie", "signature",
	"bypass", "hmac",
}

// notSecretHeaders hold no secret although their names look as if they
// did: Idempotency-Key (and X-Idempotency-Key) name a call, so that a
// retry attaches to it and the upstream deduplicates on it; Mcp-Session-Id
// names an MCP session, bound to its principal (session.go).
var notSecretHeaders = map[string]bool{
	"idempotency-key":   true,
	"x-idempotency-key": true,
	"mcp-session-id":    true,
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
var claimPrefixes = []string{
	"X-Toolgate-", "X-Forwarded-", "X-Remote-", "X-Authenticated-", "X-Original-", "X-Envoy-",
	// What authenticating proxies tell the services behind them:
	// Authelia and Authentik (Remote-User, Remote-Groups, X-Authentik-*),
	// oauth2-proxy (X-Auth-Request-*), Grafana's and others' X-Webauth-*,
	// Azure App Service (X-Ms-Client-Principal*), AWS load balancers
	// (X-Amzn-Oidc-*), Google IAP (X-Goog-Authenticated-*), Cloudflare
	// Access (Cf-Access-*), Pomerium (X-Pomerium-*).
	"Remote-", "X-Authentik-", "X-Auth-Request-", "X-Webauth-", "X-Ms-Client-Principal",
	"X-Amzn-Oidc-", "X-Goog-Authenticated-", "X-Goog-Iap-", "Cf-Access-", "X-Pomerium-",
	// Vouch, Kong (consumer and OIDC userinfo), Google API Gateway, and
	// the client certificate a TLS-terminating proxy passes on.
	"X-Vouch-", "X-Consumer-", "X-Userinfo", "X-Apigateway-Api-Userinfo", "X-Ssl-Client-", "Ssl-Client-",
	"X-Client-Cert",
	// Tailscale Serve, App Engine and Cloud Tasks, Cloud Endpoints, Azure
	// App Service's and AWS's client certificates, Kong's credential.
	"Tailscale-User-", "X-Appengine-", "X-Cloudtasks-", "X-Endpoint-Api-Userinfo", "X-Arr-Clientcert",
	"X-Amzn-Mtls-Clientcert", "X-Credential-Identifier", "X-Anonymous-Consumer",
}

// claimHeaders are single names that claim the client's address or
// identity, which frameworks and CDNs' users believe (chi's RealIP takes
// True-Client-IP before X-Forwarded-For).
var claimHeaders = map[string]bool{
	"Forwarded": true, "Forwarded-For": true, "X-Forwarded": true, "X-Real-Ip": true,
	"True-Client-Ip": true, "X-Client-Ip": true, "Client-Ip": true, "Cf-Connecting-Ip": true,
	"Fastly-Client-Ip": true, "X-Cluster-Client-Ip": true, "X-Originating-Ip": true,
	"X-User": true, "X-User-Id": true, "X-Email": true, "X-Auth-User": true, "X-Username": true,
	"Fly-Client-Ip": true, "Proxy-Client-Ip": true, "Wl-Proxy-Client-Ip": true, "X-Azure-Clientip": true,
	"X-Appengine-User-Ip": true, "X-Vercel-Forwarded-For": true,
}

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
// identity, address and routing claims (claimPrefixes, claimHeaders, the
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
	// One pass over the fields, each looked up once: the names below are
	// spelt as net/http spells what it reads (canonical), as h.Del would
	// look them up.
	for k := range h {
		if droppedHeaders[k] || strings.IndexByte(k, '_') >= 0 || claimsByPrefix(k) {
			delete(h, k)
		}
	}
	for _, k := range strip {
		h.Del(k)
	}
}

// droppedHeaders are the names sanitizeHeaders removes whatever they
// hold: hopHeaders, claimHeaders, overrideHeaders and Expect (the body is
// read in full before anything is forwarded).
var droppedHeaders = func() map[string]bool {
	m := maps.Clone(claimHeaders)
	for _, k := range slices.Concat(hopHeaders, overrideHeaders, []string{"Expect"}) {
		m[http.CanonicalHeaderKey(k)] = true
	}
	return m
}()

// claimPrefixesByFirst is claimPrefixes by their first byte, so a name
// is compared only with the prefixes it could start with.
var claimPrefixesByFirst = func() (by [256][]string) {
	for _, p := range claimPrefixes {
		by[p[0]] = append(by[p[0]], p)
	}
	return by
}()

// claimsByPrefix reports whether name starts with one of claimPrefixes.
func claimsByPrefix(name string) bool {
	if name == "" {
		return false
	}
	for _, p := range claimPrefixesByFirst[name[0]] {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// policyHeaders is h lower-cased, with the values of credentials and
// cookies hidden. Their names stay, with one policy.Hidden for each value:
// the header is forwarded, so the policy must be able to see that it is
// sent (an agent may name any header like a credential) and deny it.
// Authorization alone is left out: it is the agent's credential for
// toolgate, and never forwarded (outboundHeader).
func policyHeaders(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		n, known := commonHeaders[k]
		if !known {
			lk := strings.ToLower(k)
			n = headerName{lk, secretHeader(lk)}
		}
		if n.secret {
			if n.lower != "authorization" {
				out[n.lower] = policy.HiddenValues(len(vs))
			}
			continue
		}
		out[n.lower] = vs
	}
	return out
}

// headerName is a header's lower-cased name and whether it carries a
// credential (secretHeader).
type headerName struct {
	lower  string
	secret bool
}

// commonHeaders are the headers most calls carry, by their canonical names,
// worked out once with the same rule: policyHeaders looks a name up here
// before it lower-cases and tests it (an allocation and a dozen substring
// searches a header, on every call).
var commonHeaders = func() map[string]headerName {
	m := map[string]headerName{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Baggage", "Cache-Control",
		"Content-Encoding", "Content-Length", "Content-Type", "Cookie", "Idempotency-Key", "Last-Event-Id",
		"Mcp-Method", "Mcp-Name", "Mcp-Protocol-Version", "Mcp-Session-Id", "Origin", "Pragma", "Referer",
		"Traceparent", "Tracestate", "User-Agent", "X-Idempotency-Key", "X-Request-Id",
	} {
		lk := strings.ToLower(k)
		m[http.CanonicalHeaderKey(k)] = headerName{lk, secretHeader(lk)}
	}
	return m
}()

// bodyHeaders makes the input's headers say of the body what the upstream
// is told (outboundHeader): it arrives decoded, without Content-Encoding,
// with the decoded length.
func bodyHeaders(h map[string][]string, n int) {
	if _, encoded := h["content-encoding"]; !encoded {
		if cl := h["content-length"]; len(cl) == 1 && n > 0 {
			if v, err := strconv.Atoi(cl[0]); err == nil && v == n {
				return // as sent: the usual case, left without an allocation
			}
		}
	}
	delete(h, "content-encoding")
	delete(h, "content-length")
	if n > 0 {
		h["content-length"] = []string{strconv.Itoa(n)}
	}
}

// replaceBody makes b the body c sends in place of the one it read (a
// hook's rewrite, a task request left out), and the policy input's headers
// say b's length as the upstream is told it (bodyHeaders): the policy
// decides on what is sent. The headers are copied, not changed: the
// decision log may hold them already.
func (c *call) replaceBody(b []byte) {
	c.body = b
	if h := c.input.HTTP.Headers; h != nil {
		h = maps.Clone(h)
		bodyHeaders(h, len(b))
		c.input.HTTP.Headers = h
	}
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
