package signin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

const (
	// discoveryTimeout bounds one attempt to read the issuer's discovery
	// document; exchangeTimeout the code exchange and the token's check.
	discoveryTimeout = 10 * time.Second
	exchangeTimeout  = 15 * time.Second
	// discoveryBackoff is how long a failed discovery is answered from
	// memory before the next attempt, so that an unreachable identity
	// provider costs one attempt per interval, not one per click.
	discoveryBackoff = 5 * time.Second
)

// oidcAuth signs approvers in with the authorization code flow and PKCE,
// and knows them afterwards by a signed session cookie. Identify reads only
// the cookie: it never waits for the identity provider.
type oidcAuth struct {
	cfg         OIDCConfig // with defaults applied
	redirectURL string
	base        string // the public URL's path without a trailing slash: the prefix of links
	home        string // scheme://host + base of the public URL; "" without one
	client      *http.Client
	now         func() time.Time
	log         *slog.Logger
	cookies     cookies
	routes      http.Handler

	// signedOutURL is the post_logout_redirect_uri of RP-Initiated
	// Logout; logoutOrigin the issuer's origin, where the pages' form-action
	// lets a sign-out redirect to ("" with KeepProviderSession).
	signedOutURL string
	logoutOrigin string

	// exchanges bounds the code exchanges with the provider in flight,
	// and has each sign-in's state exchanged once: a sign-in cookie sent
	// again (a browser drops it after one answer) calls the provider no
	// more.
	exchanges *exchangeBound

	mu       sync.Mutex
	provider *discovered // nil until discovery succeeded
	discErr  error       // the last failure, answered until retryAt
	retryAt  time.Time
}

// discovered is what the issuer's discovery document gives.
type discovered struct {
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	// endSession is the provider's end_session_endpoint, nil when it
	// advertises none, or when sign-out is not to use it.
	endSession *url.URL
}

var _ Authenticator = (*oidcAuth)(nil)

// newOIDC builds an oidcAuth from a checked c.
func newOIDC(c OIDCConfig) *oidcAuth {
	if c.UserClaim == "" {
		c.UserClaim = DefaultUserClaim
	}
	if c.GroupsClaim == "" {
		c.GroupsClaim = DefaultGroupsClaim
	}
	if len(c.Scopes) == 0 {
		c.Scopes = DefaultScopes
	}
	if !slices.Contains(c.Scopes, "openid") {
		c.Scopes = append([]string{"openid"}, c.Scopes...)
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	o := &oidcAuth{cfg: c, client: c.HTTPClient, now: c.Now, log: slog.New(slog.DiscardHandler), exchanges: newExchangeBound()}
	if o.client == nil {
		o.client = &http.Client{Timeout: discoveryTimeout}
	}
	// go-oidc reads a discovery document or key set whole, and quotes all
	// of a failed one in its error: the provider's answers are cut at
	// maxProviderBody (a copy: the caller's client stays as it was).
	limited := *o.client
	limited.Transport = limitBodies{base: o.client.Transport}
	limited.CheckRedirect = sameOrigin(o.client.CheckRedirect)
	o.client = &limited
	if o.now == nil {
		o.now = time.Now
	}
	if c.Logger != nil {
		o.log = c.Logger
	}
	secure := false
	if u, err := url.Parse(c.PublicURL); err == nil && c.PublicURL != "" {
		o.base = strings.TrimRight(u.EscapedPath(), "/")
		o.home = u.Scheme + "://" + u.Host + o.base
		// Browsers and HTTP clients do not send a Secure cookie over plain
		// http, so a Secure cookie on an http:// listener would sign
		// nobody in: Secure follows the scheme approvers use.
		secure = u.Scheme == "https"
	}
	o.redirectURL = c.RedirectURL
	if o.redirectURL == "" {
		o.redirectURL = strings.TrimRight(c.PublicURL, "/") + CallbackPath
	} else if u, err := url.Parse(c.RedirectURL); err == nil && c.PublicURL == "" {
		secure = u.Scheme == "https"
	}
	o.signedOutURL = signedOutURL(c.PublicURL, o.redirectURL)
	if u, err := url.Parse(c.Issuer); err == nil && !c.KeepProviderSession && !strings.ContainsAny(u.Host, " \t;,'\"") {
		// It goes into a Content-Security-Policy: nothing that could end
		// a source expression or a directive.
		o.logoutOrigin = strings.ToLower(u.Scheme + "://" + u.Host)
	}
	o.cookies = newCookies(c.CookieSecret, o.base, secure, o.now)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /auth/login", o.login)
	mux.HandleFunc("GET /auth/callback", o.callback)
	// Signing out is harmless but annoying; a cross-site form must not be
	// able to do it.
	mux.Handle("POST /auth/logout", http.NewCrossOriginProtection().Handler(http.HandlerFunc(o.logout)))
	mux.HandleFunc("GET "+SignedOutPath, o.signedOut)
	o.routes = mux
	return o
}

// Identify returns the approver of r's session cookie, with Via "oidc", or
// an error wrapping ErrNoIdentity: no cookie, an expired, malformed or
// forged one.
func (o *oidcAuth) Identify(r *http.Request) (Approver, error) {
	a, err := o.cookies.readSession(r)
	if err == nil && !o.admitted(a) {
		// allowed_groups as configured now, not as it was at sign-in:
		// narrowing it takes effect at once, not after session_ttl.
		return Approver{}, noIdentity("the session's groups are not in allowed_groups")
	}
	return a, err
}

// LogoutURL is where a signed-in approver's page posts to sign out.
func (o *oidcAuth) LogoutURL() string { return o.base + "/auth/logout" }

// LogoutOrigins is the issuer's origin, where POST /auth/logout usually
// redirects to (its end_session_endpoint), so that the pages' form-action
// lets the sign-out form follow; nil with KeepProviderSession.
func (o *oidcAuth) LogoutOrigins() []string {
	if o.logoutOrigin == "" {
		return nil
	}
	return []string{o.logoutOrigin}
}

// Routes serves GET /auth/login, GET /auth/callback, POST /auth/logout and
// GET /auth/signed-out.
func (o *oidcAuth) Routes() http.Handler { return o.routes }

// signedOutURL is the post_logout_redirect_uri: the public URL followed by
// SignedOutPath, as the callback is the public URL followed by
// CallbackPath; without a public URL, redirect_url with its CallbackPath
// replaced by SignedOutPath. It is fixed, so that it can be registered at
// the identity provider.
func signedOutURL(publicURL, redirectURL string) string {
	if publicURL != "" {
		return strings.TrimRight(publicURL, "/") + SignedOutPath
	}
	u, err := url.Parse(redirectURL)
	if err != nil {
		return ""
	}
	u.Path = strings.TrimSuffix(u.Path, CallbackPath) + SignedOutPath
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}

// LoginURL is /auth/login below the public URL's path, coming back to
// returnTo, or to /approvals when returnTo is not a path on this listener.
func (o *oidcAuth) LoginURL(returnTo string) string {
	return o.base + "/auth/login?return=" + url.QueryEscape(localPath(returnTo))
}

// discover returns the issuer's endpoints and keys, reading its discovery
// document on first need. A failure is remembered for discoveryBackoff;
// the start of toolgate never waits for the identity provider.
func (o *oidcAuth) discover(ctx context.Context) (*discovered, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, nil
	}
	if o.discErr != nil && o.now().Before(o.retryAt) {
		return nil, o.discErr
	}
	// Not the request's own context: a browser that gives up must not
	// make the next one wait out a back-off.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discoveryTimeout)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, o.client), o.cfg.Issuer)
	if err != nil {
		o.discErr = fmt.Errorf("signin: discovering the issuer: %w", err)
		o.retryAt = o.now().Add(discoveryBackoff)
		return nil, o.discErr
	}
	var meta struct {
		EndSession  string   `json:"end_session_endpoint"`
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	}
	metaErr := p.Claims(&meta)
	var keys struct {
		JWKS string `json:"jwks_uri"`
	}
	_ = p.Claims(&keys) // the provider read it as a string already
	endpoint := p.Endpoint()
	// The code, the PKCE verifier and the client secret go to the token
	// endpoint, the browser with its code comes from the authorization
	// endpoint, and the ID token is believed on the key set's word: an
	// http:// one of them (a provider behind a TLS proxy advertises them
	// so) would hand the sign-in of any approver to the network.
	for _, e := range [][2]string{{"authorization_endpoint", endpoint.AuthURL}, {"token_endpoint", endpoint.TokenURL}, {"jwks_uri", keys.JWKS}} {
		if _, err := providerURL(e[0], e[1], o.cfg.Issuer); err != nil {
			o.discErr = fmt.Errorf("signin: discovering the issuer: %w", err)
			o.retryAt = o.now().Add(discoveryBackoff)
			return nil, o.discErr
		}
	}
	// The way the client authenticates at the token endpoint, where the
	// provider says it takes only one: guessing costs two requests for
	// each code refused before one succeeded.
	endpoint.AuthStyle = authStyle(meta.AuthMethods)
	d := &discovered{
		oauth: oauth2.Config{
			ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret,
			Endpoint: endpoint, RedirectURL: o.redirectURL, Scopes: o.cfg.Scopes,
		},
		verifier: p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID, Now: o.now}),
	}
	if metaErr == nil && meta.EndSession != "" && !o.cfg.KeepProviderSession {
		if u, err := providerURL("end_session_endpoint", meta.EndSession, o.cfg.Issuer); err != nil {
			o.log.Warn("sign-out will not end the identity provider's session", "err", providerText(err))
		} else {
			d.endSession = u
		}
	}
	o.provider = d
	o.discErr = nil
	return o.provider, nil
}

// providerURL checks an endpoint (named by its member, name) of the
// issuer's discovery document: an absolute https URL (http only on
// loopback, as the issuer may be) without credentials or fragment.
func providerURL(name, raw, issuer string) (*url.URL, error) {
	u, err := url.Parse(raw)
	iss, ierr := url.Parse(issuer)
	switch {
	case err != nil || ierr != nil || u.Host == "" || u.User != nil || u.Fragment != "":
		return nil, fmt.Errorf("signin: the %s %q is not an absolute URL without credentials and fragment", name, raw)
	case u.Scheme == "https":
	case u.Scheme == "http" && iss.Scheme == "http" && Loopback(u.Hostname()):
	default:
		return nil, fmt.Errorf("signin: the %s %q is not an https:// URL", name, raw)
	}
	return u, nil
}

// origin is u's host, lower-cased, with the scheme's default port when it
// names none: https://IdP and https://idp:443 are one origin.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// sameOrigin is a CheckRedirect for the identity provider's client that
// follows a redirect only to the scheme and host it came from, then asks
// next (the caller's own, when it had one): a token request redirected
// elsewhere would carry the client secret, the code and the PKCE verifier
// there, and a discovery document or key set taken from another origin
// would decide who signs in.
func sameOrigin(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != via[0].URL.Scheme || origin(req.URL) != origin(via[0].URL) {
			return fmt.Errorf("signin: the identity provider redirected to another origin (%s://%s)", req.URL.Scheme, req.URL.Host)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("signin: too many redirects")
		}
		return nil
	}
}

// login serves GET /auth/login?return=/path: it remembers a fresh state,
// nonce and PKCE verifier in the sign-in cookie and sends the browser to
// the identity provider.
func (o *oidcAuth) login(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	p, err := o.discover(r.Context())
	if err != nil {
		o.log.Warn("sign-in unavailable", "err", providerText(err))
		w.Header().Set("Retry-After", "5")
		o.page(w, http.StatusServiceUnavailable, "Sign-in unavailable",
			"toolgate cannot reach the identity provider just now. Try again in a minute.", "")
		return
	}
	st := loginState{
		State:    rand.Text(),
		Nonce:    rand.Text(),
		Verifier: oauth2.GenerateVerifier(),
		Return:   localPath(r.URL.Query().Get("return")),
		Expires:  o.now().Add(loginTTL).Unix(),
	}
	if err := o.cookies.setLogin(w, st); err != nil {
		o.page(w, http.StatusInternalServerError, "Sign-in failed", "toolgate could not start the sign-in.", "")
		return
	}
	http.Redirect(w, r, p.oauth.AuthCodeURL(st.State, oauth2.S256ChallengeOption(st.Verifier), oidc.Nonce(st.Nonce)), http.StatusFound)
}

// callback serves GET /auth/callback: the identity provider sends the
// browser back with a code, which is exchanged (with the PKCE verifier)
// for an ID token; a valid token for an admitted approver becomes the
// session cookie.
func (o *oidcAuth) callback(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	q := r.URL.Query()
	again := o.base + "/auth/login"
	st, ok := o.cookies.readLogin(r)
	if !ok {
		o.page(w, http.StatusBadRequest, "Sign-in expired",
			"This sign-in has expired, or was started in another browser.", again)
		return
	}
	if len(q["state"]) != 1 || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(st.State)) != 1 {
		o.log.Warn("sign-in refused", "reason", "state does not match the sign-in cookie")
		o.page(w, http.StatusBadRequest, "Sign-in refused",
			"The answer of the identity provider does not belong to the sign-in this browser started.", again)
		return
	}
	// A state is good for one answer.
	o.cookies.clearLogin(w)
	again += "?return=" + url.QueryEscape(st.Return)
	if e := q.Get("error"); e != "" {
		// Whatever reached the browser's address bar: shown and logged
		// only as a short error code.
		e = errorCode(e)
		o.log.Warn("sign-in refused by the identity provider", "error", e, "description", excerpt(nqschar(q.Get("error_description")), maxDescription))
		o.page(w, http.StatusForbidden, "Sign-in refused",
			"The identity provider did not sign you in ("+e+").", again)
		return
	}
	code := q.Get("code")
	if code == "" {
		o.page(w, http.StatusBadRequest, "Sign-in refused", "The identity provider's answer carries no code.", again)
		return
	}
	p, err := o.discover(r.Context())
	if err != nil {
		o.log.Warn("sign-in unavailable", "err", providerText(err))
		w.Header().Set("Retry-After", "5")
		o.page(w, http.StatusServiceUnavailable, "Sign-in unavailable",
			"toolgate cannot reach the identity provider just now. Try again in a minute.", again)
		return
	}
	release, fresh, ok := o.exchanges.take(st.State, time.Unix(st.Expires, 0), o.now())
	if !fresh {
		o.log.Warn("sign-in refused", "reason", "its state was used before")
		o.page(w, http.StatusBadRequest, "Sign-in refused",
			"This sign-in was used already. Sign in again.", again)
		return
	}
	if !ok {
		o.log.Warn("sign-in refused", "reason", "too many sign-ins at once")
		w.Header().Set("Retry-After", "5")
		o.page(w, http.StatusServiceUnavailable, "Sign-in busy",
			"Too many sign-ins are going on just now. Try again in a few seconds.", again)
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), exchangeTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, o.client)
	tok, err := p.oauth.Exchange(ctx, code, oauth2.VerifierOption(st.Verifier))
	var refused *oauth2.RetrieveError
	switch {
	case err != nil && (!errors.As(err, &refused) || refused.Response != nil && refused.Response.StatusCode >= 500):
		// No answer from the provider (down, too slow, or failing
		// itself): as when discovery fails, a retry may work.
		o.log.Warn("sign-in unavailable: exchanging the code", exchangeFailure(err)...)
		w.Header().Set("Retry-After", "5")
		o.page(w, http.StatusServiceUnavailable, "Sign-in unavailable",
			"toolgate cannot reach the identity provider just now. Try again in a minute.", again)
		return
	case err != nil:
		o.log.Warn("sign-in failed: exchanging the code", exchangeFailure(err)...)
		o.page(w, http.StatusBadGateway, "Sign-in failed", "The identity provider did not accept the sign-in's code.", again)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		o.log.Warn("sign-in failed", "reason", "the token response holds no id_token")
		o.page(w, http.StatusBadGateway, "Sign-in failed", "The identity provider sent no ID token.", again)
		return
	}
	idt, err := p.verifier.Verify(ctx, raw)
	if err != nil {
		// A key set the provider failed to serve is quoted in err.
		o.log.Warn("sign-in failed: verifying the ID token", "err", providerText(err))
		o.page(w, http.StatusBadGateway, "Sign-in failed", "The identity provider's ID token is not valid.", again)
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		o.log.Warn("sign-in refused", "reason", "the ID token's nonce does not match the sign-in cookie")
		o.page(w, http.StatusBadRequest, "Sign-in refused", "The ID token does not belong to this sign-in.", again)
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		o.page(w, http.StatusBadGateway, "Sign-in failed", "The identity provider's ID token cannot be read.", again)
		return
	}
	if err := o.issuedFor(idt.Audience, idt.IssuedAt, claims); err != nil {
		o.log.Warn("sign-in failed: verifying the ID token", "err", err)
		o.page(w, http.StatusBadGateway, "Sign-in failed", "The identity provider's ID token is not valid.", again)
		return
	}
	a, err := o.approver(claims)
	if err != nil {
		o.log.Warn("sign-in refused", "reason", err.Error())
		o.page(w, http.StatusForbidden, "Sign-in refused", err.Error(), "")
		return
	}
	if !o.admitted(a) {
		o.log.Warn("sign-in refused", "approver", a.Name, "reason", "in none of allowed_groups")
		o.page(w, http.StatusForbidden, "Sign-in refused",
			a.Name+" is in none of the groups allowed to approve here.", "")
		return
	}
	s := session{Name: a.Name, Groups: a.Groups, Expires: o.now().Add(o.cfg.SessionTTL).Unix()}
	hint := ""
	if p.endSession != nil {
		hint = raw // for id_token_hint at sign-out, when it fits
	}
	if err := o.cookies.setSessionWithHint(w, s, hint); err != nil {
		o.log.Warn("sign-in refused", "approver", a.Name, "reason", err.Error(), "groups", len(a.Groups))
		o.page(w, http.StatusForbidden, "Sign-in refused",
			"Your groups do not fit in a session cookie. Ask the identity provider's administrators to send fewer groups in the "+o.cfg.GroupsClaim+" claim to this client.", "")
		return
	}
	// The path is checked again: the sign-in cookie may have been sealed
	// by an older toolgate that checked less. An absolute URL on the
	// public URL's host leaves nothing for http.Redirect or the browser to
	// interpret.
	http.Redirect(w, r, o.home+localPath(st.Return), http.StatusSeeOther)
}

// maxErrorCode and maxDescription bound what is logged of an identity
// provider's error: its text is another system's, unverified, and may
// carry what a caller put into the request.
const (
	maxErrorCode   = 64
	maxDescription = 200
)

// exchangeFailure returns the log attributes of a failed code exchange.
// Of a provider's answer it keeps the HTTP status and the OAuth 2.0 error
// code (errorCode), never the body: RetrieveError's message holds the
// whole of it, up to a MiB, and the description it quotes.
func exchangeFailure(err error) []any {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return []any{"err", err} // no answer: a transport error or a timeout
	}
	var attrs []any
	if re.Response != nil {
		attrs = append(attrs, "status", re.Response.StatusCode)
	}
	if re.ErrorCode != "" {
		attrs = append(attrs, "error", errorCode(re.ErrorCode))
	}
	return attrs
}

// errorCode is s as an OAuth 2.0 error code may be written (RFC 6749
// section 5.2), cut to maxErrorCode bytes: see nqschar.
func errorCode(s string) string { return excerpt(nqschar(s), maxErrorCode) }

// nqschar is s with every character an OAuth 2.0 error code or
// description may not hold (anything but printable ASCII, and " and \)
// replaced with ?.
func nqschar(s string) string { return asciiText(s, `"\`) }

// asciiText is s with every character outside printable ASCII, and each
// of also, replaced with ?: text from another system, for the log.
func asciiText(s, also string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || strings.ContainsRune(also, r) {
			return '?'
		}
		return r
	}, s)
}

// maxProviderBody bounds what is read of any answer of the identity
// provider (the token endpoint's oauth2 bounds itself, at 1 MiB); a
// larger discovery document or key set fails to parse.
const maxProviderBody = 1 << 20

// limitBodies cuts every response body at maxProviderBody.
type limitBodies struct{ base http.RoundTripper }

func (l limitBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	base := l.base
	if base == nil {
		base = http.DefaultTransport
	}
	res, err := base.RoundTrip(r)
	if err == nil {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(res.Body, maxProviderBody), res.Body}
	}
	return res, err
}

// maxProviderText bounds an error quoting the identity provider's answer
// in the log.
const maxProviderText = 300

// providerText is err's message for the log: go-oidc quotes the body of
// a failed discovery or key set fetch in it, so it is cut to
// maxProviderText bytes, control and non-ASCII characters replaced with ?.
func providerText(err error) string { return excerpt(asciiText(err.Error(), ""), maxProviderText) }

// excerpt is s cut to at most n bytes on a character boundary, with "…"
// when cut.
func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// admitted reports whether a may sign in: a is in one of allowed_groups,
// or allowed_groups is ["*"]. Check has made sure it is set.
// issuedFor checks what the verifier leaves to the client (OpenID Connect
// Core 3.1.3.7): a token with several audiences, or any azp, must name
// this client as its authorized party, so a token issued to another client
// that also lists toolgate is not taken; and a token must not be issued in
// the future (beyond the clock skew allowed).
func (o *oidcAuth) issuedFor(aud []string, iat time.Time, claims map[string]any) error {
	azp, has := claims["azp"]
	switch {
	case has && azp != o.cfg.ClientID:
		return errors.New("the ID token's azp is another client")
	case !has && len(aud) > 1:
		return errors.New("the ID token has several audiences and no azp")
	case iat.After(o.now().Add(clockSkew)):
		return errors.New("the ID token is issued in the future")
	}
	return nil
}

// clockSkew is how far the provider's clock may be ahead of toolgate's.
const clockSkew = time.Minute

func (o *oidcAuth) admitted(a Approver) bool {
	if len(o.cfg.AllowedGroups) == 1 && o.cfg.AllowedGroups[0] == AllowEveryone {
		return true
	}
	return slices.ContainsFunc(a.Groups, func(g string) bool { return slices.Contains(o.cfg.AllowedGroups, g) })
}

// approver reads the approver from verified ID token claims.
func (o *oidcAuth) approver(claims map[string]any) (Approver, error) {
	name, ok := claims[o.cfg.UserClaim].(string)
	if !ok || name == "" {
		return Approver{}, fmt.Errorf("the ID token has no %s claim", o.cfg.UserClaim)
	}
	// An address the provider says it has not verified may belong to
	// somebody else. Anything but a boolean true ("false", "true", 0) is
	// not a verification. A provider that never sends the claim is
	// believed; with such a provider, user_claim should be a stable
	// identifier (sub, oid) rather than an address the user may change.
	if o.cfg.UserClaim == "email" {
		if v, present := claims["email_verified"]; present && v != true {
			return Approver{}, errors.New("the identity provider has not verified your e-mail address")
		}
	}
	if err := checkName(name); err != nil {
		return Approver{}, err
	}
	var groups []string
	switch g := claims[o.cfg.GroupsClaim].(type) {
	case nil:
	case string:
		groups = []string{g}
	case []any:
		for _, e := range g {
			s, ok := e.(string)
			if !ok {
				return Approver{}, fmt.Errorf("the ID token's %s claim holds a value that is not a string", o.cfg.GroupsClaim)
			}
			groups = append(groups, s)
		}
	default:
		return Approver{}, fmt.Errorf("the ID token's %s claim is neither a string nor a list of strings", o.cfg.GroupsClaim)
	}
	groups = dedupe(groups)
	if err := checkGroups(groups); err != nil {
		return Approver{}, err
	}
	return Approver{Name: name, Groups: groups, Via: ViaOIDC}, nil
}

// logout serves POST /auth/logout: it removes the session cookie and, when
// the identity provider advertises an end_session_endpoint, sends the
// browser there (OpenID Connect RP-Initiated Logout 1.0) with client_id,
// post_logout_redirect_uri and, when the session kept it, id_token_hint,
// so that signing in again asks for the password again. No state is sent:
// the signed-out page the provider returns to changes nothing, so there is
// nothing to tie to this request.
func (o *oidcAuth) logout(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	hint := o.cookies.idTokenHint(r)
	o.cookies.clearSession(w)
	signIn := o.base + "/auth/login"
	if o.cfg.KeepProviderSession {
		o.page(w, http.StatusOK, "Signed out", "You are signed out of toolgate's approvals.", signIn)
		return
	}
	p, err := o.discover(r.Context())
	if err != nil {
		o.log.Warn("signed out of toolgate only: the identity provider's session is not ended", "err", providerText(err))
		o.page(w, http.StatusOK, "Signed out of toolgate only",
			"You are signed out of toolgate's approvals, but toolgate cannot reach the identity provider just now to end your session there: close the browser, or sign out at the identity provider.", signIn)
		return
	}
	if p.endSession == nil {
		o.page(w, http.StatusOK, "Signed out", "You are signed out of toolgate's approvals.", signIn)
		return
	}
	to := *p.endSession
	q := to.Query()
	q.Set("client_id", o.cfg.ClientID)
	q.Set("post_logout_redirect_uri", o.signedOutURL)
	if hint != "" {
		q.Set("id_token_hint", hint)
	}
	to.RawQuery = q.Encode()
	if strings.EqualFold(to.Scheme+"://"+to.Host, o.logoutOrigin) {
		http.Redirect(w, r, to.String(), http.StatusSeeOther)
		return
	}
	// The pages' form-action allows the issuer's origin only, and browsers
	// check it on the redirects that follow a form: an endpoint elsewhere
	// is reached by a refresh instead, which form-action does not govern.
	w.Header().Set("Refresh", "0; url="+to.String())
	o.pageLink(w, http.StatusOK, "Signing out", "You are signed out of toolgate's approvals; your session at the identity provider is ending.", to.String(), "Continue to the identity provider")
}

// signedOut serves GET /auth/signed-out, where the identity provider sends
// the browser back after ending its session. It only shows a page: it sets
// no cookie and signs nobody in.
func (o *oidcAuth) signedOut(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	if _, err := o.cookies.readSession(r); err == nil {
		o.pageLink(w, http.StatusOK, "Still signed in",
			"This browser is signed in to toolgate's approvals: sign out from an approvals page.", o.base+"/approvals", "Approvals")
		return
	}
	o.page(w, http.StatusOK, "Signed out",
		"You are signed out of toolgate's approvals, and the identity provider was asked to end your session there.", o.base+"/auth/login")
}

// localPath returns p, its path cleaned, when it is a path on this
// listener, and /approvals otherwise: "//host" and "/\host" are other sites
// to a browser, and a sign-in must never end on another site (an open
// redirect). A backslash is refused wherever it stands: browsers read it as
// a slash, and cleaning "/./\host" gives "/\host". Control characters are
// refused too: browsers drop tabs and newlines from URLs ("/\t/host").
func localPath(p string) string {
	const fallback = "/approvals"
	if strings.ContainsFunc(p, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) || !utf8.ValidString(p) {
		return fallback
	}
	// Clean the path (http.Redirect would, for a relative URL) before the
	// checks, so that what is checked is what is sent.
	i := strings.IndexAny(p, "?#")
	if i < 0 {
		i = len(p)
	}
	pth, rest := p[:i], p[i:]
	if !strings.HasPrefix(pth, "/") {
		return fallback
	}
	clean := path.Clean(pth)
	if strings.HasSuffix(pth, "/") && clean != "/" {
		clean += "/"
	}
	if strings.HasPrefix(pth, "//") || strings.HasPrefix(clean, "//") {
		return fallback
	}
	p = clean + rest
	if u, err := url.Parse(p); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return fallback
	}
	return p
}

func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>{{.Title}} · toolgate</title></head>
<body><h1>{{.Title}}</h1><p>{{.Msg}}</p>{{if .Link}}<p><a href="{{.Link}}">{{.LinkText}}</a></p>{{end}}</body></html>
`))

// page writes a minimal HTML page; link, when set, offers to sign in.
func (o *oidcAuth) page(w http.ResponseWriter, status int, title, msg, link string) {
	o.pageLink(w, status, title, msg, link, "Sign in")
}

// pageLink writes a minimal HTML page; link, when set, is offered as text.
func (o *oidcAuth) pageLink(w http.ResponseWriter, status int, title, msg, link, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = pageTmpl.Execute(w, struct{ Title, Msg, Link, LinkText string }{title, msg, link, text})
}
