package identity_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/identity"
)

const (
	agentKey = "k-agent-0123456789abcdef"
	botKey   = "k-bot-fedcba9876543210"
)

var testAPIKeys = []identity.APIKey{
	{Key: agentKey, Subject: "agent-42", Groups: []string{"agents"}},
	{Key: botKey, Subject: "bot-7"},
}

// request builds a request with the given Authorization header values.
func request(auth ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/tools/write_note", nil)
	for _, v := range auth {
		r.Header.Add("Authorization", v)
	}
	return r
}

func newAuthenticator(t testing.TB, cfg identity.Config) *identity.Authenticator {
	t.Helper()
	a, err := identity.New(cfg)
	if err != nil {
		t.Fatalf("New(%v) = %v", cfg, err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// checkErr fails unless err is an authentication failure with exactly the
// reason want that does not leak secret.
func checkErr(t *testing.T, err error, want, secret string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Authenticate() error = nil, want %q", want)
	}
	if !errors.Is(err, identity.ErrUnauthenticated) {
		t.Errorf("Authenticate() error %q does not wrap ErrUnauthenticated", err)
	}
	if err.Error() != want {
		t.Errorf("Authenticate() error = %q, want %q", err, want)
	}
	if secret != "" && strings.Contains(err.Error(), secret) {
		t.Errorf("Authenticate() error %q echoes the credential", err)
	}
}

func TestAuthenticate(t *testing.T) {
	anonymous := identity.Subject{ID: "anonymous", Principal: "anonymous"}
	agent := identity.Subject{ID: "agent-42", Principal: "key:agent-42", Groups: []string{"agents"}, Authenticated: true}
	tests := []struct {
		name      string
		anonymous bool
		req       *http.Request
		want      identity.Subject
		wantErr   string
	}{
		{name: "good key", req: request("Bearer " + agentKey), want: agent},
		{name: "second key without groups", req: request("Bearer " + botKey), want: identity.Subject{ID: "bot-7", Principal: "key:bot-7", Authenticated: true}},
		{name: "scheme is case-insensitive", req: request("bEaReR " + agentKey), want: agent},
		{name: "extra spaces", req: request("Bearer   " + agentKey + " "), want: agent},
		{name: "unknown key", req: request("Bearer k-agent-0123456789abcdeX"), wantErr: "identity: bearer token: unknown API key"},
		{name: "key prefix", req: request("Bearer " + agentKey[:10]), wantErr: "identity: bearer token: unknown API key"},
		{name: "wrong scheme", req: request("Basic " + agentKey), wantErr: "identity: authorization scheme is not Bearer"},
		{name: "no scheme", req: request(agentKey), wantErr: "identity: authorization scheme is not Bearer"},
		{name: "two Authorization headers", req: request("Bearer "+agentKey, "Bearer "+agentKey), wantErr: "identity: more than one Authorization header"},
		{name: "empty bearer", req: request("Bearer "), wantErr: "identity: bearer token: empty"},
		{name: "bearer without token", req: request("Bearer"), wantErr: "identity: bearer token: empty"},
		{name: "empty header", req: request(""), wantErr: "identity: authorization scheme is not Bearer"},
		{name: "two tokens", req: request("Bearer " + agentKey + " " + botKey), wantErr: "identity: bearer token: malformed"},
		{name: "too long", req: request("Bearer " + strings.Repeat("a", 17<<10)), wantErr: "identity: bearer token: too long"},
		{name: "JWT without JWT configured", req: request("Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2ln"), wantErr: "identity: bearer token: unknown API key"},
		{name: "no credentials, anonymous off", req: request(), wantErr: "identity: no credentials"},
		{name: "no credentials, anonymous on", anonymous: true, req: request(), want: anonymous},
		{name: "good key, anonymous on", anonymous: true, req: request("Bearer " + agentKey), want: agent},
		{name: "unknown key, anonymous on", anonymous: true, req: request("Bearer nope"), wantErr: "identity: bearer token: unknown API key"},
		{name: "wrong scheme, anonymous on", anonymous: true, req: request("Basic " + agentKey), wantErr: "identity: authorization scheme is not Bearer"},
		{name: "empty bearer, anonymous on", anonymous: true, req: request("Bearer "), wantErr: "identity: bearer token: empty"},
		{name: "two headers, anonymous on", anonymous: true, req: request("Bearer "+agentKey, "Bearer "+agentKey), wantErr: "identity: more than one Authorization header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAuthenticator(t, identity.Config{APIKeys: testAPIKeys, Anonymous: tt.anonymous})
			got, err := a.Authenticate(tt.req)
			if tt.wantErr != "" {
				checkErr(t, err, tt.wantErr, agentKey)
				return
			}
			if err != nil {
				t.Fatalf("Authenticate() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Authenticate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCredentialsOnlyFromAuthorization checks that a key placed anywhere but
// the Authorization header is not a credential.
func TestCredentialsOnlyFromAuthorization(t *testing.T) {
	places := map[string]func(*http.Request){
		"query":     func(r *http.Request) { r.URL.RawQuery = "access_token=" + agentKey + "&api_key=" + agentKey },
		"cookie":    func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "token", Value: agentKey}) },
		"x-api-key": func(r *http.Request) { r.Header.Set("X-Api-Key", agentKey) },
		"proxy-authorization": func(r *http.Request) {
			r.Header.Set("Proxy-Authorization", "Bearer "+agentKey)
		},
	}
	for name, put := range places {
		t.Run(name, func(t *testing.T) {
			r := request()
			put(r)
			_, err := newAuthenticator(t, identity.Config{APIKeys: testAPIKeys}).Authenticate(r)
			checkErr(t, err, "identity: no credentials", agentKey)

			got, err := newAuthenticator(t, identity.Config{APIKeys: testAPIKeys, Anonymous: true}).Authenticate(r)
			if err != nil || got.Authenticated || got.ID != "anonymous" {
				t.Errorf("Authenticate() = %+v, %v; want the anonymous subject", got, err)
			}
		})
	}
}

func TestSubjectGroupsAreCopies(t *testing.T) {
	a := newAuthenticator(t, identity.Config{APIKeys: testAPIKeys})
	s, err := a.Authenticate(request("Bearer " + agentKey))
	if err != nil {
		t.Fatal(err)
	}
	s.Groups[0] = "admins"
	s, err = a.Authenticate(request("Bearer " + agentKey))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"agents"}, s.Groups); diff != "" {
		t.Errorf("Groups after a caller changed an earlier result (-want +got):\n%s", diff)
	}
}

func TestNewConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"keys":[{"kty":"oct","kid":"h","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}]}`)
	jwtCfg := func(f func(*identity.JWT)) *identity.JWT {
		j := &identity.JWT{JWKSFile: good, Issuer: "https://issuer.example", Audience: []string{"toolgate"}}
		f(j)
		return j
	}
	tests := []struct {
		name string
		cfg  identity.Config
		want []string // substrings of the error
	}{
		{
			name: "empty key",
			cfg:  identity.Config{APIKeys: []identity.APIKey{{Key: "a", Subject: "s"}, {Subject: "t"}}},
			want: []string{"identity.api_keys[1].key: empty"},
		},
		{
			name: "duplicate key",
			cfg:  identity.Config{APIKeys: []identity.APIKey{{Key: "a", Subject: "s"}, {Key: "a", Subject: "t"}}},
			want: []string{"identity.api_keys[1].key: same key as identity.api_keys[0]"},
		},
		{
			name: "empty subject",
			cfg:  identity.Config{APIKeys: []identity.APIKey{{Key: "a", Subject: " "}}},
			want: []string{"identity.api_keys[0].subject: empty"},
		},
		{
			name: "reserved subject",
			cfg:  identity.Config{APIKeys: []identity.APIKey{{Key: "a", Subject: "anonymous"}}},
			want: []string{"identity.api_keys[0].subject: \"anonymous\" is reserved"},
		},
		{
			name: "key with trailing newline",
			cfg:  identity.Config{APIKeys: []identity.APIKey{{Key: "abc\n", Subject: "s"}}},
			want: []string{"identity.api_keys[0].key: contains whitespace"},
		},
		{
			name: "empty group",
			cfg:  identity.Config{APIKeys: []identity.APIKey{{Key: "a", Subject: "s", Groups: []string{"x", ""}}}},
			want: []string{"identity.api_keys[0].groups[1]: empty"},
		},
		{
			name: "every problem reported",
			cfg:  identity.Config{APIKeys: []identity.APIKey{{Subject: "s"}, {Key: "b"}}},
			want: []string{"identity.api_keys[0].key: empty", "identity.api_keys[1].subject: empty"},
		},
		{
			name: "jwt without issuer",
			cfg:  identity.Config{JWT: jwtCfg(func(j *identity.JWT) { j.Issuer = "" })},
			want: []string{"identity.jwt.issuer: required"},
		},
		{
			name: "jwt without audience",
			cfg:  identity.Config{JWT: jwtCfg(func(j *identity.JWT) { j.Audience = nil })},
			want: []string{"identity.jwt.audience: required"},
		},
		{
			name: "jwt with an empty audience",
			cfg:  identity.Config{JWT: jwtCfg(func(j *identity.JWT) { j.Audience = []string{"a", ""} })},
			want: []string{"identity.jwt.audience[1]: empty"},
		},
		{
			name: "jwt without keys",
			cfg:  identity.Config{JWT: jwtCfg(func(j *identity.JWT) { j.JWKSFile = "" })},
			want: []string{"identity.jwt.jwks_file: one of jwks_file or jwks_url is required"},
		},
		{
			name: "jwt with file and url",
			cfg:  identity.Config{JWT: jwtCfg(func(j *identity.JWT) { j.JWKSURL = "https://issuer.example/jwks" })},
			want: []string{"identity.jwt.jwks_url: set either jwks_file or jwks_url, not both"},
		},
		{
			name: "negative leeway",
			cfg:  identity.Config{JWT: jwtCfg(func(j *identity.JWT) { j.Leeway = -1 })},
			want: []string{"identity.jwt.leeway: negative"},
		},
		{
			name: "unreadable jwks",
			cfg:  identity.Config{JWT: jwtCfg(func(j *identity.JWT) { j.JWKSFile = filepath.Join(dir, "missing.json") })},
			want: []string{"identity.jwt.jwks_file: reading:", "missing.json"},
		},
		{
			name: "invalid jwks",
			cfg:  identity.Config{JWT: jwtCfg(func(j *identity.JWT) { j.JWKSFile = write("bad.json", `{"keys":[{`) })},
			want: []string{"identity.jwt.jwks_file: parsing"},
		},
		{
			name: "jwks without keys",
			cfg:  identity.Config{JWT: jwtCfg(func(j *identity.JWT) { j.JWKSFile = write("empty.json", `{"keys":[]}`) })},
			want: []string{"identity.jwt.jwks_file:", "no keys"},
		},
		{
			name: "jwks with duplicate kid",
			cfg: identity.Config{JWT: jwtCfg(func(j *identity.JWT) {
				j.JWKSFile = write("dup.json", `{"keys":[
					{"kty":"oct","kid":"h","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"},
					{"kty":"oct","kid":"h","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}]}`)
			})},
			want: []string{`keys[1]: kid "h" also used by keys[0]`},
		},
		{
			name: "jwks key without kid among several",
			cfg: identity.Config{JWT: jwtCfg(func(j *identity.JWT) {
				j.JWKSFile = write("nokid.json", `{"keys":[
					{"kty":"oct","kid":"h","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"},
					{"kty":"oct","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}]}`)
			})},
			want: []string{"keys[1]: no kid in a set of 2 keys"},
		},
		{
			name: "jwks with a short hmac key",
			cfg: identity.Config{JWT: jwtCfg(func(j *identity.JWT) {
				j.JWKSFile = write("short.json", `{"keys":[{"kty":"oct","kid":"h","k":"c2hvcnQ"}]}`)
			})},
			want: []string{"keys[0]: oct key shorter than 32 bytes"},
		},
		{
			name: "jwks key with alg none",
			cfg: identity.Config{JWT: jwtCfg(func(j *identity.JWT) {
				j.JWKSFile = write("none.json", `{"keys":[{"kty":"oct","kid":"h","alg":"none","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}]}`)
			})},
			want: []string{"keys[0]: oct key cannot be used with \"none\""},
		},
		{
			name: "jwks key for encryption",
			cfg: identity.Config{JWT: jwtCfg(func(j *identity.JWT) {
				j.JWKSFile = write("enc.json", `{"keys":[{"kty":"oct","kid":"h","use":"enc","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}]}`)
			})},
			want: []string{`keys[0]: use is "enc"`},
		},
		{
			name: "jwks url over http",
			cfg:  identity.Config{JWT: jwtCfg(func(j *identity.JWT) { j.JWKSFile, j.JWKSURL = "", "http://issuer.example/jwks" })},
			want: []string{"identity.jwt.jwks_url: must be an https:// URL"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := identity.New(tt.cfg)
			if err == nil {
				a.Close()
				t.Fatalf("New() error = nil, want one containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}

	t.Run("good", func(t *testing.T) {
		newAuthenticator(t, identity.Config{APIKeys: testAPIKeys, JWT: jwtCfg(func(*identity.JWT) {})})
	})
}

func TestConfigRedactsKeys(t *testing.T) {
	cfg := identity.Config{
		APIKeys: testAPIKeys,
		JWT: &identity.JWT{
			JWKSURL:  "https://user:hunter2@issuer.example/jwks",
			Issuer:   "https://issuer.example",
			Audience: []string{"toolgate"},
		},
		Anonymous: true,
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("config", "identity", cfg, "key", cfg.APIKeys[0], "keyptr", &cfg.APIKeys[1])
	outputs := map[string]string{
		"%v config":  fmt.Sprintf("%v", cfg),
		"%+v config": fmt.Sprintf("%+v", cfg),
		"%#v config": fmt.Sprintf("%#v", cfg),
		"%v key":     fmt.Sprintf("%v", cfg.APIKeys[0]),
		"%#v key":    fmt.Sprintf("%#v", cfg.APIKeys[0]),
		"%v keys":    fmt.Sprintf("%v", cfg.APIKeys),
		"%v &key":    fmt.Sprintf("%v", &cfg.APIKeys[0]),
		"slog":       logs.String(),
	}
	for name, out := range outputs {
		for _, secret := range []string{agentKey, botKey, "hunter2"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s leaks a secret: %s", name, out)
			}
		}
		if !strings.Contains(out, "agent-42") && !strings.Contains(out, "bot-7") {
			t.Errorf("%s lost the subjects: %s", name, out)
		}
	}
}

func BenchmarkAuthenticateAPIKey(b *testing.B) {
	keys := make([]identity.APIKey, 100)
	for i := range keys {
		keys[i] = identity.APIKey{Key: fmt.Sprintf("k-%032d", i), Subject: fmt.Sprintf("agent-%d", i), Groups: []string{"agents"}}
	}
	a := newAuthenticator(b, identity.Config{APIKeys: keys})
	r := request("Bearer " + keys[57].Key)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Authenticate(r); err != nil {
			b.Fatal(err)
		}
	}
}
