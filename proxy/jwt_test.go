package proxy

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwa"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// jwtTestKeyID is the kid of the one key in the proxy's JWKS.
const jwtTestKeyID = "proxy-test-rsa"

// jwtTestIssuer is the issuer the proxy's JWT authenticator trusts.
var jwtTestIssuer = testkit.Issuer{URL: "https://issuer.toolgate.test", Audience: []string{"toolgate-proxy"}}

// TestJWTSubjectReachesPolicy runs a real JWT Authenticator in the proxy
// (docs/configuration.md, identity; docs/policy.md, the input document): a verified token's subject, groups
// and claims are what the policy sees, the credential is not forwarded, a
// bad token is 401 before the policy or the upstream is reached, and no
// header or argument can change the subject.
func TestJWTSubjectReachesPolicy(t *testing.T) {
	key := testkit.NewKeys(t).RSA
	jwksFile := testkit.WriteJWKS(t, testkit.KeySet(t, testkit.PublicJWK(t, &key.PublicKey, jwtTestKeyID, "RS256")))
	auth, err := identity.New(identity.Config{
		JWT: &identity.JWT{JWKSFile: jwksFile, Issuer: jwtTestIssuer.URL, Audience: jwtTestIssuer.Audience},
		// Anonymous false: a request without a credential is refused.
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { auth.Close() })

	var (
		mu     sync.Mutex
		inputs []*policy.Input
	)
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		mu.Lock()
		defer mu.Unlock()
		inputs = append(inputs, in)
		return policy.Decision{Action: policy.Allow}, nil
	})
	decided := func() []*policy.Input {
		mu.Lock()
		defer mu.Unlock()
		return append([]*policy.Input(nil), inputs...)
	}
	env := newTestServer(t, d, func(c *Config) { c.Auth = auth })

	// allowed sends one call that must be forwarded, and returns what the
	// policy and the upstream saw of it.
	allowed := func(t *testing.T, path, body string, header ...string) (*policy.Input, testkit.Request) {
		t.Helper()
		beforeIn, beforeUp := len(decided()), len(env.upstream.Requests())
		res := post(t, env.url+path, body, header...)
		if res.StatusCode != http.StatusOK || res.Header.Get(headerDecision) != outcomeAllow {
			t.Fatalf("status %d decision %q, want 200 allow", res.StatusCode, res.Header.Get(headerDecision))
		}
		ins, ups := decided()[beforeIn:], env.upstream.Requests()[beforeUp:]
		if len(ins) != 1 || len(ups) != 1 {
			t.Fatalf("policy decided %d times and the upstream received %d requests, want 1 and 1", len(ins), len(ups))
		}
		return ins[0], ups[0]
	}

	t.Run("valid token reaches the policy as the subject", func(t *testing.T) {
		// A custom claim and a nested one holding a large integer.
		claims := jwtTestIssuer.Claims("user-7",
			"team", "payments",
			"tenant", map[string]any{"id": int64(12345678901234567), "tags": []any{"eu", true, nil}},
		)
		tok := testkit.Sign(t, jwa.RS256(), key, jwtTestKeyID, claims, nil)
		in, up := allowed(t, "/tools/read_file", `{"path":"notes/a.txt"}`, "Authorization", "Bearer "+tok)

		want := policy.Subject{
			ID:            "user-7",
			Groups:        []string{"dev", "ops"},
			Claims:        testkit.AsJSON(t, claims),
			Authenticated: true,
		}
		if diff := cmp.Diff(want, in.Subject); diff != "" {
			t.Errorf("input subject mismatch (-want +got):\n%s", diff)
		}
		// Spelled out as well: a custom claim and a large integer arrive
		// as written.
		if in.Subject.Claims["team"] != "payments" {
			t.Errorf("claims[team] = %#v, want payments", in.Subject.Claims["team"])
		}
		if tenant, _ := in.Subject.Claims["tenant"].(map[string]any); tenant["id"] != json.Number("12345678901234567") {
			t.Errorf("claims[tenant] = %#v, want id 12345678901234567 as json.Number", in.Subject.Claims["tenant"])
		}
		if in.Kind != policy.KindREST || in.Tool == nil || in.Tool.Name != "read_file" {
			t.Errorf("input kind %q tool %+v, want a rest call of read_file", in.Kind, in.Tool)
		}
		if _, ok := in.HTTP.Headers["authorization"]; ok {
			t.Error("the policy input holds the Authorization header")
		}
		if v := up.Header.Values("Authorization"); len(v) != 0 {
			t.Errorf("the upstream received Authorization %q", v)
		}
		if v := up.Header.Values("X-Toolgate-Subject"); len(v) != 1 || v[0] != "user-7" {
			t.Errorf("upstream X-Toolgate-Subject = %q, want [user-7]", v)
		}
		if string(up.Body) != `{"path":"notes/a.txt"}` || up.Path != "/tools/read_file" {
			t.Errorf("upstream got %s %q", up.Path, up.Body)
		}
	})

	t.Run("subject is never taken from arguments or headers", func(t *testing.T) {
		tok := testkit.Sign(t, jwa.RS256(), key, jwtTestKeyID, jwtTestIssuer.Claims("user-7"), nil)
		in, up := allowed(t, "/tools/read_file", `{"subject":"root","path":"notes/a.txt"}`,
			"Authorization", "Bearer "+tok,
			"X-Toolgate-Subject", "root",
			"X-Forwarded-User", "root",
		)
		if in.Subject.ID != "user-7" || !in.Subject.Authenticated {
			t.Errorf("input subject %+v, want user-7 authenticated", in.Subject)
		}
		if in.Subject.Claims["sub"] != "user-7" {
			t.Errorf("input claims[sub] = %#v, want user-7", in.Subject.Claims["sub"])
		}
		// The argument stays an argument; it is not an identity.
		if in.Tool.Arguments["subject"] != "root" {
			t.Errorf("arguments %v lost the subject argument", in.Tool.Arguments)
		}
		if _, ok := in.HTTP.Headers["x-toolgate-subject"]; ok {
			t.Error("the agent's X-Toolgate-Subject reached the policy input")
		}
		if v := up.Header.Values("X-Toolgate-Subject"); len(v) != 1 || v[0] != "user-7" {
			t.Errorf("upstream X-Toolgate-Subject = %q, want toolgate's own [user-7]", v)
		}
	})

	// sign is a token naming the JWKS's kid, whichever key signs it.
	sign := func(key *rsa.PrivateKey, claims map[string]any) string {
		return testkit.Sign(t, jwa.RS256(), key, jwtTestKeyID, claims, nil)
	}
	expired := jwtTestIssuer.Claims("user-7", "exp", time.Now().Add(-time.Hour).Unix(), "iat", time.Now().Add(-2*time.Hour).Unix(), "nbf", nil)
	other := testkit.NewKeys(t).RSA
	valid := sign(key, jwtTestIssuer.Claims("user-7"))
	refused := []struct {
		name   string
		path   string
		header []string
		reason string // part of the problem detail
	}{
		{"expired token", "/tools/read_file", []string{"Authorization", "Bearer " + sign(key, expired)}, "expired"},
		{"wrong audience", "/tools/read_file", []string{"Authorization", "Bearer " + sign(key, jwtTestIssuer.Claims("user-7", "aud", []string{"some-other-service"}))}, "audience"},
		{"wrong issuer", "/tools/read_file", []string{"Authorization", "Bearer " + sign(key, jwtTestIssuer.Claims("user-7", "iss", "https://evil.example"))}, "issuer"},
		{"signed by another key", "/tools/read_file", []string{"Authorization", "Bearer " + sign(other, jwtTestIssuer.Claims("user-7"))}, "signature"},
		{"no Authorization and anonymous off", "/tools/read_file", nil, "no credentials"},
		{"token only in the query string", "/tools/read_file?access_token=" + valid, nil, "no credentials"},
		{"subject headers without a token", "/tools/read_file", []string{"X-Toolgate-Subject", "user-7", "X-Forwarded-User", "user-7"}, "no credentials"},
		{"two Authorization headers", "/tools/read_file", []string{"Authorization", "Bearer " + valid, "Authorization", "Bearer " + valid}, "more than one"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			beforeIn, beforeUp := len(decided()), len(env.upstream.Requests())
			res := post(t, env.url+tc.path, `{"subject":"user-7","path":"notes/a.txt"}`, tc.header...)
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", res.StatusCode)
			}
			p := readProblem(t, res)
			if p.Decision != outcomeUnauthenticated {
				t.Errorf("decision %q, want unauthenticated", p.Decision)
			}
			if !strings.Contains(p.Detail, tc.reason) {
				t.Errorf("detail %q, want it to mention %q", p.Detail, tc.reason)
			}
			if res.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if n, m := len(decided())-beforeIn, len(env.upstream.Requests())-beforeUp; n != 0 || m != 0 {
				t.Errorf("policy decided %d times and the upstream received %d requests, want 0 and 0", n, m)
			}
		})
	}
}

// TestPrincipalOwnsParkedCalls: a JWT whose subject is an API key's
// subject is another principal: it neither follows nor cancels the key's
// parked calls, nor attaches to them.
func TestPrincipalOwnsParkedCalls(t *testing.T) {
	key := testkit.NewKeys(t).RSA
	jwksFile := testkit.WriteJWKS(t, testkit.KeySet(t, testkit.PublicJWK(t, &key.PublicKey, jwtTestKeyID, "RS256")))
	auth, err := identity.New(identity.Config{
		APIKeys: []identity.APIKey{{Key: "agent-key", Subject: "agent-42"}},
		JWT:     &identity.JWT{JWKSFile: jwksFile, Issuer: jwtTestIssuer.URL, Audience: jwtTestIssuer.Audience},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { auth.Close() })
	pe := newParkEnv(t, func(c *Config) { c.Auth = auth })
	tok := testkit.Sign(t, jwa.RS256(), key, jwtTestKeyID, jwtTestIssuer.Claims("agent-42"), nil)

	res := post(t, pe.url+"/tools/Write", `{"path":"a"}`, "Authorization", "Bearer agent-key", "Prefer", "respond-async")
	id := res.Header.Get(headerCallID)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("ask: %d", res.StatusCode)
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, pe.url+"/_toolgate/calls/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("%s of the key's call with a JWT of the same subject: %d, want 404", method, res.StatusCode)
		}
	}
	// The same call through the JWT parks a call of its own.
	res = post(t, pe.url+"/tools/Write", `{"path":"a"}`, "Authorization", "Bearer "+tok, "Prefer", "respond-async")
	if other := res.Header.Get(headerCallID); res.StatusCode != http.StatusAccepted || other == id {
		t.Fatalf("the JWT's identical call: %d, call %s (the key's is %s): attached across principals", res.StatusCode, other, id)
	}
	if pc, _ := pe.store.Get(context.Background(), id); pc.State != pending.Waiting || pc.Principal != "key:agent-42" {
		t.Fatalf("the key's call: %s, principal %q", pc.State, pc.Principal)
	}
}
