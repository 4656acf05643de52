package identity_test

import (
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwa"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
)

// TestPrincipal checks that a principal is the kind of credential with the
// subject: the same credential, or another credential of the same kind and
// subject, is the same principal, across Authenticators as across restarts
// and replicas; an API key and a JWT with the same subject are not.
func TestPrincipal(t *testing.T) {
	keys := testkit.NewKeys(t)
	jwks := testkit.WriteJWKS(t, keys.JWKS(t))
	cfg := jwtConfig(jwks)
	cfg.APIKeys = append(cfg.APIKeys,
		identity.APIKey{Key: "k-alice-0123456789", Subject: "alice"},
		identity.APIKey{Key: "k-alice-rotated-0123456789", Subject: "alice"},
	)
	cfg.Anonymous = true
	a, replica := newAuthenticator(t, cfg), newAuthenticator(t, cfg)

	principal := func(a *identity.Authenticator, auth ...string) string {
		t.Helper()
		s, err := a.Authenticate(request(auth...))
		if err != nil {
			t.Fatalf("Authenticate(%q) error = %v", auth, err)
		}
		return s.Principal
	}
	aliceKey := principal(a, "Bearer k-alice-0123456789")
	aliceJWT := principal(a, "Bearer "+testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("sub", "alice"), nil))
	anonymous := principal(a)

	for _, c := range []struct{ name, got, want string }{
		{"API key alice", aliceKey, "key:alice"},
		{"JWT alice", aliceJWT, "jwt:" + testIssuer + "#alice"},
		{"anonymous", anonymous, identity.AnonymousPrincipal},
		{"the same key again", principal(a, "Bearer k-alice-0123456789"), aliceKey},
		{"the same key on a replica", principal(replica, "Bearer k-alice-0123456789"), aliceKey},
		{"another key of alice", principal(a, "Bearer k-alice-rotated-0123456789"), aliceKey},
		{"another JWT of alice, other key", principal(a, "Bearer "+testkit.Sign(t, jwa.ES256(), keys.EC, "ec", claims("sub", "alice", "jti", "2"), nil)), aliceJWT},
		{"a JWT of alice on a replica", principal(replica, "Bearer "+testkit.Sign(t, jwa.EdDSA(), keys.Ed, "ed", claims("sub", "alice"), nil)), aliceJWT},
		{"anonymous on a replica", principal(replica), anonymous},
	} {
		if c.got != c.want {
			t.Errorf("%s: Principal = %q, want %q", c.name, c.got, c.want)
		}
	}
	if aliceKey == aliceJWT {
		t.Errorf("API key and JWT of alice share the principal %q", aliceKey)
	}
}

// TestPrincipalIssuerWithHash checks that a "#" in an issuer cannot make a
// JWT the principal of another issuer's subject: without escaping, issuer
// "https://i.example#x" with subject "y" and issuer "https://i.example"
// with subject "x#y" would both be "jwt:https://i.example#x#y".
func TestPrincipalIssuerWithHash(t *testing.T) {
	keys := testkit.NewKeys(t)
	jwks := testkit.WriteJWKS(t, keys.JWKS(t))
	principal := func(issuer, sub string) string {
		t.Helper()
		cfg := jwtConfig(jwks)
		cfg.JWT.Issuer = issuer
		tok := testkit.Sign(t, jwa.RS256(), keys.RSA, "rsa", claims("iss", issuer, "sub", sub), nil)
		s, err := newAuthenticator(t, cfg).Authenticate(request("Bearer " + tok))
		if err != nil {
			t.Fatalf("Authenticate(token of %s at %s) error = %v", sub, issuer, err)
		}
		return s.Principal
	}
	for _, c := range []struct{ issuer, sub, want string }{
		{"https://i.example#x", "y", "jwt:https://i.example%23x#y"},
		{"https://i.example", "x#y", "jwt:https://i.example#x#y"},
		{"https://i.example%23x", "y", "jwt:https://i.example%2523x#y"},
		{"https://i.example/", "key:alice", "jwt:https://i.example/#key:alice"},
	} {
		if got := principal(c.issuer, c.sub); got != c.want {
			t.Errorf("Principal of %q at %q = %q, want %q", c.sub, c.issuer, got, c.want)
		}
	}
}
