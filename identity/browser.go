package identity

import (
	"net/http"
	"net/url"
	"strings"
)

// Anonymous access and browsers. A caller without credentials is trusted
// for being able to reach the proxy listener, which for a local toolgate
// means "a program on this machine". A web page in a browser on this
// machine can reach it too: a cross-site request (a form, an image, a
// fetch that needs no preflight), or a same-origin one after DNS
// rebinding (evil.example resolving to 127.0.0.1), where the browser
// believes toolgate is the page's own site. MCP's Streamable HTTP
// transport asks servers to check Origin for this reason. Agents are not
// browsers: they send neither Origin nor the Sec-Fetch-* headers, which
// every current browser sends with every request. So a request without
// credentials that comes from a browser page is refused, unless its
// Origin is one the operator listed (Config.BrowserOrigins); a user who
// types a URL into the address bar (Sec-Fetch-Site: none) is not a page.
// Callers with credentials are not concerned: a page cannot send them.

// errBrowserPage is the refusal of a browser page without credentials.
const errBrowserPage authError = "identity: a browser page may not call without credentials (its origin is not in identity.browser_origins)"

// fromBrowserPage reports whether r was sent by a web page whose origin is
// not one of allowed (each in canonical form, see CanonicalOrigin).
func fromBrowserPage(r *http.Request, allowed []string) bool {
	if origins := r.Header.Values("Origin"); len(origins) > 0 {
		if len(origins) > 1 {
			return true
		}
		o, ok := CanonicalOrigin(origins[0])
		if !ok {
			return true // "null" (a sandboxed or opaque origin), or garbage
		}
		for _, a := range allowed {
			if o == a {
				return false
			}
		}
		return true
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "none":
		return false // not a browser, or the user's own navigation
	default:
		// same-origin, same-site, cross-site: a page's request whose
		// origin the browser did not say (a GET, say); it cannot be told
		// from an allowed one.
		return true
	}
}

// CanonicalOrigin returns origin (scheme "://" host [":" port]) in the form
// browsers send it: scheme and host in lower case, the scheme's default
// port left out. ok is false for anything else, "null" included.
func CanonicalOrigin(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
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
