package identity_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/toolgate/toolgate/identity"
)

const (
	testIssuer   = "https://issuer.example"
	testAudience = "toolgate"
)

// signingKeys are the private halves of the keys in a test JWKS.
type signingKeys struct {
	rsa  *rsa.PrivateKey   // kid "rsa", JWKS alg RS256
	ec   *ecdsa.PrivateKey // kid "ec", P-256, no alg in the JWKS
	hmac []byte            // kid "hmac", JWKS alg HS256
	ed   ed25519.PrivateKey
}

func newSigningKeys(t testing.TB) *signingKeys {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signingKeys{rsa: rk, ec: ek, hmac: []byte(rand.Text() + rand.Text()), ed: edk}
}

// publicJWK imports raw as a JWK with the given kid and, if not empty, alg.
func publicJWK(t testing.TB, raw any, kid, alg string) jwk.Key {
	t.Helper()
	k, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Set(jwk.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	if alg != "" {
		if err := k.Set(jwk.AlgorithmKey, alg); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// jwks returns the JSON of the public key set of k.
func (k *signingKeys) jwks(t testing.TB) []byte {
	t.Helper()
	set := jwk.NewSet()
	for _, key := range []jwk.Key{
		publicJWK(t, &k.rsa.PublicKey, "rsa", "RS256"),
		publicJWK(t, &k.ec.PublicKey, "ec", ""),
		publicJWK(t, k.hmac, "hmac", "HS256"),
		publicJWK(t, k.ed.Public(), "ed", ""),
	} {
		if err := set.AddKey(key); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// sign returns a compact JWS of payload (marshalled unless it is []byte).
// kid "" leaves the kid header out.
func sign(t testing.TB, alg jwa.SignatureAlgorithm, key any, kid string, payload any, extra map[string]any) string {
	t.Helper()
	b, ok := payload.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(payload); err != nil {
			t.Fatal(err)
		}
	}
	hdr := jws.NewHeaders()
	if kid != "" {
		if err := hdr.Set(jws.KeyIDKey, kid); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range extra {
		if err := hdr.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := jws.Sign(b, jws.WithKey(alg, key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(tok)
}

// claims returns a valid claim set, changed by kv pairs; a nil value
// removes the claim.
func claims(kv ...any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss":    testIssuer,
		"aud":    []string{"other", testAudience},
		"sub":    "user-1",
		"exp":    now.Add(5 * time.Minute).Unix(),
		"iat":    now.Unix(),
		"nbf":    now.Unix(),
		"groups": []string{"dev", "ops"},
		"email":  "user-1@example.com",
		"tenant": map[string]any{"id": 12345678901234567, "tags": []any{"a", true, nil}},
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(c, kv[i].(string))
		} else {
			c[kv[i].(string)] = kv[i+1]
		}
	}
	return c
}

// asJSON is what v looks like after a JSON round trip with json.Number.
func asJSON(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
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
	keys := newSigningKeys(t)
	a := newAuthenticator(t, jwtConfig(writeFile(t, "jwks.json", keys.jwks(t))))
	pemRSA := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&keys.rsa.PublicKey))})
	derRSA := must(x509.MarshalPKIXPublicKey(&keys.rsa.PublicKey))
	rsaJWK := must(json.Marshal(publicJWK(t, &keys.rsa.PublicKey, "rsa", "RS256")))

	// Each claim set is made once: the token and the expected claims must
	// share exp and iat even when a second ticks over in between.
	valid := claims()
	groupString := claims("groups", "dev  ops", "aud", "toolgate-staging")
	noGroups := claims("groups", nil)
	want := identity.Subject{ID: "user-1", Groups: []string{"dev", "ops"}, Claims: asJSON(t, valid), Authenticated: true}

	tests := []struct {
		name    string
		token   string
		want    identity.Subject
		wantErr string
	}{
		{name: "RS256", token: sign(t, jwa.RS256(), keys.rsa, "rsa", valid, nil), want: want},
		{name: "ES256, key without alg", token: sign(t, jwa.ES256(), keys.ec, "ec", valid, nil), want: want},
		{name: "HS256", token: sign(t, jwa.HS256(), keys.hmac, "hmac", valid, nil), want: want},
		{name: "EdDSA", token: sign(t, jwa.EdDSA(), keys.ed, "ed", valid, nil), want: want},
		{
			name:  "groups as a space-separated string, single audience",
			token: sign(t, jwa.ES256(), keys.ec, "ec", groupString, nil),
			want:  identity.Subject{ID: "user-1", Groups: []string{"dev", "ops"}, Claims: asJSON(t, groupString), Authenticated: true},
		},
		{
			name:  "no groups claim",
			token: sign(t, jwa.RS256(), keys.rsa, "rsa", noGroups, nil),
			want:  identity.Subject{ID: "user-1", Claims: asJSON(t, noGroups), Authenticated: true},
		},
		{
			name:  "expired within leeway",
			token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("exp", time.Now().Add(-10*time.Second).Unix()), nil),
			want:  identity.Subject{ID: "user-1", Groups: []string{"dev", "ops"}, Authenticated: true},
		},
		{
			name:  "not yet valid within leeway",
			token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("nbf", time.Now().Add(10*time.Second).Unix()), nil),
			want:  identity.Subject{ID: "user-1", Groups: []string{"dev", "ops"}, Authenticated: true},
		},
		{name: "wrong issuer", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("iss", "https://evil.example"), nil), wantErr: "identity: jwt: wrong issuer"},
		{name: "missing issuer", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("iss", nil), nil), wantErr: "identity: jwt: wrong issuer"},
		{name: "wrong audience", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("aud", []string{"other"}), nil), wantErr: "identity: jwt: wrong audience"},
		{name: "missing audience", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("aud", nil), nil), wantErr: "identity: jwt: wrong audience"},
		{name: "expired", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("exp", time.Now().Add(-2*time.Minute).Unix()), nil), wantErr: "identity: jwt: token expired"},
		{name: "not yet valid", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("nbf", time.Now().Add(2*time.Minute).Unix()), nil), wantErr: "identity: jwt: token not yet valid"},
		{name: "issued in the future", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("iat", time.Now().Add(2*time.Minute).Unix()), nil), wantErr: "identity: jwt: token issued in the future"},
		{name: "missing exp", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("exp", nil), nil), wantErr: "identity: jwt: missing exp claim"},
		{name: "exp not a number", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("exp", "tomorrow"), nil), wantErr: "identity: jwt: invalid claims"},
		{name: "missing subject", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("sub", nil), nil), wantErr: "identity: jwt: missing subject claim"},
		{name: "empty subject", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("sub", ""), nil), wantErr: "identity: jwt: missing subject claim"},
		{name: "groups not strings", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("groups", []any{"dev", 7}), nil), wantErr: "identity: jwt: groups claim is not a list of strings"},
		{name: "groups an object", token: sign(t, jwa.RS256(), keys.rsa, "rsa", claims("groups", map[string]any{"a": "b"}), nil), wantErr: "identity: jwt: groups claim is not a list of strings"},
		{name: "payload not an object", token: sign(t, jwa.RS256(), keys.rsa, "rsa", []byte(`["not","claims"]`), nil), wantErr: "identity: jwt: invalid claims"},
		{name: "unknown kid", token: sign(t, jwa.RS256(), keys.rsa, "rsa-2", valid, nil), wantErr: "identity: jwt: unknown signing key"},
		{name: "no kid, several keys", token: sign(t, jwa.RS256(), keys.rsa, "", valid, nil), wantErr: "identity: jwt: token has no key ID"},
		{name: "tampered signature", token: tamper(sign(t, jwa.RS256(), keys.rsa, "rsa", valid, nil), 2), wantErr: "identity: jwt: invalid signature"},
		{name: "tampered payload", token: swapPayload(t, sign(t, jwa.ES256(), keys.ec, "ec", valid, nil), claims("sub", "admin")), wantErr: "identity: jwt: invalid signature"},
		{name: "signed by another key", token: sign(t, jwa.RS256(), must(rsa.GenerateKey(rand.Reader, 2048)), "rsa", valid, nil), wantErr: "identity: jwt: invalid signature"},
		{name: "alg none", token: unsigned(t, map[string]any{"alg": "none", "kid": "rsa"}, valid), wantErr: "identity: jwt: algorithm not allowed"},
		{name: "alg none without kid", token: unsigned(t, map[string]any{"alg": "none"}, valid), wantErr: "identity: jwt: algorithm not allowed"},
		{name: "no alg", token: unsigned(t, map[string]any{"kid": "rsa"}, valid), wantErr: "identity: jwt: malformed token"},
		{name: "HS256 with the RSA public key (PEM) as secret", token: sign(t, jwa.HS256(), pemRSA, "rsa", valid, nil), wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "HS256 with the RSA public key (DER) as secret", token: sign(t, jwa.HS256(), derRSA, "rsa", valid, nil), wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "HS256 with the RSA public JWK as secret", token: sign(t, jwa.HS256(), rsaJWK, "rsa", valid, nil), wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "PS256 with an RS256 key", token: sign(t, jwa.PS256(), keys.rsa, "rsa", valid, nil), wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "ES384 with a P-256 key", token: unsigned(t, map[string]any{"alg": "ES384", "kid": "ec"}, valid) + "c2ln", wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "RS256 naming the EC key", token: sign(t, jwa.RS256(), keys.rsa, "ec", valid, nil), wantErr: "identity: jwt: algorithm does not match the key"},
		{name: "unknown crit extension", token: sign(t, jwa.RS256(), keys.rsa, "rsa", valid, map[string]any{"crit": []string{"exp-ext"}, "exp-ext": 1}), wantErr: "identity: jwt: token rejected"},
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
		cfg := jwtConfig(writeFile(t, "jwks.json", keys.jwks(t)))
		cfg.Anonymous = true
		tok := sign(t, jwa.RS256(), keys.rsa, "rsa", claims("exp", time.Now().Add(-time.Hour).Unix()), nil)
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
		// Both JSON decoders keep the last of duplicate names, so the policy
		// sees the iss and sub that were checked.
		raw := []byte(`{"iss":"https://evil.example","iss":"` + testIssuer + `","aud":"toolgate","sub":"a","sub":"b","exp":` +
			strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10) + `}`)
		got, err := a.Authenticate(request("Bearer " + sign(t, jwa.RS256(), keys.rsa, "rsa", raw, nil)))
		if err != nil {
			t.Fatalf("Authenticate() error = %v", err)
		}
		if got.ID != "b" || got.Claims["iss"] != testIssuer || got.Claims["sub"] != "b" {
			t.Errorf("Authenticate() = %+v, want sub b and iss %s", got, testIssuer)
		}
		raw = []byte(strings.Replace(string(raw), `"iss":"https://evil.example","iss":"`+testIssuer+`"`, `"iss":"`+testIssuer+`","iss":"https://evil.example"`, 1))
		_, err = a.Authenticate(request("Bearer " + sign(t, jwa.RS256(), keys.rsa, "rsa", raw, nil)))
		checkErr(t, err, "identity: jwt: wrong issuer", "")
	})
}

func TestJWTClaimNamesAndSingleKey(t *testing.T) {
	keys := newSigningKeys(t)
	set := jwk.NewSet()
	if err := set.AddKey(publicJWK(t, &keys.ec.PublicKey, "only", "")); err != nil {
		t.Fatal(err)
	}
	cfg := jwtConfig(writeFile(t, "one.json", must(json.Marshal(set))))
	cfg.JWT.SubjectClaim = "email"
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
			token: sign(t, jwa.ES256(), keys.ec, "", claims("roles", []string{"admin"}), nil),
			want:  identity.Subject{ID: "user-1@example.com", Groups: []string{"admin"}, Authenticated: true},
		},
		{name: "subject claim missing", token: sign(t, jwa.ES256(), keys.ec, "only", claims("email", nil), nil), wantErr: "identity: jwt: missing subject claim"},
		{name: "subject claim not a string", token: sign(t, jwa.ES256(), keys.ec, "only", claims("email", 7), nil), wantErr: "identity: jwt: missing subject claim"},
		{name: "leeway of one second", token: sign(t, jwa.ES256(), keys.ec, "only", claims("exp", time.Now().Add(-10*time.Second).Unix()), nil), wantErr: "identity: jwt: token expired"},
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

func TestJWTConcurrent(t *testing.T) {
	keys := newSigningKeys(t)
	a := newAuthenticator(t, jwtConfig(writeFile(t, "jwks.json", keys.jwks(t))))
	tokens := []string{
		sign(t, jwa.RS256(), keys.rsa, "rsa", claims(), nil),
		sign(t, jwa.ES256(), keys.ec, "ec", claims(), nil),
		sign(t, jwa.HS256(), keys.hmac, "hmac", claims(), nil),
		"Bearer-less",
	}
	done := make(chan error)
	for i := range 8 {
		go func() {
			var err error
			for j := range 20 {
				tok := tokens[(i+j)%len(tokens)]
				_, e := a.Authenticate(request("Bearer " + tok))
				if (e == nil) == (tok == "Bearer-less") {
					err = e
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
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
	keys := newSigningKeys(b)
	a := newAuthenticator(b, jwtConfig(writeFile(b, "jwks.json", keys.jwks(b))))
	for _, bc := range []struct {
		name  string
		token string
	}{
		{"RS256", sign(b, jwa.RS256(), keys.rsa, "rsa", claims(), nil)},
		{"ES256", sign(b, jwa.ES256(), keys.ec, "ec", claims(), nil)},
		{"HS256", sign(b, jwa.HS256(), keys.hmac, "hmac", claims(), nil)},
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
