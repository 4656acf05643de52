package testkit

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// Keys are the private halves of a test JWKS, one key of each kind
// toolgate verifies.
type Keys struct {
	RSA  *rsa.PrivateKey    // kid "rsa", JWKS alg RS256
	EC   *ecdsa.PrivateKey  // kid "ec", P-256, no alg in the JWKS
	HMAC []byte             // kid "hmac", JWKS alg HS256
	Ed   ed25519.PrivateKey // kid "ed", no alg in the JWKS
}

// NewKeys generates a fresh set of Keys.
func NewKeys(tb testing.TB) *Keys {
	tb.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	_, edk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return &Keys{RSA: rk, EC: ek, HMAC: []byte(rand.Text() + rand.Text()), Ed: edk}
}

// JWKS returns the JSON of the public key set of k.
func (k *Keys) JWKS(tb testing.TB) []byte {
	tb.Helper()
	return KeySet(tb,
		PublicJWK(tb, &k.RSA.PublicKey, "rsa", "RS256"),
		PublicJWK(tb, &k.EC.PublicKey, "ec", ""),
		PublicJWK(tb, k.HMAC, "hmac", "HS256"),
		PublicJWK(tb, k.Ed.Public(), "ed", ""),
	)
}

// WriteJWKS writes the JWKS set (as JWKS and KeySet return it) to a file
// in a directory removed at the end of the test and returns the file's
// path.
func WriteJWKS(tb testing.TB, set []byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "jwks.json")
	if err := os.WriteFile(p, set, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// PublicJWK imports raw as a JWK with the given kid and, if not empty, alg.
func PublicJWK(tb testing.TB, raw any, kid, alg string) jwk.Key {
	tb.Helper()
	k, err := jwk.Import(raw)
	if err != nil {
		tb.Fatal(err)
	}
	if err := k.Set(jwk.KeyIDKey, kid); err != nil {
		tb.Fatal(err)
	}
	if alg != "" {
		if err := k.Set(jwk.AlgorithmKey, alg); err != nil {
			tb.Fatal(err)
		}
	}
	return k
}

// KeySet returns the JSON of a JWKS holding keys.
func KeySet(tb testing.TB, keys ...jwk.Key) []byte {
	tb.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		if err := set.AddKey(k); err != nil {
			tb.Fatal(err)
		}
	}
	b, err := json.Marshal(set)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Sign returns a compact JWS of payload (marshalled unless it is []byte),
// signed with alg and key. kid "" leaves the kid header out; extra are
// further protected headers.
func Sign(tb testing.TB, alg jwa.SignatureAlgorithm, key any, kid string, payload any, extra map[string]any) string {
	tb.Helper()
	b, ok := payload.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(payload); err != nil {
			tb.Fatal(err)
		}
	}
	hdr := jws.NewHeaders()
	if kid != "" {
		if err := hdr.Set(jws.KeyIDKey, kid); err != nil {
			tb.Fatal(err)
		}
	}
	for k, v := range extra {
		if err := hdr.Set(k, v); err != nil {
			tb.Fatal(err)
		}
	}
	tok, err := jws.Sign(b, jws.WithKey(alg, key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		tb.Fatal(err)
	}
	return string(tok)
}

// Issuer mints the claims of a token issuer.
type Issuer struct {
	URL      string   // the iss claim
	Audience []string // the aud claim
}

// Claims returns a valid claim set for subject sub: iss and aud of the
// issuer, exp in five minutes, iat and nbf now, groups dev and ops. kv
// pairs change it; a nil value removes the claim.
func (is Issuer) Claims(sub string, kv ...any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss":    is.URL,
		"aud":    is.Audience,
		"sub":    sub,
		"exp":    now.Add(5 * time.Minute).Unix(),
		"iat":    now.Unix(),
		"nbf":    now.Unix(),
		"groups": []string{"dev", "ops"},
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(c, kv[i].(string))
		} else {
			c[kv[i].(string)] = kv[i+1]
		}
	}
	return c
}

// AsJSON is v after a JSON round trip with numbers as json.Number: claims
// as a verified token's subject and the policy see them.
func AsJSON(tb testing.TB, v any) map[string]any {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		tb.Fatal(err)
	}
	return m
}
