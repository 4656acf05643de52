package identity_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
)

// jwksServer serves whatever JWKS was last set and counts the fetches.
type jwksServer struct {
	*httptest.Server
	body    atomic.Pointer[[]byte]
	status  atomic.Int32
	fetches atomic.Int32
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.set(body)
	s.status.Store(http.StatusOK)
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(s.status.Load()))
		w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(body []byte) { s.body.Store(&body) }

func (s *jwksServer) config() identity.Config {
	return identity.Config{
		JWT: &identity.JWT{
			JWKSURL:    s.URL + "/.well-known/jwks.json",
			HTTPClient: s.Client(), // trusts the test server's certificate
			Issuer:     testIssuer,
			Audience:   []string{testAudience},
		},
		Logger: slog.New(slog.DiscardHandler),
	}
}

func TestJWKSURL(t *testing.T) {
	k1, k2, k3 := testkit.NewKeys(t), testkit.NewKeys(t), testkit.NewKeys(t)
	srv := newJWKSServer(t, testkit.KeySet(t, testkit.PublicJWK(t, &k1.RSA.PublicKey, "k1", "RS256"), testkit.PublicJWK(t, &k1.EC.PublicKey, "ec1", "")))
	a := newAuthenticator(t, srv.config())
	if n := srv.fetches.Load(); n != 1 {
		t.Errorf("fetches after New = %d, want 1", n)
	}

	check := func(token, wantErr string) {
		t.Helper()
		got, err := a.Authenticate(request("Bearer " + token))
		if wantErr != "" {
			checkErr(t, err, wantErr, token)
			return
		}
		if err != nil || got.ID != "user-1" {
			t.Errorf("Authenticate() = %+v, %v; want user-1", got, err)
		}
	}
	check(testkit.Sign(t, jwa.RS256(), k1.RSA, "k1", claims(), nil), "")
	check(testkit.Sign(t, jwa.ES256(), k1.EC, "ec1", claims(), nil), "")

	// The issuer rotates to k2: the first token naming it fetches the set.
	srv.set(testkit.KeySet(t, testkit.PublicJWK(t, &k2.RSA.PublicKey, "k2", "RS256")))
	check(testkit.Sign(t, jwa.RS256(), k2.RSA, "k2", claims(), nil), "")
	if n := srv.fetches.Load(); n != 2 {
		t.Errorf("fetches after rotation = %d, want 2", n)
	}
	check(testkit.Sign(t, jwa.RS256(), k1.RSA, "k1", claims(), nil), "identity: jwt: unknown signing key")

	// Another unknown kid right away does not fetch again: forged kids must
	// not turn into one fetch per request.
	srv.set(testkit.KeySet(t, testkit.PublicJWK(t, &k3.RSA.PublicKey, "k3", "RS256")))
	for range 3 {
		check(testkit.Sign(t, jwa.RS256(), k3.RSA, "k3", claims(), nil), "identity: jwt: unknown signing key")
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Errorf("fetches after more unknown kids = %d, want 2", n)
	}

	if err := a.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
}

// TestJWKSURLOtherKeysLeftOut: a key for another use (encryption) in the
// provider's set is left out, not a failed fetch; so the provider's
// withdrawal of a signing key beside it takes effect at the next fetch.
func TestJWKSURLOtherKeysLeftOut(t *testing.T) {
	k := testkit.NewKeys(t)
	enc := testkit.PublicJWK(t, &testkit.NewKeys(t).RSA.PublicKey, "enc1", "RSA-OAEP")
	if err := enc.Set(jwk.KeyUsageKey, "enc"); err != nil {
		t.Fatal(err)
	}
	srv := newJWKSServer(t, testkit.KeySet(t, testkit.PublicJWK(t, &k.RSA.PublicKey, "k1", "RS256"), enc))
	a := newAuthenticator(t, srv.config())
	if got, err := a.Authenticate(request("Bearer " + testkit.Sign(t, jwa.RS256(), k.RSA, "k1", claims(), nil))); err != nil || got.ID != "user-1" {
		t.Fatalf("Authenticate(k1) = %+v, %v", got, err)
	}
	// k1 withdrawn; the first token naming a kid not known fetches again.
	srv.set(testkit.KeySet(t, testkit.PublicJWK(t, &k.EC.PublicKey, "ec1", ""), enc))
	if got, err := a.Authenticate(request("Bearer " + testkit.Sign(t, jwa.ES256(), k.EC, "ec1", claims(), nil))); err != nil || got.ID != "user-1" {
		t.Fatalf("Authenticate(ec1) after the rotation = %+v, %v", got, err)
	}
	tok := testkit.Sign(t, jwa.RS256(), k.RSA, "k1", claims(), nil)
	_, err := a.Authenticate(request("Bearer " + tok))
	checkErr(t, err, "identity: jwt: unknown signing key", tok)
}

func TestJWKSURLRefused(t *testing.T) {
	k := testkit.NewKeys(t)
	tests := []struct {
		name   string
		body   []byte
		status int
		want   string
	}{
		{name: "server error", body: []byte(`oops`), status: http.StatusInternalServerError, want: "identity.jwt.jwks_url: fetching"},
		{name: "not a JWKS", body: []byte(`<html>`), status: http.StatusOK, want: "identity.jwt.jwks_url: fetching"},
		{name: "symmetric key", body: testkit.KeySet(t, testkit.PublicJWK(t, k.HMAC, "h", "HS256")), status: http.StatusOK, want: "symmetric keys are not accepted from a JWKS URL"},
		{name: "no keys", body: []byte(`{"keys":[]}`), status: http.StatusOK, want: "no keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, tt.body)
			srv.status.Store(int32(tt.status))
			start := time.Now()
			a, err := identity.New(srv.config())
			if err == nil {
				a.Close()
				t.Fatalf("New() error = nil, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %q, want it to contain %q", err, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("New() took %s to fail", d)
			}
		})
	}
}

// TestJWKSURLQueryNotShown: a JWKS URL's query and user information (a
// token there is common) are in neither the start-up error nor the
// warning of a failed refresh, though the client's errors repeat the URL.
func TestJWKSURLQueryNotShown(t *testing.T) {
	const token, pass = "JWKS-QUERY-TOKEN", "JWKS-PASS"
	k1, k2 := testkit.NewKeys(t), testkit.NewKeys(t)
	srv := newJWKSServer(t, testkit.KeySet(t, testkit.PublicJWK(t, &k1.RSA.PublicKey, "k1", "RS256")))
	cfg := srv.config()
	logs := &testkit.Buffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	cfg.JWT.JWKSURL = strings.Replace(srv.URL, "https://", "https://ju:"+pass+"@", 1) + "/jwks?jwkstoken=" + token
	a := newAuthenticator(t, cfg)

	// A refresh fails (an unknown kid asks for one) with the server gone.
	srv.Close()
	a.Authenticate(request("Bearer " + testkit.Sign(t, jwa.RS256(), k2.RSA, "k2", claims(), nil)))
	testkit.WaitFor(t, "the warning", func() bool { return strings.Contains(logs.String(), "failed") })

	// Starting against the server gone fails.
	_, err := identity.New(cfg)
	if err == nil {
		t.Fatal("New() with the server gone succeeded")
	}
	for what, text := range map[string]string{"the warning": logs.String(), "the start-up error": err.Error()} {
		if strings.Contains(text, token) || strings.Contains(text, pass) || !strings.Contains(text, "/jwks?REDACTED") {
			t.Errorf("%s shows the URL's query or password, or not its path: %s", what, text)
		}
	}
}

// TestJWKSRefreshOutlivesItsCaller: the fetch an unknown kid causes runs
// to its end even when the request that caused it is gone. Cut short with
// the request, it still used up the one forced fetch a minute, and the
// issuer's new key stayed unknown for that minute: a caller who sent a
// token naming a new kid and hung up at once could keep a rotation from
// being picked up.
func TestJWKSRefreshOutlivesItsCaller(t *testing.T) {
	k1, k2 := testkit.NewKeys(t), testkit.NewKeys(t)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	for range 10 { // cut short, the fetch was dropped about one time in two
		srv := newJWKSServer(t, testkit.KeySet(t, testkit.PublicJWK(t, &k1.RSA.PublicKey, "k1", "RS256")))
		a := newAuthenticator(t, srv.config())
		srv.set(testkit.KeySet(t, testkit.PublicJWK(t, &k2.RSA.PublicKey, "k2", "RS256")))
		token := "Bearer " + testkit.Sign(t, jwa.RS256(), k2.RSA, "k2", claims(), nil)
		_, _ = a.Authenticate(request(token).WithContext(gone))
		if got, err := a.Authenticate(request(token)); err != nil || got.ID != "user-1" {
			t.Fatalf("after a caller that hung up asked for the new key: %+v, %v (fetches %d)", got, err, srv.fetches.Load())
		}
	}
}
