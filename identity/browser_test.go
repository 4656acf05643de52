package identity_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/identity"
)

// TestAnonymousBrowserPages: without credentials, an agent (no Origin, no
// Sec-Fetch-*) and a user's own navigation pass; a web page's request
// (cross-site, or same-origin after DNS rebinding) is refused unless its
// Origin is listed. Callers with credentials are not concerned.
func TestAnonymousBrowserPages(t *testing.T) {
	a := newAuthenticator(t, identity.Config{
		APIKeys: testAPIKeys, Anonymous: true, BrowserOrigins: []string{"HTTP://LocalHost:6274", "https://inspector.example:443"},
	})
	for _, tt := range []struct {
		name    string
		headers []string // name, value, …
		auth    bool
		pass    bool
	}{
		{"agent", nil, false, true},
		{"address bar", []string{"Sec-Fetch-Site", "none", "Sec-Fetch-Mode", "navigate"}, false, true},
		{"cross-site form", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, false, false},
		{"cross-site image", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"}, false, false},
		{"DNS rebinding, POST", []string{"Origin", "http://evil.example:8080", "Sec-Fetch-Site", "same-origin"}, false, false},
		{"same-origin GET without Origin", []string{"Sec-Fetch-Site", "same-origin"}, false, false},
		{"opaque origin", []string{"Origin", "null"}, false, false},
		{"two origins", []string{"Origin", "http://localhost:6274", "Origin", "https://evil.example"}, false, false},
		{"listed origin", []string{"Origin", "http://localhost:6274", "Sec-Fetch-Site", "cross-site"}, false, true},
		{"listed origin, default port", []string{"Origin", "https://inspector.example"}, false, true},
		{"listed host, other port", []string{"Origin", "http://localhost:6275"}, false, false},
		{"listed host, other scheme", []string{"Origin", "https://localhost:6274"}, false, false},
		{"page with a key", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := request()
			if tt.auth {
				r = request("Bearer " + agentKey)
			}
			for i := 0; i < len(tt.headers); i += 2 {
				r.Header.Add(tt.headers[i], tt.headers[i+1])
			}
			s, err := a.Authenticate(r)
			switch {
			case tt.pass && err != nil:
				t.Fatalf("Authenticate = %v, want it let through", err)
			case !tt.pass && (!errors.Is(err, identity.ErrUnauthenticated) || !strings.Contains(err.Error(), "browser page")):
				t.Fatalf("Authenticate = %+v, %v; want the browser page refused", s, err)
			}
		})
	}
	// Without anonymous access nothing changes: no credentials, no entry.
	b := newAuthenticator(t, identity.Config{APIKeys: testAPIKeys})
	if _, err := b.Authenticate(request()); err == nil || strings.Contains(err.Error(), "browser page") {
		t.Errorf("without anonymous access: %v, want no credentials", err)
	}
}

// TestAnonymousHosts: over plain http a page rebound to toolgate sends a
// same-origin GET with neither Origin nor Sec-Fetch-*; only its Host, the
// attacker's domain, tells. A request without credentials passes when its
// Host is one no page can have had rebound, or one of Config.Hosts.
func TestAnonymousHosts(t *testing.T) {
	a := newAuthenticator(t, identity.Config{APIKeys: testAPIKeys, Anonymous: true, Hosts: []string{"Agents.Example.com"}})
	for host, pass := range map[string]bool{
		"127.0.0.1:8080":                  true,
		"[::1]:8080":                      true,
		"10.0.0.7":                        true,
		"localhost:8080":                  true,
		"LOCALHOST":                       true,
		"toolgate:8080":                   true,
		"app.localhost:8080":              true,
		"toolgate.ns.svc.cluster.local":   true,
		"tools.internal:8080":             true,
		"nas.home.arpa":                   true,
		"toolgate.test":                   true,
		"agents.example.com:443":          true,
		"agents.example.com.":             true,
		"evil.example:8080":               false,
		"evil.example":                    false,
		"localhost.evil.example":          false,
		"127.0.0.1.nip.io:8080":           false,
		"agents.example.com.evil.example": false,
		"":                                false,
	} {
		r := request()
		r.Host = host
		_, err := a.Authenticate(r)
		if pass && err != nil || !pass && (err == nil || !strings.Contains(err.Error(), "DNS rebinding")) {
			t.Errorf("Host %q: %v; want let through %v", host, err, pass)
		}
		r = request("Bearer " + agentKey)
		r.Host = host
		if _, err := a.Authenticate(r); err != nil {
			t.Errorf("Host %q with a key: %v, want let through", host, err)
		}
	}
}

func TestCanonicalOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:6274":   "http://localhost:6274",
		"HTTPS://Example.COM:443": "https://example.com",
		"http://example.com:80":   "http://example.com",
		"http://[::1]:8080":       "http://[::1]:8080",
		"null":                    "",
		"http://example.com/":     "",
		"http://u:p@example.com":  "",
		"ftp://example.com":       "",
		"http://example.com?":     "",
		"http://example.com#":     "",
		"http://example.com:":     "",
		"example.com":             "",
		"":                        "",
	} {
		got, ok := identity.CanonicalOrigin(in)
		if got != want || ok != (want != "") {
			t.Errorf("CanonicalOrigin(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, err := identity.New(identity.Config{Anonymous: true, BrowserOrigins: []string{"http://localhost:6274/app"}}); err == nil ||
		!strings.Contains(err.Error(), "identity.browser_origins[0]") {
		t.Errorf("New with an origin that has a path = %v, want identity.browser_origins[0] refused", err)
	}
}
