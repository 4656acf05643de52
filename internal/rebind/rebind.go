// Package rebind tells whether a request's Host could have been rebound.
//
// DNS rebinding: a web page at a domain its author controls re-resolves
// that domain to 127.0.0.1 (or any address the victim's browser reaches)
// after it loaded, so the browser sends the page's requests, same-origin
// as far as it knows, to a server on the victim's host or network. Such a
// request carries no Origin or Sec-Fetch-Site that gives it away; only its
// Host does: it names the attacker's domain.
package rebind

import (
	"net"
	"net/netip"
	"slices"
	"strings"
)

// privateSuffixes are names no one can register in public DNS.
var privateSuffixes = []string{".localhost", ".local", ".internal", ".home.arpa", ".test", ".invalid"}

// SafeHost reports whether hostport (a Host header) names the server in a
// way no page could have had rebound to it: an IP literal, a single-label
// name (localhost, a compose service), a special-use or private name
// (.localhost, .local, .internal, .home.arpa, .test, .invalid), or one of
// allowed (lower-case DNS names, without port or trailing dot).
func SafeHost(hostport string, allowed []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case host == "":
		return false
	case isIP(strings.Trim(host, "[]")), !strings.Contains(host, "."):
		return true
	}
	for _, s := range privateSuffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return slices.Contains(allowed, host)
}

// isIP reports whether host is an IP literal; netip, unlike net.ParseIP,
// does not allocate on this per-request path.
func isIP(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}
