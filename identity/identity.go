// Package identity answers "who is calling" for a request that reaches the
// proxy listener. It reads one credential, a bearer token in the
// Authorization header, and turns it into a [Subject]: a configured API key,
// or a JWT verified against a JWKS. It never looks at query strings,
// cookies, other headers or tool arguments (but for Origin, Sec-Fetch-Site
// and Host of a request without credentials, to tell a web page from an
// agent: browser.go), and it knows nothing of policy, proxying or
// parked calls.
package identity

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// AnonymousID is the subject ID of a request without credentials when
// anonymous access is enabled.
const AnonymousID = "anonymous"

// Subject is a verified caller.
type Subject struct {
	// ID is the API key's configured subject, the JWT's subject claim, or
	// AnonymousID.
	ID string
	// Principal names the caller as the owner of what it does (its parked
	// calls, MCP sessions): the kind of credential with the subject, so that
	// a JWT whose subject equals an API key's subject is another principal.
	// It is one of
	//
	//	"key:" + subject                       an API key; subject as configured
	//	"jwt:" + esc(issuer) + "#" + subject   a JWT; issuer as configured (the
	//	                                       token's iss equals it), subject
	//	                                       the subject claim's value
	//	"anonymous"                            AnonymousPrincipal
	//
	// where esc replaces "%" with "%25" and then "#" with "%23" in one pass,
	// so the first "#" ends the issuer and no issuer or subject, whatever
	// it holds, makes two different credentials' principals equal. It
	// depends only on the configuration and the credential, so it is the
	// same across restarts and replicas; API keys sharing a subject (a key
	// being rotated) share a principal.
	Principal string
	// Groups is nil when the caller has none.
	Groups []string
	// Claims holds every claim of a verified JWT as decoded JSON
	// (map[string]any, []any, string, json.Number, bool, nil). Numbers are
	// json.Number, as OPA decodes its own input, so large integers keep
	// their precision. Nil for API keys and anonymous callers.
	Claims map[string]any
	// Authenticated is false only for the anonymous subject.
	Authenticated bool
}

// Config says which credentials are accepted. The zero value accepts none:
// every request fails with ErrUnauthenticated.
type Config struct {
	APIKeys []APIKey
	// JWT, when set, accepts bearer JWTs verified against a JWKS.
	JWT *JWT
	// Anonymous lets requests without an Authorization header through as
	// AnonymousID. A present but bad credential still fails.
	Anonymous bool
	// BrowserOrigins are the origins ("http://localhost:6274") of web
	// pages that may call without credentials when Anonymous is set; a
	// request without credentials from any other page is refused
	// (browser.go).
	BrowserOrigins []string
	// Hosts are DNS names by which a request without credentials may
	// name toolgate (its Host) beyond those no page can have rebound: IP
	// literals, single-label and private names (browser.go). The proxy's
	// public URL's host belongs here.
	Hosts []string
	// Logger receives background JWKS refresh failures. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Authenticator authenticates requests. It is safe for concurrent use.
// Call Close when done if the configuration has a JWKS URL.
type Authenticator struct {
	keys      apiKeys
	jwt       *jwtVerifier // nil when JWT is not configured
	anonymous bool
	origins   []string // Config.BrowserOrigins, canonical
	hosts     []string // Config.Hosts, lower case
}

// maxTokenLen bounds the bearer token before any hashing or parsing. Real
// API keys and JWTs are far smaller; Go's server already caps the header
// block at 1 MiB, which is too much to hand to a JWT parser per request.
const maxTokenLen = 16 << 10

// New validates cfg and returns an Authenticator. Every problem Check finds
// is reported (joined) with the config key that has it, e.g.
// "identity.api_keys[1].key: empty". With a JWKS URL, New fetches the key set
// once and fails if it cannot.
func New(cfg Config) (*Authenticator, error) {
	// Only build the verifier (which may fetch a JWKS) when the config is
	// sound, so one bad key does not cost a network trip.
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	keys, _ := newAPIKeys(cfg.APIKeys)
	a := &Authenticator{keys: keys, anonymous: cfg.Anonymous}
	for _, o := range cfg.BrowserOrigins {
		c, _ := CanonicalOrigin(o) // Check refused the others
		a.origins = append(a.origins, c)
	}
	for _, h := range cfg.Hosts {
		a.hosts = append(a.hosts, strings.TrimSuffix(strings.ToLower(h), "."))
	}
	if cfg.JWT != nil {
		logger := cfg.Logger
		if logger == nil {
			logger = slog.Default()
		}
		v, err := newJWTVerifier(*cfg.JWT, logger)
		if err != nil {
			return nil, err
		}
		a.jwt = v
	}
	return a, nil
}

// Close stops the background JWKS refresh, if any. It is safe to call more
// than once and on an Authenticator without a JWKS URL.
func (a *Authenticator) Close() error {
	if a.jwt == nil {
		return nil
	}
	return a.jwt.close()
}

// Authenticate returns the caller of r. The credential is read only from a
// single "Authorization: Bearer <token>" header (scheme case-insensitive).
// A token equal to a configured API key wins; otherwise a token shaped like a
// compact JWS is verified as a JWT when JWT is configured. Without an
// Authorization header the result is the anonymous subject when allowed,
// except for a web page's request from an origin not in BrowserOrigins, or
// one whose Host a page could have had rebound (browser.go). A present credential that does not verify is always an
// error, even when anonymous access is allowed. Every error wraps
// ErrUnauthenticated.
func (a *Authenticator) Authenticate(r *http.Request) (Subject, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		if a.anonymous {
			if err := anonymousRefusal(r, a.origins, a.hosts); err != nil {
				return Subject{}, err
			}
			return Subject{ID: AnonymousID, Principal: AnonymousPrincipal}, nil
		}
		return Subject{}, errNoCredentials
	case 1:
	default:
		// Two headers could be read differently by toolgate and by whatever
		// sits behind it; refuse rather than pick one.
		return Subject{}, errManyAuthorizations
	}
	token, err := bearerToken(values[0])
	if err != nil {
		return Subject{}, err
	}
	if k, ok := a.keys.lookup(token); ok {
		// Clone so a caller appending to Groups cannot change the config
		// shared by every request.
		return Subject{ID: k.subject, Principal: keyPrincipal(k.subject), Groups: slices.Clone(k.groups), Authenticated: true}, nil
	}
	if a.jwt != nil && looksLikeJWS(token) {
		return a.jwt.verify(r.Context(), token)
	}
	return Subject{}, errUnknownAPIKey
}
