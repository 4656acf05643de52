package signin

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"

	"github.com/toolgate/toolgate/internal/testkit"
)

// plainRecorder is a plain-http server that records what reaches it.
type plainRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newPlainRecorder(t *testing.T) *plainRecorder {
	r := &plainRecorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+req.URL.String()+" auth="+req.Header.Get("Authorization")+" body="+string(b))
		r.mu.Unlock()
		http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *plainRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// issuerWithPlainEndpoints is an https issuer whose discovery document
// points the endpoint named by plainMember (token_endpoint, jwks_uri or
// authorization_endpoint; all three when empty) at plain, an http URL, as
// a provider behind a TLS-terminating proxy that is not told the scheme
// advertises them.
func issuerWithPlainEndpoints(t *testing.T, plain, plainMember string, methods []string) *httptest.Server {
	var iss *httptest.Server
	iss = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		doc := map[string]any{
			"issuer":                                iss.URL,
			"authorization_endpoint":                iss.URL + "/authorize",
			"token_endpoint":                        iss.URL + "/token",
			"jwks_uri":                              iss.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
		}
		for member, path := range map[string]string{"authorization_endpoint": "/authorize", "token_endpoint": "/token", "jwks_uri": "/jwks"} {
			if plainMember == "" || plainMember == member {
				doc[member] = plain + path
			}
		}
		if methods != nil {
			doc["token_endpoint_auth_methods_supported"] = methods
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(iss.Close)
	return iss
}

// TestPlainProviderEndpointsRefused: an https issuer whose discovery
// document names an http:// token endpoint (which would receive the client
// secret, the code and the PKCE verifier in clear, whichever way the client
// authenticates), key set or authorization endpoint is not used: sign-in
// is unavailable, and nothing is sent there.
func TestPlainProviderEndpointsRefused(t *testing.T) {
	for _, tc := range []struct {
		member  string
		methods []string
	}{
		{"token_endpoint", []string{"client_secret_basic"}},
		{"token_endpoint", []string{"client_secret_post"}},
		{"jwks_uri", nil},
		{"authorization_endpoint", nil},
	} {
		t.Run(tc.member+fmt.Sprint(tc.methods), func(t *testing.T) {
			rec := newPlainRecorder(t)
			iss := issuerWithPlainEndpoints(t, rec.URL, tc.member, tc.methods)
			a, lst := signinBehind(t, iss, AllowEveryone, nil)
			c := stepper(t)
			res, body := get(t, c, lst.URL+a.LoginURL("/approvals"))
			if res.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("login: %d, want 503 (sign-in unavailable)\n%s", res.StatusCode, body)
			}
			get(t, c, lst.URL+"/auth/callback?code=the-code&state=x")
			if seen := rec.all(); len(seen) > 0 {
				t.Errorf("the plain-http endpoint was used: %v", seen)
			}
		})
	}
}

// TestProviderRedirectElsewhereRefused: a 307 from the token endpoint to
// another origin (here plain http, another port) is not followed, so the
// form it would post again (the client secret, the code and the PKCE
// verifier) never gets there, and nobody is signed in.
func TestProviderRedirectElsewhereRefused(t *testing.T) {
	rec := newPlainRecorder(t)
	var iss *httptest.Server
	iss = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"issuer": iss.URL, "authorization_endpoint": iss.URL + "/authorize",
				"token_endpoint": iss.URL + "/token", "jwks_uri": iss.URL + "/jwks",
				"id_token_signing_alg_values_supported": []string{"RS256"},
				"token_endpoint_auth_methods_supported": []string{"client_secret_post"},
			})
		case "/token":
			http.Redirect(w, r, rec.URL+"/elsewhere", http.StatusTemporaryRedirect)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(iss.Close)
	a, lst := signinBehind(t, iss, AllowEveryone, nil)
	c := stepper(t)
	res, body := get(t, c, lst.URL+a.LoginURL("/approvals"))
	if res.StatusCode != http.StatusFound {
		t.Fatalf("login: %d %s", res.StatusCode, body)
	}
	loc, _ := url.Parse(res.Header.Get("Location"))
	res, _ = get(t, c, lst.URL+"/auth/callback?code=the-code&state="+url.QueryEscape(loc.Query().Get("state")))
	if res.StatusCode < 400 {
		t.Errorf("callback: %d, want the exchange failed", res.StatusCode)
	}
	if seen := rec.all(); len(seen) > 0 {
		t.Errorf("the redirect was followed to another origin: %v", seen)
	}
}

// TestPlainKeySetSignsNobodyIn: were an http:// jwks_uri and token
// endpoint used, whoever answers on that path (here "mitm") could start a
// sign-in in its own browser (so it knows the nonce), answer the code
// exchange with an ID token signed by its own key and serve that key as
// the key set: a session for any approver it names. Discovery refuses such
// a document instead.
func TestPlainKeySetSignsNobodyIn(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var issURL string
	var nonce atomic.Value
	nonce.Store("")
	mitm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/jwks":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(testkit.KeySet(t, testkit.PublicJWK(t, &key.PublicKey, "evil", "RS256")))
		case "/token":
			now := time.Now()
			idt := testkit.Sign(t, jwa.RS256(), key, "evil", map[string]any{
				"iss": issURL, "aud": "toolgate", "sub": "boss@example.com", "email": "boss@example.com",
				"email_verified": true, "groups": []string{"approvers"}, "nonce": nonce.Load().(string),
				"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
			}, nil)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "a", "token_type": "Bearer", "id_token": idt, "expires_in": 300})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(mitm.Close)
	iss := issuerWithPlainEndpoints(t, mitm.URL, "", []string{"client_secret_basic"})
	issURL = iss.URL
	a, lst := signinBehind(t, iss, "approvers", func(a Authenticator, mux *http.ServeMux) {
		mux.HandleFunc("/approvals", func(w http.ResponseWriter, r *http.Request) {
			ap, err := a.Identify(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			fmt.Fprintf(w, "signed in as %s %v", ap.Name, ap.Groups)
		})
	})
	c := stepper(t)
	res, _ := get(t, c, lst.URL+a.LoginURL("/approvals"))
	loc, _ := url.Parse(res.Header.Get("Location"))
	nonce.Store(loc.Query().Get("nonce"))
	get(t, c, lst.URL+"/auth/callback?code=anything&state="+url.QueryEscape(loc.Query().Get("state")))
	res, body := get(t, c, lst.URL+"/approvals")
	if res.StatusCode == http.StatusOK {
		t.Errorf("signed in through an http:// key set and token endpoint: %s", body)
	}
}

// signinBehind serves OIDC sign-in against iss (its client trusting iss's
// certificate) on a listener of its own, admitting group; more, when set,
// adds routes beside /auth/.
func signinBehind(t *testing.T, iss *httptest.Server, group string, more func(Authenticator, *http.ServeMux)) (Authenticator, *httptest.Server) {
	t.Helper()
	var h http.Handler
	lst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(lst.Close)
	a, err := New(Config{Type: TypeOIDC, OIDC: OIDCConfig{
		Issuer: iss.URL, ClientID: "toolgate", ClientSecret: "client-secret-0123",
		PublicURL: lst.URL, CookieSecret: cookieSecret, AllowedGroups: []string{group},
		HTTPClient: iss.Client(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/auth/", a.Routes())
	if more != nil {
		more(a, mux)
	}
	h = mux
	return a, lst
}

// TestOriginDefaultPort: a redirect to the same origin spelt with the
// scheme's default port, or the host in another case, is the same origin.
func TestOriginDefaultPort(t *testing.T) {
	for _, pair := range [][2]string{
		{"https://idp.example.com/a", "https://idp.example.com:443/b"},
		{"https://IdP.example.com/a", "https://idp.example.com/b"},
		{"http://127.0.0.1/a", "http://127.0.0.1:80/b"},
	} {
		a, _ := url.Parse(pair[0])
		b, _ := url.Parse(pair[1])
		if origin(a) != origin(b) {
			t.Errorf("%s and %s: %q and %q, want one origin", pair[0], pair[1], origin(a), origin(b))
		}
	}
	a, _ := url.Parse("https://idp.example.com/a")
	for _, other := range []string{"http://idp.example.com/a", "https://idp.example.com:8443/a", "https://evil.example.com/a"} {
		b, _ := url.Parse(other)
		if origin(a) == origin(b) && a.Scheme == b.Scheme {
			t.Errorf("%s is the same origin as %s", other, a)
		}
	}
}
