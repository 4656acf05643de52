package identity_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwa"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
)

const (
	testIssuer   = "https://issuer.example"
	testAudience = "toolgate"
	// user1 is the principal of user-1's tokens.
	user1 = "jwt:" + testIssuer + "#user-1"
)

// testIssuerClaims mints the claims of the issuer the tests trust, for an
// audience of two.
var testIssuerClaims = testkit.Issuer{URL: testIssuer, Audience: []string{"other", testAudience}}

// claims returns a valid claim set for user-1, changed by kv pairs; a nil
// value removes the claim.
func claims(kv ...any) map[string]any {
	tenant := map[string]any{"id": 12345678901234567, "tags": []any{"a", true, nil}}
	return testIssuerClaims.Claims("user-1", append([]any{"email", "user-1@example.com", "tenant", tenant}, kv...)...)
}

func jwtConfig(jwksFile string) identity.Config {
	return identity.Config{
		APIKeys: testAPIKeys,
		JWT: &identity.JWT{
			JWKSFile: jwksFile,
			Issuer:   testIssuer,
			Audience: []string{testAudience, "toolgate-staging"},
		},
	}
}

func TestJWT(t *testing.T) {
	keys := testkit.NewKeys(t)
	a := newAuthenticator(t, jwtConfig(testkit.WriteJWKS(t, keys.JWKS(t))))
	pemRSA := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&keys.RSA.PublicKey))})
	derRSA := must(x509.MarshalPKIXPublicKey(&keys.RSA.PublicKey))
	rsaJWK := must(json.Marshal(testkit.PublicJWK(t, &keys.RSA.PublicKey, "rsa", "RS256")))

	// Each claim set is made once: the token and the expected claims must
	// share exp and iat even when a second ticks over in between.
	valid := claims()
	groupString := claims("groups", "dev  ops", "aud", "toolgate-staging")
	noGroups := claims("groups", nil)
	want := identity.Subject{ID: "user-1", Principal: user1, Groups: []string{"dev", "ops"}, Claims: testkit.AsJSON(t, valid), Authenticated: true}

	tests := []struct {
		name    string
		token   string
		want    identity.Subject
		wantErr string
	}{
		{name: "RS256", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", valid, nil), want: want},
		{name: "ES256, key without alg", token: testkit.Sign(t, jwa.ES256(), keys.EC, "ec", valid, nil), want: want},
		{name: "HS256", token: testkit.Sign(t, jwa.HS256(), keys.HMAC, "hmac", valid, nil), want: want},
		{name: "EdDSA", token: testkit.Sign(t, jwa.EdDSA(), keys.Ed, "ed", valid, nil), want: want},
		{
			name:  "groups as a space-separated string, single audience",
			token: testkit.Sign(t, jwa.ES256(), keys.EC, "ec", groupString, nil),
			want:  identity.Subject{ID: "user-1", Principal: user1, Groups: []string{"dev", "ops"}, Claims: testkit.AsJSON(t, groupString), Authenticated: true},
		},
		{
			name:  "no groups claim",
			token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", noGroups, nil),
			want:  identity.Subject{ID: "user-1", Principal: user1, Claims: testkit.AsJSON(t, noGroups), Authenticated: true},
		},
		{
			name:  "expired within leeway",
			token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("exp", time.Now().Add(-10*time.Second).Unix()), nil),
			want:  identity.Subject{ID: "user-1", Principal: user1, Groups: []string{"dev", "ops"}, Authenticated: true},
		},
		{
			name:  "not yet valid within leeway",
			token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("nbf", time.Now().Add(10*time.Second).Unix()), nil),
			want:  identity.Subject{ID: "user-1", Principal: user1, Groups: []string{"dev", "ops"}, Authenticated: true},
		},
		{name: "wrong issuer", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("iss", "https://evil.example"), nil), wantErr: "identity: jwt: wrong issuer"},
		{name: "missing issuer", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("iss", nil), nil), wantErr: "identity: jwt: wrong issuer"},
		{name: "wrong audience", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("aud", []string{"other"}), nil), wantErr: "identity: jwt: wrong audience"},
		{name: "missing audience", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("aud", nil), nil), wantErr: "identity: jwt: wrong audience"},
		{name: "expired", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("exp", time.Now().Add(-2*time.Minute).Unix()), nil), wantErr: "identity: jwt: token expired"},
		{name: "not yet valid", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("nbf", time.Now().Add(2*time.Minute).Unix()), nil), wantErr: "identity: jwt: token not yet valid"},
		{name: "issued in the future", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("iat", time.Now().Add(2*time.Minute).Unix()), nil), wantErr: "identity: jwt: token issued in the future"},
		{name: "missing exp", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("exp", nil), nil), wantErr: "identity: jwt: missing exp claim"},
		{name: "exp not a number", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("exp", "tomorrow"), nil), wantErr: "identity: jwt: registered claim of the wrong type"},
		{name: "missing subject", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("sub", nil), nil), wantErr: "identity: jwt: missing subject claim"},
		{name: "empty subject", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("sub", ""), nil), wantErr: "identity: jwt: missing subject claim"},
		{name: "subject with a line break", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("sub", "alice\r\nX-Evil: 1"), nil), wantErr: "identity: jwt: subject claim holds control characters, is blank, or is reserved"},
		{name: "subject with a NUL", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("sub", "alice\x00x"), nil), wantErr: "identity: jwt: subject claim holds control characters, is blank, or is reserved"},
		{name: "blank subject", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("sub", "  "), nil), wantErr: "identity: jwt: subject claim holds control characters, is blank, or is reserved"},
		{name: "the anonymous caller's subject", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("sub", identity.AnonymousID), nil), wantErr: "identity: jwt: subject claim holds control characters, is blank, or is reserved"},
		{name: "groups not strings", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("groups", []any{"dev", 7}), nil), wantErr: "identity: jwt: groups claim is not a list of strings"},
		{name: "groups an object", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("groups", map[string]any{"a": "b"}), nil), wantErr: "identity: jwt: groups claim is not a list of strings"},
		{name: "payload not an object", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", []byte(`["not","claims"]`), nil), wantErr: "identity: jwt: invalid claims"},
		{name: "unknown kid", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa-2", valid, nil), wantErr: "identity: jwt: unknown signing key"},
		{name: "no kid, several keys", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "", valid, nil), wantErr: "identity: jwt: token has no key ID"},
		{name: "tampered signature", token: tamper(testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", valid, nil), 2), wantErr: "identity: jwt: invalid signature"},
		{name: "tampered payload", token: swapPayload(t, testkit.Sign(t, jwa.ES256(), keys.EC, "ec", valid, nil), claims("sub", "admin")), wantErr: "identity: jwt: invalid signature"},
		{name: "signed by another key", token: testkit.Sign(t, jwa.RS256(), must(rsa.GenerateKey(rand.Reader, 2048)), "rsa", valid, nil), wantErr: "identity: jwt: invalid signature"},
		{name: "alg none", token: unsigned(t, map[string]any{"alg": "none", "kid": "rsa"}, valid), wantErr: "identity: jwt: algorithm not allowed"},
		{name: "alg none without kid", token: unsigned(t, map[string]any{"alg": "none"}, valid), wantErr: "identity: jwt: algorithm not allowed"},
		{name: "no alg", token: unsigned(t, map[string]any{"kid": "rsa"}, valid), wantErr: "identity: jwt: malformed token"},
		{name: "HS256 with the RSA public key (PEM) as secret", token: testkit.Sign(t, jwa.HS256(), pemRSA, "rsa", valid, nil), wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "HS256 with the RSA public key (DER) as secret", token: testkit.Sign(t, jwa.HS256(), derRSA, "rsa", valid, nil), wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "HS256 with the RSA public JWK as secret", token: testkit.Sign(t, jwa.HS256(), rsaJWK, "rsa", valid, nil), wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "PS256 with an RS256 key", token: testkit.Sign(t, jwa.PS256(), keys.RSA, "rsa", valid, nil), wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "ES384 with a P-256 key", token: unsigned(t, map[string]any{"alg": "ES384", "kid": "ec"}, valid) + "c2ln", wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "RS256 naming the EC key", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "ec", valid, nil), wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "unknown crit extension", token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", valid, map[string]any{"crit": []string{"exp-ext"}, "exp-ext": 1}), wantErr: "identity: jwt: token rejected"},
		{name: "garbage segments", token: "eyJhbGciOi.e30.c2ln", wantErr: "identity: jwt: malformed token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Authenticate(request("Bearer " + tt.token))
			if tt.wantErr != "" {
				checkErr(t, err, tt.wantErr, tt.token)
				return
			}
			if err != nil {
				t.Fatalf("Authenticate() error = %v", err)
			}
			if tt.want.Claims == nil {
				got.Claims = nil // only the claims of the cases that set them are compared
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Authenticate() mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("bad token with anonymous on", func(t *testing.T) {
		cfg := jwtConfig(testkit.WriteJWKS(t, keys.JWKS(t)))
		cfg.Anonymous = true
		tok := testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("exp", time.Now().Add(-time.Hour).Unix()), nil)
		_, err := newAuthenticator(t, cfg).Authenticate(request("Bearer " + tok))
		checkErr(t, err, "identity: jwt: token expired", tok)
	})

	t.Run("API keys still work", func(t *testing.T) {
		got, err := a.Authenticate(request("Bearer " + agentKey))
		if err != nil || got.ID != "agent-42" {
			t.Errorf("Authenticate(API key) = %+v, %v", got, err)
		}
	})

	t.Run("claims are the signed claims", func(t *testing.T) {
		// With a duplicated name, jwx (which checks iss) and the policy
		// (which reads the claims) could each keep another value; refused
		// in either order.
		dup := `"iss":"https://evil.example","iss":"` + testIssuer + `"`
		raw := []byte(`{` + dup + `,"aud":"toolgate","sub":"a","exp":` + strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10) + `}`)
		_, err := a.Authenticate(request("Bearer " + testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", raw, nil)))
		checkErr(t, err, "identity: jwt: invalid claims", "")
		raw = []byte(strings.Replace(string(raw), dup, `"iss":"`+testIssuer+`","iss":"https://evil.example"`, 1))
		_, err = a.Authenticate(request("Bearer " + testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", raw, nil)))
		checkErr(t, err, "identity: jwt: invalid claims", "")
	})
}

func TestJWTClaimNamesAndSingleKey(t *testing.T) {
	keys := testkit.NewKeys(t)
	cfg := jwtConfig(testkit.WriteJWKS(t, testkit.KeySet(t, testkit.PublicJWK(t, &keys.EC.PublicKey, "only", ""))))
	cfg.JWT.SubjectClaim = "email"
	cfg.JWT.SubjectPrefix = "jwt:"
	cfg.JWT.GroupsClaim = "roles"
	cfg.JWT.Leeway = time.Second
	a := newAuthenticator(t, cfg)

	tests := []struct {
		name    string
		token   string
		want    identity.Subject
		wantErr string
	}{
		{
			name:  "no kid, one key",
			token: testkit.Sign(t, jwa.ES256(), keys.EC, "", claims("roles", []string{"admin"}), nil),
			// The prefix is in the subject, not in the principal.
			want: identity.Subject{ID: "jwt:user-1@example.com", Principal: "jwt:" + testIssuer + "#user-1@example.com", Groups: []string{"admin"}, Authenticated: true},
		},
		{name: "subject claim missing", token: testkit.Sign(t, jwa.ES256(), keys.EC, "only", claims("email", nil), nil), wantErr: "identity: jwt: missing subject claim"},
		{name: "subject claim not a string", token: testkit.Sign(t, jwa.ES256(), keys.EC, "only", claims("email", 7), nil), wantErr: "identity: jwt: missing subject claim"},
		{name: "leeway of one second", token: testkit.Sign(t, jwa.ES256(), keys.EC, "only", claims("exp", time.Now().Add(-10*time.Second).Unix()), nil), wantErr: "identity: jwt: token expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.Authenticate(request("Bearer " + tt.token))
			if tt.wantErr != "" {
				checkErr(t, err, tt.wantErr, tt.token)
				return
			}
			if err != nil {
				t.Fatalf("Authenticate() error = %v", err)
			}
			got.Claims = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Authenticate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJWTConcurrent verifies good and bad tokens (and an API key) at once
// from many goroutines: every good token yields its own subject and every
// bad one is refused with its own error, whatever else is being verified
// meanwhile.
func TestJWTConcurrent(t *testing.T) {
	keys := testkit.NewKeys(t)
	a := newAuthenticator(t, jwtConfig(testkit.WriteJWKS(t, keys.JWKS(t))))
	other := testkit.NewKeys(t)
	tests := []struct {
		token   string
		wantSub string // for a good token
		wantErr string // for a bad one
	}{
		{token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("sub", "rsa-user"), nil), wantSub: "rsa-user"},
		{token: testkit.Sign(t, jwa.ES256(), keys.EC, "ec", claims("sub", "ec-user"), nil), wantSub: "ec-user"},
		{token: testkit.Sign(t, jwa.HS256(), keys.HMAC, "hmac", claims("sub", "hmac-user"), nil), wantSub: "hmac-user"},
		{token: testkit.Sign(t, jwa.EdDSA(), keys.Ed, "ed", claims("sub", "ed-user"), nil), wantSub: "ed-user"},
		{token: testkit.Sign(t, jwa.RS256(), other.RSA, "rsa", claims("sub", "forged"), nil), wantErr: "identity: jwt: invalid signature"},
		{token: testkit.Sign(t, jwa.HS256(), other.HMAC, "hmac", claims("sub", "forged"), nil), wantErr: "identity: jwt: invalid signature"},
		{token: tamper(testkit.Sign(t, jwa.ES256(), keys.EC, "ec", claims("sub", "tampered"), nil), 2), wantErr: "identity: jwt: invalid signature"},
		{token: swapPayload(t, testkit.Sign(t, jwa.EdDSA(), keys.Ed, "ed", claims(), nil), claims("sub", "admin")), wantErr: "identity: jwt: invalid signature"},
		{token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("sub", "late", "exp", time.Now().Add(-time.Hour).Unix()), nil), wantErr: "identity: jwt: token expired"},
		{token: testkit.Sign(t, jwa.ES256(), keys.EC, "ec", claims("sub", "elsewhere", "aud", []string{"other"}), nil), wantErr: "identity: jwt: wrong audience"},
		{token: unsigned(t, map[string]any{"alg": "none", "kid": "rsa"}, claims("sub", "none")), wantErr: "identity: jwt: algorithm not allowed"},
		{token: testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", withMembers(t, claims("sub", "first"), `"sub":"second"`), nil), wantErr: "identity: jwt: invalid claims"},
		{token: testkit.Sign(t, jwa.ES256(), keys.EC, "ec", claims("sub", "stringly", "exp", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)), nil), wantErr: "identity: jwt: registered claim of the wrong type"},
		{token: testkit.Sign(t, jwa.EdDSA(), keys.Ed, "ed", claims("sub", "numeric", "aud", 7), nil), wantErr: "identity: jwt: registered claim of the wrong type"},
		{token: agentKey, wantSub: "agent-42"},
		{token: "Bearer-less", wantErr: "identity: bearer token: unknown API key"},
	}
	const goroutines, rounds = 8, 5
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds * len(tests) {
				tt := tests[(g+i)%len(tests)]
				got, err := a.Authenticate(request("Bearer " + tt.token))
				switch {
				case tt.wantErr == "" && (err != nil || got.ID != tt.wantSub || got.Principal != principalOf(tt.token, tt.wantSub) || !got.Authenticated):
					t.Errorf("Authenticate(token of %s) = %q (%q), %v; want subject %s", tt.wantSub, got.ID, got.Principal, err, tt.wantSub)
				case tt.wantErr != "" && err == nil:
					t.Errorf("Authenticate(bad token) = %q accepted, want %q", got.ID, tt.wantErr)
				case tt.wantErr != "" && err.Error() != tt.wantErr:
					t.Errorf("Authenticate(bad token) error = %q, want %q", err, tt.wantErr)
				}
			}
		})
	}
	wg.Wait()
}

// principalOf is the principal of TestJWTConcurrent's good token of sub.
func principalOf(token, sub string) string {
	if token == agentKey {
		return "key:" + sub
	}
	return "jwt:" + testIssuer + "#" + sub
}

// tamper changes the byte at offset from the end of the token's signature.
func tamper(token string, offset int) string {
	b := []byte(token)
	i := len(b) - offset
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// swapPayload replaces the payload of a signed token, keeping header and
// signature.
func swapPayload(t testing.TB, token string, payload any) string {
	parts := strings.Split(token, ".")
	parts[1] = base64.RawURLEncoding.EncodeToString(must(json.Marshal(payload)))
	return strings.Join(parts, ".")
}

// unsigned returns header.payload. with an empty signature.
func unsigned(t testing.TB, header, payload any) string {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	return enc(must(json.Marshal(header))) + "." + enc(must(json.Marshal(payload))) + "."
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func BenchmarkAuthenticateJWT(b *testing.B) {
	keys := testkit.NewKeys(b)
	a := newAuthenticator(b, jwtConfig(testkit.WriteJWKS(b, keys.JWKS(b))))
	for _, bc := range []struct {
		name  string
		token string
	}{
		{"RS256", testkit.Sign(b, jwa.RS256(), keys.RSA, "rsa", claims(), nil)},
		{"ES256", testkit.Sign(b, jwa.ES256(), keys.EC, "ec", claims(), nil)},
		{"HS256", testkit.Sign(b, jwa.HS256(), keys.HMAC, "hmac", claims(), nil)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := request("Bearer " + bc.token)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
