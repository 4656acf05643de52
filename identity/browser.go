package identity

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/rebind"
)

// Anonymous access and browsers. A caller without credentials is trusted
// for being able to reach the proxy listener, which for a local toolgate
// means "a program on this machine". A web page in a browser on this
// machine can reach it too, two ways:
//
//   - A cross-site request: a form, an image, a fetch that needs no
//     preflight, sent from the page's own origin to toolgate's. The browser
//     says where it comes from: Origin on every request but a GET or HEAD,
//     and Sec-Fetch-Site on every request to a trustworthy URL (localhost,
//     127.0.0.1 and https are).
//   - DNS rebinding: the page's own name (evil.example) resolves to
//     127.0.0.1 after it loaded, so the browser sends its requests to
//     toolgate as same-origin ones. Over plain http a GET then carries
//     neither header; only Host tells: it names the attacker's domain.
//
// Agents send neither Origin nor Sec-Fetch-*. So a request without
// credentials is refused when it carries Origin (unless listed in
// Config.BrowserOrigins) or a Sec-Fetch-Site other than "none" (a user's
// own navigation), and when its Host is a name a page could have had
// rebound: a DNS name under a public suffix that is not Config.Hosts'.
// IP literals, single-label names (a compose service), localhost and the
// special-use and private names (.localhost, .local, .internal,
// .home.arpa, .test, .invalid) cannot be: no one can register them in
// public DNS. MCP's
// Streamable HTTP transport asks servers to check Origin for this reason;
// callers with credentials are not concerned, since a page cannot send
// them.

// Refusals of a request without credentials from a web page.
const (
	errBrowserPage authError = "identity: a browser page may not call without credentials (its origin is not in identity.browser_origins)"
	errRebindable  authError = "identity: a request without credentials must name toolgate by an IP address, localhost, a single-label or private name, or proxy_public_url's host (DNS rebinding)"
)

// anonymousRefusal says why r, which has no credentials, is refused, or
// nil. origins are the allowed origins and hosts the allowed host names,
// all canonical.
func anonymousRefusal(r *http.Request, origins, hosts []string) error {
	if fromBrowserPage(r, origins) {
		return errBrowserPage
	}
	if !rebind.SafeHost(r.Host, hosts) {
		return errRebindable
	}
	return nil
}

// fromBrowserPage reports whether r was sent by a web page whose origin is
// not one of allowed.
func fromBrowserPage(r *http.Request, allowed []string) bool {
	if origins := r.Header.Values("Origin"); len(origins) > 0 {
		if len(origins) > 1 {
			return true
		}
		o, ok := CanonicalOrigin(origins[0])
		// "null" (a sandboxed or opaque origin), or garbage, is no origin
		// that could be listed.
		return !ok || !slices.Contains(allowed, o)
	}
	// same-origin, same-site, cross-site: a page's request whose origin
	// the browser did not say (a GET), which cannot be told from an
	// allowed one. "none" is the user's own navigation.
	site := r.Header.Get("Sec-Fetch-Site")
	return site != "" && site != "none"
}

// CanonicalOrigin returns origin (scheme "://" host [":" port]) in the form
// browsers send it: scheme and host in lower case, the scheme's default
// port left out. ok is false for anything else, "null" included.
func CanonicalOrigin(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || u.Path != "" || u.Opaque != "" ||
		strings.ContainsAny(origin, "?#") || strings.HasSuffix(origin, ":") {
		return "", false
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, true
}
