package signin

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The identity types of approvals.identity.type.
const (
	TypeTrustedHeader = "trusted_header"
	TypeOIDC          = "oidc"
)

// Defaults of the settings that have one.
const (
	DefaultSecretHeader = "X-Approvals-Proxy-Secret"
	DefaultUserClaim    = "email"
	DefaultGroupsClaim  = "groups"
	DefaultSessionTTL   = 8 * time.Hour
	// CallbackPath is where the identity provider sends the browser back,
	// below the public URL, unless redirect_url says otherwise.
	CallbackPath = "/auth/callback"
	// SignedOutPath is where the identity provider sends the browser after
	// ending its session (RP-Initiated Logout's post_logout_redirect_uri),
	// below the public URL, or beside redirect_url without one.
	SignedOutPath = "/auth/signed-out"
)

// DefaultScopes are the scopes asked for when none are configured.
var DefaultScopes = []string{"openid", "email", "profile"}

// AllowEveryone, as the only entry of AllowedGroups, admits everyone the
// identity provider signs in. It has to be written out: with a public
// provider (any Google account, any Microsoft account) "everyone" is
// anyone on the internet, and every one of them could approve the calls
// whose reasons name no approvers.
const AllowEveryone = "*"

// MinCookieSecretBytes is the shortest cookie_secret accepted: it keys the
// HMAC of every session cookie.
const MinCookieSecretBytes = 32

// MinProxySecretBytes is the shortest shared secret accepted from the
// authenticating proxy in front.
const MinProxySecretBytes = 16

// Config is what New builds an Authenticator from: approvals.identity in
// plain values. Type selects which of Header and OIDC is read; the other
// is ignored.
type Config struct {
	Type   string // TypeTrustedHeader or TypeOIDC
	Header HeaderConfig
	OIDC   OIDCConfig
}

// HeaderConfig configures trusted_header: the identity comes from headers
// an authenticating proxy in front sets, and is believed only when the
// request proves it came through that proxy.
type HeaderConfig struct {
	UserHeader   string // e.g. X-Auth-Request-Email; required
	GroupsHeader string // comma-separated groups; "" means none
	// SecretHeader and Secret: the proxy in front sends Secret in
	// SecretHeader (default DefaultSecretHeader when Secret is set).
	SecretHeader string
	Secret       string
	// TrustedSources are CIDR prefixes ("10.0.0.0/8") or addresses whose
	// connections are believed without the secret. At least one of Secret
	// and TrustedSources must be set; with both, either suffices.
	TrustedSources []string
	// PublicURL is the approvals listener as browsers reach it: besides
	// addresses and names nobody can register, its host is the one a
	// trusted source's request may name (DNS rebinding, see Identify).
	PublicURL string
}

// OIDCConfig configures oidc: toolgate signs approvers in itself with the
// authorization code flow and PKCE.
type OIDCConfig struct {
	Issuer       string // the issuer URL, exactly as the provider's discovery document names it
	ClientID     string
	ClientSecret string
	// PublicURL is the approvals listener as browsers reach it. Its scheme
	// decides the cookies' Secure attribute, its path is the prefix of
	// the /auth/ routes in links, and RedirectURL defaults to it +
	// CallbackPath.
	PublicURL   string
	RedirectURL string
	UserClaim   string   // default DefaultUserClaim; a token without it is refused
	GroupsClaim string   // default DefaultGroupsClaim
	Scopes      []string // default DefaultScopes; "openid" is added when missing
	// CookieSecret keys the HMAC of the session and sign-in cookies; at
	// least MinCookieSecretBytes. Replicas must share it; changing it
	// signs everybody out.
	CookieSecret string
	SessionTTL   time.Duration // default DefaultSessionTTL
	// AllowedGroups admits only members of at least one of them; the
	// single entry AllowEveryone admits everyone the provider signs in.
	// Required.
	AllowedGroups []string
	// KeepProviderSession makes sign-out end toolgate's session only. By
	// default, when the provider's discovery document advertises an
	// end_session_endpoint, sign-out also sends the browser there
	// (OpenID Connect RP-Initiated Logout) to end the provider's session.
	KeepProviderSession bool

	// HTTPClient talks to the identity provider; nil means a client with
	// a 10-second timeout.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger hears why a sign-in failed (never a token or a secret); nil
	// discards.
	Logger *slog.Logger
}

// ConfigError is one problem with one key of a Config. Key is the key as
// toolgate's configuration file names it ("approvals.identity.issuer");
// Msg says what is wrong and Fix what to do. Neither ever holds a secret.
type ConfigError struct {
	Key, Msg, Fix string
}

// Error returns "<key>: <msg> (<fix>)".
func (e *ConfigError) Error() string {
	if e.Fix == "" {
		return e.Key + ": " + e.Msg
	}
	return e.Key + ": " + e.Msg + " (" + e.Fix + ")"
}

const keyPrefix = "approvals.identity."

// Check reports every problem with c, each a *ConfigError, joined; nil when
// there is none. It touches no network: an identity provider that cannot be
// reached is not a configuration error. New refuses exactly what Check
// reports.
func (c Config) Check() error {
	var errs []error
	bad := func(key, msg, fix string) {
		errs = append(errs, &ConfigError{Key: keyPrefix + key, Msg: msg, Fix: fix})
	}
	switch c.Type {
	case TypeTrustedHeader:
		c.Header.check(bad)
	case TypeOIDC:
		c.OIDC.check(bad)
	default:
		bad("type", fmt.Sprintf("%q is not an identity type", c.Type), "use trusted_header or oidc")
	}
	return errors.Join(errs...)
}

// New builds the Authenticator c describes. It does not touch the network:
// an oidc issuer is discovered when the first sign-in needs it.
func New(c Config) (Authenticator, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if c.Type == TypeTrustedHeader {
		return newTrustedHeader(c.Header), nil
	}
	return newOIDC(c.OIDC), nil
}

func (h HeaderConfig) check(bad func(key, msg, fix string)) {
	if !httpguts.ValidHeaderFieldName(h.UserHeader) {
		bad("user_header", "is not a header name", "set the header the proxy in front puts the approver's identity in, e.g. X-Auth-Request-Email")
	}
	if h.GroupsHeader != "" && !httpguts.ValidHeaderFieldName(h.GroupsHeader) {
		bad("groups_header", "is not a header name", "write a header name such as X-Auth-Request-Groups, or leave it out")
	}
	if h.SecretHeader != "" && !httpguts.ValidHeaderFieldName(h.SecretHeader) {
		bad("secret_header", "is not a header name", "write a header name such as "+DefaultSecretHeader)
	}
	switch {
	case h.Secret == "" && len(h.TrustedSources) == 0:
		bad("secret", "neither secret nor trusted_sources is set, so anybody could send the identity headers",
			"set secret to a value the proxy in front sends in secret_header, or trusted_sources to the proxy's addresses")
	case h.Secret != "" && len(h.Secret) < MinProxySecretBytes:
		bad("secret", fmt.Sprintf("is shorter than %d bytes", MinProxySecretBytes), "generate one with: openssl rand -base64 32")
	case h.Secret == "" && h.SecretHeader != "":
		bad("secret_header", "is set but secret is not", "set secret too, or remove secret_header")
	}
	for i, s := range h.TrustedSources {
		switch p, err := parseSource(s); {
		case err != nil:
			bad(fmt.Sprintf("trusted_sources[%d]", i), fmt.Sprintf("%q is not an address or CIDR prefix", s), "write it like 10.0.0.0/8, 192.168.1.10 or fd00::/8")
		case minTrustedBits(p) > 128:
			bad(fmt.Sprintf("trusted_sources[%d]", i), fmt.Sprintf("%q holds addresses anyone on the IPv4 Internet sends from (Teredo, 6to4, NAT64), or IPv4-mapped ones", s), "list the authenticating proxy's own addresses (IPv4 ones in IPv4 form), or use secret")
		case p.Bits() < minTrustedBits(p):
			// Every address, or half or a quarter of them (two such
			// prefixes are every address): anybody who reaches the
			// listener could name themselves an approver.
			bad(fmt.Sprintf("trusted_sources[%d]", i), fmt.Sprintf("%q trusts every address, or a block wider than /%d", s, minTrustedBits(p)), "list the authenticating proxy's own addresses, or use secret")
		}
	}
}

// minTrustedBits is the widest prefix trusted_sources takes for p: a
// network's own. In IPv4 that is /8 (10.0.0.0/8). In IPv6 a /8 of the
// global space (2000::/8) is a large share of the Internet, so it is /32,
// the block a registry gives one provider, but for unique local
// addresses (fc00::/7, fd00::/8), which are a network's own whatever their
// length.
func minTrustedBits(p netip.Prefix) int {
	switch {
	case p.Addr().Is4():
		return 8
	case p.Bits() >= uniqueLocal.Bits() && uniqueLocal.Contains(p.Addr()):
		return uniqueLocal.Bits()
	}
	for _, open := range openToAnyone {
		if open.Overlaps(p) {
			// Teredo and NAT64 hand these addresses to anyone on the
			// IPv4 Internet; an IPv4-mapped block never matches (addresses
			// are compared unmapped) and reads as trusting IPv4 hosts.
			return 129
		}
	}
	return 32
}

var openToAnyone = []netip.Prefix{
	netip.MustParsePrefix("2001::/32"),      // Teredo
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("::ffff:0:0/96"),  // IPv4-mapped
	netip.MustParsePrefix("2002::/16"),      // 6to4
}

var uniqueLocal = netip.MustParsePrefix("fc00::/7")

func (o OIDCConfig) check(bad func(key, msg, fix string)) {
	switch u, err := url.Parse(o.Issuer); {
	case o.Issuer == "":
		bad("issuer", "is not set", "set the identity provider's issuer URL, e.g. https://accounts.example.com")
	case err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http":
		bad("issuer", "is not an absolute https:// URL", "write the issuer URL, e.g. https://accounts.example.com")
	case u.Scheme == "http" && !Loopback(u.Hostname()):
		// Discovery, keys and the code exchange in clear text could be
		// read or changed by anyone on the path.
		bad("issuer", "uses http:// on a host other than loopback", "use the provider's https:// issuer URL")
	}
	if o.ClientID == "" {
		bad("client_id", "is not set", "set the client ID registered at the identity provider")
	}
	if o.ClientSecret == "" {
		bad("client_secret", "is not set", "set the client secret registered at the identity provider, e.g. client_secret: ${OIDC_CLIENT_SECRET}")
	}
	switch {
	case o.RedirectURL != "":
		u, err := url.Parse(o.RedirectURL)
		pu, perr := url.Parse(o.PublicURL)
		switch {
		case !absHTTP(o.RedirectURL) || err != nil:
			bad("redirect_url", "is not an absolute http(s) URL", "write it like https://toolgate.example.com/auth/callback")
		case !strings.HasSuffix(u.Path, CallbackPath):
			// toolgate serves the provider's return only there: sign-in
			// would end on a 404.
			bad("redirect_url", "does not end in "+CallbackPath+", the only path where toolgate takes the sign-in's return", "write it like https://toolgate.example.com"+CallbackPath+", or leave it out to derive it from public_url")
		case o.PublicURL != "" && perr == nil && !strings.EqualFold(u.Host, pu.Host):
			// The sign-in cookie is the public URL host's: a browser
			// sent elsewhere would not carry it back.
			bad("redirect_url", fmt.Sprintf("is on host %s, not public_url's %s, so the sign-in cookie would not come back with it", u.Host, pu.Host), "use public_url's host, or leave redirect_url out")
		}
	case o.PublicURL == "":
		bad("redirect_url", "is not set, and there is no public_url to derive it from", "set public_url to the approvals listener as browsers reach it")
	}
	if o.PublicURL != "" && !absHTTP(o.PublicURL) {
		bad("redirect_url", "cannot be derived: public_url is not an absolute http(s) URL", "fix public_url")
	}
	switch {
	case o.CookieSecret == "":
		bad("cookie_secret", "is not set", "generate one with: openssl rand -base64 48")
	case len(o.CookieSecret) < MinCookieSecretBytes:
		bad("cookie_secret", fmt.Sprintf("is shorter than %d bytes", MinCookieSecretBytes), "generate one with: openssl rand -base64 48")
	}
	if o.SessionTTL < 0 {
		bad("session_ttl", "is negative", "write a duration such as 8h")
	}
	for i, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n") {
			bad(fmt.Sprintf("scopes[%d]", i), fmt.Sprintf("%q is not a scope", s), "write one scope per entry, e.g. [openid, email, profile]")
		}
	}
	switch {
	case len(o.AllowedGroups) == 0:
		// Without it, everyone the provider signs in could approve the
		// calls whose reasons name no approvers: with a public provider,
		// anyone with an account there.
		bad("allowed_groups", "is not set, so everyone the identity provider signs in could approve",
			`list the groups whose members may approve, e.g. [approvers]; or write ["*"] to admit everyone the provider signs in (only for a provider that signs in nobody but your own people)`)
	case len(o.AllowedGroups) > 1 && slices.Contains(o.AllowedGroups, AllowEveryone):
		bad("allowed_groups", `lists "*" beside groups, so the groups would not limit anything`,
			`write ["*"] alone to admit everyone the provider signs in, or list only groups`)
	}
	for i, g := range o.AllowedGroups {
		if strings.TrimSpace(g) == "" {
			bad(fmt.Sprintf("allowed_groups[%d]", i), "is empty", "remove the empty entry")
		}
	}
	for key, claim := range map[string]string{"user_claim": o.UserClaim, "groups_claim": o.GroupsClaim} {
		if claim != "" && strings.TrimSpace(claim) != claim {
			bad(key, "has leading or trailing spaces", "write the claim's name as the tokens carry it")
		}
	}
}

// absHTTP reports whether s is an absolute http or https URL with a host.
func absHTTP(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// Loopback reports whether host (a URL's, without port) names this
// machine: localhost or a loopback address. The config's checks of other
// URLs that may be http:// on loopback only use it too.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// Warnings are what h allows that is sound only in some deployments, each
// as "key: what, and what to do": a loopback address among TrustedSources
// lets every process on toolgate's host name itself an approver, the
// agent's own tools included when the agent runs beside toolgate (a pod's
// containers share loopback).
func (h HeaderConfig) Warnings() []string {
	var out []string
	for i, s := range h.TrustedSources {
		if p, err := parseSource(s); err != nil || !p.Overlaps(loopback4) && !p.Contains(netip.IPv6Loopback()) {
			continue
		}
		out = append(out, fmt.Sprintf("trusted_sources[%d]: %q trusts loopback, so any process on this host (an agent's tools, when the agent runs beside toolgate) can send the identity headers and name itself an approver; prefer secret, which the authenticating proxy sends and an agent does not know", i, s))
	}
	return out
}

var loopback4 = netip.MustParsePrefix("127.0.0.0/8")

// parseSource reads a trusted source: a CIDR prefix or a single address.
func parseSource(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
