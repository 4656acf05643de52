package testkit

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// OIDCUser is who the OIDCProvider signs in: its authorize endpoint asks
// nobody and answers for this user at once.
type OIDCUser struct {
	Subject string   // sub; "" means Email
	Email   string   // email (email_verified is true)
	Groups  []string // groups; nil leaves the claim out
	// Claims are set in the ID token last, over the ones above; a nil
	// value removes a claim ("email": nil, "nonce": "other", "aud": "x").
	Claims map[string]any
}

// OIDCProvider is an OpenID Connect issuer in the test process, for one
// client: discovery (/.well-known/openid-configuration), a JWKS (/jwks, one
// RS256 key), an authorize endpoint (/authorize) that redirects straight
// back to the client's redirect_uri with a code and the state, and a token
// endpoint (/token) that checks the client's credentials (Basic or form),
// the code (once), the redirect_uri and the PKCE S256 code_verifier, and
// answers with an RS256 ID token (iss, aud, sub, email, email_verified,
// groups, nonce, iat, exp). With SetEndSession it also advertises an
// end_session_endpoint and serves RP-Initiated Logout at /logout. Its URL
// is the issuer. It is safe for concurrent use and closed when the test
// ends.
type OIDCProvider struct {
	*httptest.Server
	ClientID, ClientSecret string

	key  *rsa.PrivateKey
	jwks []byte

	mu    sync.Mutex
	user  OIDCUser
	down  bool
	now   func() time.Time
	codes map[string]oidcGrant
	hits  map[string]int

	tokenAnswer *cannedAnswer // what POST /token answers instead, when set

	endSession string       // the advertised end_session_endpoint; "" for none
	postLogout string       // the one registered post_logout_redirect_uri
	logouts    []url.Values // the queries /logout received
}

// oidcGrant is what an issued code stands for.
type oidcGrant struct {
	user               OIDCUser
	redirectURI, nonce string
	challenge          string
	clientID           string
	scope              string
}

// NewOIDCProvider starts an OIDCProvider for the client clientID with
// secret clientSecret. It signs in alice@example.com (groups dev) until
// SetUser says otherwise.
func NewOIDCProvider(tb testing.TB, clientID, clientSecret string) *OIDCProvider {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	p := &OIDCProvider{
		ClientID: clientID, ClientSecret: clientSecret,
		key:   key,
		jwks:  KeySet(tb, PublicJWK(tb, &key.PublicKey, "oidc", "RS256")),
		user:  OIDCUser{Email: "alice@example.com", Groups: []string{"dev"}},
		now:   time.Now,
		codes: map[string]oidcGrant{},
		hits:  map[string]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /jwks", p.keys)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	mux.HandleFunc("GET /logout", p.logout)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		down := p.down
		_, pattern := mux.Handler(r)
		p.hits[pattern]++
		p.mu.Unlock()
		if down {
			http.Error(w, "identity provider down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	tb.Cleanup(p.Close)
	return p
}

// SetUser makes u the user signed in from now on.
func (p *OIDCProvider) SetUser(u OIDCUser) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = u
}

// SetDown makes every endpoint answer 503 (down) or serve again.
func (p *OIDCProvider) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// cannedAnswer is a fixed HTTP answer.
type cannedAnswer struct {
	status            int
	contentType, body string
}

// SetTokenAnswer makes POST /token answer status with the given
// Content-Type and body, whatever it is asked (status 0: serve again).
func (p *OIDCProvider) SetTokenAnswer(status int, contentType, body string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokenAnswer = nil
	if status != 0 {
		p.tokenAnswer = &cannedAnswer{status, contentType, body}
	}
}

// SetNow sets the clock of the ID tokens' iat and exp (time.Now by
// default).
func (p *OIDCProvider) SetNow(now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
}

// SetEndSession makes the discovery document advertise endpoint as the
// end_session_endpoint ("" advertises none, the default), and registers
// postLogoutRedirectURI as the client's one post_logout_redirect_uri. The
// provider's own endpoint is its URL + "/logout".
func (p *OIDCProvider) SetEndSession(endpoint, postLogoutRedirectURI string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endSession, p.postLogout = endpoint, postLogoutRedirectURI
}

// Logouts returns the queries /logout received, in order.
func (p *OIDCProvider) Logouts() []url.Values {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.logouts)
}

// Hits returns how many requests an endpoint received, by its pattern
// ("GET /.well-known/openid-configuration", "POST /token"), answered or
// not.
func (p *OIDCProvider) Hits(pattern string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[pattern]
}

func (p *OIDCProvider) discovery(w http.ResponseWriter, _ *http.Request) {
	doc := map[string]any{
		"issuer":                                p.URL,
		"authorization_endpoint":                p.URL + "/authorize",
		"token_endpoint":                        p.URL + "/token",
		"jwks_uri":                              p.URL + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"scopes_supported":                      []string{"openid", "email", "profile", "groups"},
		"claims_supported":                      []string{"sub", "email", "email_verified", "groups"},
	}
	p.mu.Lock()
	if p.endSession != "" {
		doc["end_session_endpoint"] = p.endSession
	}
	p.mu.Unlock()
	writeJSONBody(w, http.StatusOK, doc)
}

// logout serves RP-Initiated Logout 1.0 as a provider that asks nobody:
// the client is named by client_id or by an id_token_hint this provider
// signed for it (both, when both are sent), and a post_logout_redirect_uri
// must be the registered one; the browser is then sent there, with the
// state if one was given. Without post_logout_redirect_uri it answers 200.
func (p *OIDCProvider) logout(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	p.logouts = append(p.logouts, q)
	registered := p.postLogout
	p.mu.Unlock()
	client := q.Get("client_id")
	if hint := q.Get("id_token_hint"); hint != "" {
		payload, err := jws.Verify([]byte(hint), jws.WithKey(jwa.RS256(), &p.key.PublicKey))
		var claims struct {
			Aud any `json:"aud"`
		}
		if err != nil || json.Unmarshal(payload, &claims) != nil || claims.Aud != p.ClientID {
			http.Error(w, "id_token_hint is not an ID token of this provider for this client", http.StatusBadRequest)
			return
		}
		if client == "" {
			client = p.ClientID
		}
	}
	if client != p.ClientID {
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	}
	to := q.Get("post_logout_redirect_uri")
	if to == "" {
		_, _ = w.Write([]byte("signed out\n"))
		return
	}
	ru, err := url.Parse(to)
	if to != registered || err != nil {
		http.Error(w, "post_logout_redirect_uri is not registered", http.StatusBadRequest)
		return
	}
	if st := q.Get("state"); st != "" {
		back := ru.Query()
		back.Set("state", st)
		ru.RawQuery = back.Encode()
	}
	http.Redirect(w, r, ru.String(), http.StatusFound)
}

func (p *OIDCProvider) keys(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(p.jwks)
}

// authorize answers as if the user had signed in and consented: it sends
// the browser back to redirect_uri with a fresh code and the state.
func (p *OIDCProvider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ru, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case q.Get("client_id") != p.ClientID:
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	case err != nil || !ru.IsAbs():
		http.Error(w, "redirect_uri is not an absolute URL", http.StatusBadRequest)
		return
	}
	back := ru.Query()
	back.Set("state", q.Get("state"))
	switch {
	case q.Get("response_type") != "code":
		back.Set("error", "unsupported_response_type")
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		back.Set("error", "invalid_request")
		back.Set("error_description", "PKCE with S256 is required")
	default:
		code := rand.Text()
		p.mu.Lock()
		p.codes[code] = oidcGrant{
			user: p.user, redirectURI: q.Get("redirect_uri"), nonce: q.Get("nonce"),
			challenge: q.Get("code_challenge"), clientID: q.Get("client_id"), scope: q.Get("scope"),
		}
		p.mu.Unlock()
		back.Set("code", code)
	}
	ru.RawQuery = back.Encode()
	http.Redirect(w, r, ru.String(), http.StatusFound)
}

// token exchanges a code for tokens, checking everything a real provider
// checks, and answers errors as RFC 6749 section 5.2 does.
func (p *OIDCProvider) token(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	canned := p.tokenAnswer
	p.mu.Unlock()
	if canned != nil {
		w.Header().Set("Content-Type", canned.contentType)
		w.WriteHeader(canned.status)
		_, _ = io.WriteString(w, canned.body)
		return
	}
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		// RFC 6749 section 2.3.1: the Basic credentials are form-encoded.
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(p.ClientSecret)) != 1 {
		tokenError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	code := r.PostForm.Get("code")
	p.mu.Lock()
	g, found := p.codes[code]
	delete(p.codes, code) // a code is good once, right or wrong
	now := p.now()
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case !found, g.clientID != id:
		tokenError(w, http.StatusBadRequest, "invalid_grant")
		return
	case r.PostForm.Get("redirect_uri") != g.redirectURI:
		tokenError(w, http.StatusBadRequest, "invalid_grant")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		tokenError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	sub := g.user.Subject
	if sub == "" {
		sub = g.user.Email
	}
	claims := map[string]any{
		"iss":            p.URL,
		"aud":            p.ClientID,
		"sub":            sub,
		"email":          g.user.Email,
		"email_verified": true,
		"iat":            now.Unix(),
		"exp":            now.Add(5 * time.Minute).Unix(),
	}
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	if g.user.Groups != nil {
		claims["groups"] = g.user.Groups
	}
	for _, k := range slices.Sorted(maps.Keys(g.user.Claims)) {
		if v := g.user.Claims[k]; v == nil {
			delete(claims, k)
		} else {
			claims[k] = v
		}
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		tokenError(w, http.StatusInternalServerError, "server_error")
		return
	}
	hdr := jws.NewHeaders()
	if err := hdr.Set(jws.KeyIDKey, "oidc"); err != nil {
		tokenError(w, http.StatusInternalServerError, "server_error")
		return
	}
	idToken, err := jws.Sign(payload, jws.WithKey(jwa.RS256(), p.key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		tokenError(w, http.StatusInternalServerError, "server_error")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSONBody(w, http.StatusOK, map[string]any{
		"access_token": rand.Text(),
		"token_type":   "Bearer",
		"expires_in":   300,
		"scope":        g.scope,
		"id_token":     string(idToken),
	})
}

func tokenError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSONBody(w, status, map[string]string{"error": code})
}

func writeJSONBody(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Browser returns an HTTP client with its own cookie jar that follows
// redirects, as a browser does: Get of a sign-in URL walks through the
// OIDCProvider and back. Like a browser, the jar never sends a Secure
// cookie over http://. Set CheckRedirect to
// func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
// to walk a sign-in step by step.
func Browser(tb testing.TB) *http.Client {
	tb.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}
