package signin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/internal/rebind"
)

// trustedHeader believes the identity headers of an authenticating proxy in
// front (oauth2-proxy, Pomerium, an ingress with SSO), but only on requests
// that prove they came through it: the shared secret in its header, or a
// connection from one of the trusted sources. Anybody else could send the
// same headers.
type trustedHeader struct {
	userHeader, groupsHeader string
	secretHeader             string
	secret                   *[sha256.Size]byte // nil: no secret configured
	sources                  []netip.Prefix
	hosts                    []string // PublicURL's host, for rebind.SafeHost
}

var _ Authenticator = (*trustedHeader)(nil)

// newTrustedHeader builds a trustedHeader from a checked c.
func newTrustedHeader(c HeaderConfig) *trustedHeader {
	h := &trustedHeader{
		userHeader:   http.CanonicalHeaderKey(c.UserHeader),
		groupsHeader: http.CanonicalHeaderKey(c.GroupsHeader),
	}
	if c.Secret != "" {
		d := sha256.Sum256([]byte(c.Secret))
		h.secret = &d
		h.secretHeader = http.CanonicalHeaderKey(c.SecretHeader)
		if h.secretHeader == "" {
			h.secretHeader = DefaultSecretHeader
		}
	}
	for _, s := range c.TrustedSources {
		p, _ := parseSource(s) // Check has refused what does not parse
		h.sources = append(h.sources, p)
	}
	if u, err := url.Parse(c.PublicURL); err == nil && u.Hostname() != "" {
		h.hosts = []string{strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")}
	}
	return h
}

// Identify returns the approver the proxy in front names, with Via
// "header", or an error wrapping ErrNoIdentity when r did not come through
// that proxy or its headers do not name one approver.
func (h *trustedHeader) Identify(r *http.Request) (Approver, error) {
	if !h.secretMatches(r) {
		if !h.fromTrustedSource(r) {
			return Approver{}, noIdentity("the request came neither with the proxy's secret nor from a trusted source")
		}
		// A browser on a trusted source's host (a loopback source) may
		// send a web page's requests there, the page's own headers
		// included, once the page's domain is rebound to that address.
		// Such a request names the page's domain in Host; the proxy in
		// front names toolgate by an address, a private name or
		// public_url's host.
		if !rebind.SafeHost(r.Host, h.hosts) {
			return Approver{}, noIdentity("a trusted source's request names toolgate as %q: only an address, a single-label or private name, or public_url's host is believed (DNS rebinding)", r.Host)
		}
	}
	users := r.Header.Values(h.userHeader)
	switch len(users) {
	case 0:
		return Approver{}, noIdentity("no %s header", h.userHeader)
	case 1:
	default:
		return Approver{}, noIdentity("%d %s headers, want one", len(users), h.userHeader)
	}
	name := strings.TrimSpace(users[0])
	if err := checkName(name); err != nil {
		return Approver{}, err
	}
	var groups []string
	if h.groupsHeader != "" {
		// One header, like the user's: a proxy in front that appends to
		// the client's own groups header rather than replacing it would
		// otherwise let the client add groups of its choice.
		vals := r.Header.Values(h.groupsHeader)
		if len(vals) > 1 {
			return Approver{}, noIdentity("%d %s headers, want at most one", len(vals), h.groupsHeader)
		}
		for _, v := range vals {
			for g := range strings.SplitSeq(v, ",") {
				if g = strings.TrimSpace(g); g != "" {
					groups = append(groups, g)
				}
			}
		}
	}
	groups = dedupe(groups)
	if err := checkGroups(groups); err != nil {
		return Approver{}, err
	}
	return Approver{Name: name, Groups: groups, Via: ViaHeader}, nil
}

// secretMatches reports whether r carries the configured secret, exactly
// once. Both sides are hashed first so that the comparison takes the same
// time whatever the lengths.
func (h *trustedHeader) secretMatches(r *http.Request) bool {
	if h.secret == nil {
		return false
	}
	vals := r.Header.Values(h.secretHeader)
	if len(vals) != 1 {
		return false
	}
	got := sha256.Sum256([]byte(vals[0]))
	return subtle.ConstantTimeCompare(got[:], h.secret[:]) == 1
}

// fromTrustedSource reports whether r's connection comes from one of the
// trusted sources. Only the connection's address counts: X-Forwarded-For
// is whatever the client wrote.
func (h *trustedHeader) fromTrustedSource(r *http.Request) bool {
	if len(h.sources) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap().WithZone("")
	for _, p := range h.sources {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Routes returns nil: the proxy in front signs approvers in.
func (h *trustedHeader) Routes() http.Handler { return nil }

// LoginURL returns "": toolgate cannot sign anybody in here; the proxy in
// front does, before the request arrives.
func (h *trustedHeader) LoginURL(string) string { return "" }

// LogoutURL is "": the proxy in front signs approvers in and out.
func (h *trustedHeader) LogoutURL() string { return "" }

// LogoutOrigins is nil: toolgate sends nobody elsewhere to sign out.
func (h *trustedHeader) LogoutOrigins() []string { return nil }
