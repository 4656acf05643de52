package signin

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

const cookieSecret = "cookie-secret-0123456789abcdefghijklmnop"

func validOIDC() OIDCConfig {
	return OIDCConfig{
		Issuer: "https://idp.example.com", ClientID: "toolgate", ClientSecret: "client-secret",
		PublicURL: "https://toolgate.example.com", CookieSecret: cookieSecret, AllowedGroups: []string{"approvers"},
	}
}

func TestCheck(t *testing.T) {
	header := HeaderConfig{UserHeader: "X-Auth-Request-Email", Secret: proxySecret}
	tests := []struct {
		name string
		cfg  Config
		keys []string // the keys of the expected errors; none: valid
	}{
		{"header with secret", Config{Type: TypeTrustedHeader, Header: header}, nil},
		{"header with sources", Config{Type: TypeTrustedHeader, Header: HeaderConfig{UserHeader: "X-User", TrustedSources: []string{"10.0.0.0/8", "::1"}}}, nil},
		{"header without secret or sources", Config{Type: TypeTrustedHeader, Header: HeaderConfig{UserHeader: "X-User"}}, []string{"secret"}},
		{"header short secret", Config{Type: TypeTrustedHeader, Header: HeaderConfig{UserHeader: "X-User", Secret: "short"}}, []string{"secret"}},
		{"header secret_header alone", Config{Type: TypeTrustedHeader, Header: HeaderConfig{UserHeader: "X-User", SecretHeader: "X-S", TrustedSources: []string{"::1"}}}, []string{"secret_header"}},
		{"header bad names", Config{Type: TypeTrustedHeader, Header: HeaderConfig{UserHeader: "X User", GroupsHeader: "X:G", SecretHeader: "", Secret: proxySecret}}, []string{"user_header", "groups_header"}},
		{"header no user_header", Config{Type: TypeTrustedHeader, Header: HeaderConfig{Secret: proxySecret}}, []string{"user_header"}},
		{"header bad source", Config{Type: TypeTrustedHeader, Header: HeaderConfig{UserHeader: "X-User", TrustedSources: []string{"10.0.0.0/33", "host.example"}}}, []string{"trusted_sources[0]", "trusted_sources[1]"}},
		{"header source trusting everyone", Config{Type: TypeTrustedHeader, Header: HeaderConfig{UserHeader: "X-User", TrustedSources: []string{"0.0.0.0/0", "10.0.0.0/8", "::/0"}}}, []string{"trusted_sources[0]", "trusted_sources[2]"}},
		{"header sources that together trust everyone", Config{Type: TypeTrustedHeader, Header: HeaderConfig{UserHeader: "X-User", TrustedSources: []string{"0.0.0.0/1", "128.0.0.0/1", "fd00::/8"}}}, []string{"trusted_sources[0]", "trusted_sources[1]"}},
		{"header sources wide in the IPv6 Internet", Config{Type: TypeTrustedHeader, Header: HeaderConfig{UserHeader: "X-User", TrustedSources: []string{"2000::/8", "2a00::/12", "2001:db8::/32", "fc00::/7", "fd12:3456::/32"}}}, []string{"trusted_sources[0]", "trusted_sources[1]"}},
		{"header sources anyone can send from", Config{Type: TypeTrustedHeader, Header: HeaderConfig{UserHeader: "X-User", TrustedSources: []string{"2001::/32", "64:ff9b::/96", "::ffff:10.0.0.0/104", "2002:a00::/24", "10.0.0.0/8"}}}, []string{"trusted_sources[0]", "trusted_sources[1]", "trusted_sources[2]", "trusted_sources[3]"}},
		{"oidc", Config{Type: TypeOIDC, OIDC: validOIDC()}, nil},
		{"oidc loopback http issuer", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.Issuer = "http://127.0.0.1:5556/dex" })}, nil},
		{"oidc redirect_url without public_url", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.PublicURL = ""; o.RedirectURL = "https://t.example.com/auth/callback" })}, nil},
		{"oidc http issuer", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.Issuer = "http://idp.example.com" })}, []string{"issuer"}},
		{"oidc no issuer", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.Issuer = "" })}, []string{"issuer"}},
		{"oidc relative issuer", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.Issuer = "idp.example.com" })}, []string{"issuer"}},
		{"oidc no client", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.ClientID = ""; o.ClientSecret = "" })}, []string{"client_id", "client_secret"}},
		{"oidc no public or redirect URL", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.PublicURL = "" })}, []string{"redirect_url"}},
		{"oidc relative redirect_url", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.RedirectURL = "/auth/callback" })}, []string{"redirect_url"}},
		{"oidc redirect_url off the callback path", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.RedirectURL = "https://toolgate.example.com/oauth2/callback" })}, []string{"redirect_url"}},
		{"oidc redirect_url on another host", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.RedirectURL = "https://other.example.com/auth/callback" })}, []string{"redirect_url"}},
		{"oidc redirect_url under a path", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.RedirectURL = "https://toolgate.example.com/tg/auth/callback" })}, nil},
		{"oidc no cookie secret", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.CookieSecret = "" })}, []string{"cookie_secret"}},
		{"oidc short cookie secret", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.CookieSecret = cookieSecret[:31] })}, []string{"cookie_secret"}},
		{"oidc negative ttl", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.SessionTTL = -1 })}, []string{"session_ttl"}},
		{"oidc bad scope and group", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.Scopes = []string{"openid", "a b"}; o.AllowedGroups = []string{" "} })}, []string{"scopes[1]", "allowed_groups[0]"}},
		{"oidc everyone", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.AllowedGroups = []string{AllowEveryone} })}, nil},
		{"oidc no allowed_groups", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.AllowedGroups = nil })}, []string{"allowed_groups"}},
		{"oidc empty allowed_groups", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.AllowedGroups = []string{} })}, []string{"allowed_groups"}},
		{"oidc everyone beside groups", Config{Type: TypeOIDC, OIDC: with(func(o *OIDCConfig) { o.AllowedGroups = []string{"sre", "*"} })}, []string{"allowed_groups"}},
		{"unknown type", Config{Type: "ldap"}, []string{"type"}},
		{"no type", Config{}, []string{"type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Check()
			var keys []string
			for _, e := range unjoin(err) {
				ce, ok := e.(*ConfigError)
				if !ok {
					t.Fatalf("error %v is not a *ConfigError", e)
				}
				keys = append(keys, strings.TrimPrefix(ce.Key, "approvals.identity."))
				if ce.Fix == "" {
					t.Errorf("%s: no fix", ce.Key)
				}
				if strings.Contains(ce.Error(), proxySecret) || strings.Contains(ce.Error(), cookieSecret[:31]) {
					t.Errorf("error shows a secret: %v", ce)
				}
			}
			slices.Sort(keys)
			want := slices.Sorted(slices.Values(tt.keys))
			if !slices.Equal(keys, want) {
				t.Errorf("error keys %v, want %v (%v)", keys, want, err)
			}
			a, nerr := New(tt.cfg)
			if (nerr == nil) != (err == nil) || (a == nil) != (err != nil) {
				t.Errorf("New = %v, %v; Check = %v", a, nerr, err)
			}
		})
	}
}

func with(f func(*OIDCConfig)) OIDCConfig {
	o := validOIDC()
	f(&o)
	return o
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/approvals/abc":           "/approvals/abc",
		"/approvals/abc?x=1&y=%2F": "/approvals/abc?x=1&y=%2F",
		"/":                        "/",
		"":                         "/approvals",
		"//evil.example/x":         "/approvals",
		`/\evil.example`:           "/approvals",
		"https://evil.example/":    "/approvals",
		"evil.example":             "/approvals",
		"javascript:alert(1)":      "/approvals",
		"/\t/evil.example":         "/approvals",
		"/x\r\nSet-Cookie: a=b":    "/approvals",
		"///evil.example":          "/approvals",
		"/approvals/%2F%2Fevil":    "/approvals/%2F%2Fevil",
		// http.Redirect cleans the path: these must not become "/\host",
		// which browsers read as "//host".
		`/./\evil.example/x`:                  "/approvals",
		`/a/../\evil.example`:                 "/approvals",
		`/approvals\x`:                        "/approvals",
		"/approvals/x?back=\\evil":            "/approvals",
		"/a/\u0085/evil":                      "/approvals",
		"/./approvals/../approvals/x?a=/../b": "/approvals/x?a=/../b",
		"/approvals/":                         "/approvals/",
		"/a/..//evil.example":                 "/evil.example",
		"/..":                                 "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDeps keeps signin a leaf: it answers who an approver is and knows
// nothing of parked calls, policies or the rest of toolgate (internal/rebind,
// which it uses, knows nothing of them either).
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "github.com/toolgate/toolgate/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var forbidden []string
	for p := range strings.FieldsSeq(string(out)) {
		if p != "github.com/toolgate/toolgate/approvals/signin" && p != "github.com/toolgate/toolgate/internal/rebind" {
			forbidden = append(forbidden, p)
		}
	}
	testkit.CheckDeps(t, ".", forbidden...)
}

func TestErrNoIdentityWraps(t *testing.T) {
	if err := noIdentity("x %d", 1); !errors.Is(err, ErrNoIdentity) || !strings.Contains(err.Error(), "x 1") {
		t.Errorf("noIdentity = %v", err)
	}
}

// TestWarnings: a trusted source that holds loopback is warned about (any
// process on the host could name itself an approver); others are not.
func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		sources []string
		want    int
	}{
		{[]string{"127.0.0.1"}, 1},
		{[]string{"127.0.0.0/8"}, 1},
		{[]string{"::1"}, 1},
		{[]string{"10.0.0.0/8", "::ffff:127.0.0.1"}, 1},
		{[]string{"10.0.0.0/8", "192.0.2.7", "fd00::/8"}, 0},
		{[]string{"0.0.0.0/1"}, 1}, // holds 127.0.0.1
	} {
		h := HeaderConfig{UserHeader: "X-User", TrustedSources: tc.sources}
		if got := h.Warnings(); len(got) != tc.want {
			t.Errorf("%v: warnings %q, want %d", tc.sources, got, tc.want)
		}
	}
}
