package signin

import (
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const proxySecret = "proxy-secret-0123456789abcdef"

func newHeader(t *testing.T, c HeaderConfig) Authenticator {
	t.Helper()
	a, err := New(Config{Type: TypeTrustedHeader, Header: c})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestTrustedHeader(t *testing.T) {
	withSecret := HeaderConfig{UserHeader: "X-Auth-Request-Email", GroupsHeader: "X-Auth-Request-Groups", Secret: proxySecret}
	withSources := HeaderConfig{UserHeader: "X-Auth-Request-Email", GroupsHeader: "X-Auth-Request-Groups", TrustedSources: []string{"10.1.0.0/16", "192.0.2.7", "fd00::/8"}}
	type hdr = map[string][]string
	tests := []struct {
		name   string
		cfg    HeaderConfig
		remote string
		header hdr
		want   *Approver // nil: ErrNoIdentity
	}{
		{
			"secret matches", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {" alice@example.com "}, "X-Auth-Request-Groups": {"dev, ops,,  sre,dev"}, DefaultSecretHeader: {proxySecret}},
			&Approver{Name: "alice@example.com", Groups: []string{"dev", "ops", "sre"}, Via: "header"},
		},
		{
			// A proxy that appends instead of overwriting passes the
			// client's own groups header on beside its own: believing
			// both would let the client add groups.
			"two groups headers", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice@example.com"}, "X-Auth-Request-Groups": {"sre", "dev"}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			"two groups headers, one empty", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice@example.com"}, "X-Auth-Request-Groups": {"", "sre"}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			"one empty groups header", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice@example.com"}, "X-Auth-Request-Groups": {""}, DefaultSecretHeader: {proxySecret}},
			&Approver{Name: "alice@example.com", Via: "header"},
		},
		{
			"no groups header", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice@example.com"}, DefaultSecretHeader: {proxySecret}},
			&Approver{Name: "alice@example.com", Via: "header"},
		},
		{
			"spoofed headers without the secret", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice@example.com"}},
			nil,
		},
		{
			"wrong secret", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice@example.com"}, DefaultSecretHeader: {proxySecret + "x"}},
			nil,
		},
		{
			"secret as a prefix", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice@example.com"}, DefaultSecretHeader: {proxySecret[:20]}},
			nil,
		},
		{
			"secret sent twice", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice@example.com"}, DefaultSecretHeader: {proxySecret, proxySecret}},
			nil,
		},
		{
			"secret in another header", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice@example.com"}, "X-Proxy-Secret": {proxySecret}},
			nil,
		},
		{
			"trusted source", withSources, "10.1.2.3:4000",
			hdr{"X-Auth-Request-Email": {"bob@example.com"}},
			&Approver{Name: "bob@example.com", Via: "header"},
		},
		{
			"trusted single address", withSources, "192.0.2.7:4000",
			hdr{"X-Auth-Request-Email": {"bob@example.com"}},
			&Approver{Name: "bob@example.com", Via: "header"},
		},
		{
			"trusted IPv4-mapped", withSources, "[::ffff:10.1.2.3]:4000",
			hdr{"X-Auth-Request-Email": {"bob@example.com"}},
			&Approver{Name: "bob@example.com", Via: "header"},
		},
		{
			"trusted IPv6", withSources, "[fd00::1]:4000",
			hdr{"X-Auth-Request-Email": {"bob@example.com"}},
			&Approver{Name: "bob@example.com", Via: "header"},
		},
		{
			"wrong source", withSources, "10.2.0.1:4000",
			hdr{"X-Auth-Request-Email": {"bob@example.com"}},
			nil,
		},
		{
			"neighbour of a single address", withSources, "192.0.2.8:4000",
			hdr{"X-Auth-Request-Email": {"bob@example.com"}},
			nil,
		},
		{
			"X-Forwarded-For does not count", withSources, "198.51.100.1:4000",
			hdr{"X-Auth-Request-Email": {"bob@example.com"}, "X-Forwarded-For": {"10.1.2.3"}, "X-Real-Ip": {"10.1.2.3"}},
			nil,
		},
		{
			"unparsable remote address", withSources, "somewhere",
			hdr{"X-Auth-Request-Email": {"bob@example.com"}},
			nil,
		},
		{
			"no user header", withSecret, "203.0.113.9:4000",
			hdr{DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			"two user headers", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice@example.com", "mallory@example.com"}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			"blank user", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"   "}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			"user too long", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {strings.Repeat("a", MaxNameBytes+1)}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			"user at the limit", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {strings.Repeat("a", MaxNameBytes)}, DefaultSecretHeader: {proxySecret}},
			&Approver{Name: strings.Repeat("a", MaxNameBytes), Via: "header"},
		},
		{
			"user not UTF-8", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"al\xffice"}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			// Composed and decomposed, the same name to a person but two
			// to a quorum: only the composed form (NFC) is believed.
			"user with a combining mark", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"jose\u0301@example.com"}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			"user composed", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"jos\u00e9@example.com"}, DefaultSecretHeader: {proxySecret}},
			&Approver{Name: "jos\u00e9@example.com", Via: "header"},
		},
		{
			"user with a control character", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice\x1b[31m"}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			"too many groups", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice"}, "X-Auth-Request-Groups": {manyGroups(MaxGroups + 1)}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			"group too long", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice"}, "X-Auth-Request-Groups": {"dev," + strings.Repeat("g", MaxGroupBytes+1)}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
		{
			"group with a control character", withSecret, "203.0.113.9:4000",
			hdr{"X-Auth-Request-Email": {"alice"}, "X-Auth-Request-Groups": {"dev,o\x00ps"}, DefaultSecretHeader: {proxySecret}},
			nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newHeader(t, tt.cfg)
			r := httptest.NewRequest(http.MethodGet, "/approvals", nil)
			r.RemoteAddr = tt.remote
			r.Host = "toolgate:8081" // the proxy in front names toolgate by its service name
			maps.Copy(r.Header, tt.header)
			got, err := a.Identify(r)
			if tt.want == nil {
				if !errors.Is(err, ErrNoIdentity) {
					t.Fatalf("Identify = %+v, %v; want ErrNoIdentity", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Identify: %v", err)
			}
			if diff := cmp.Diff(*tt.want, got); diff != "" {
				t.Errorf("Identify (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTrustedHeaderEither: with both a secret and trusted sources, either
// proof is enough, and neither without the other is needed.
func TestTrustedHeaderEither(t *testing.T) {
	a := newHeader(t, HeaderConfig{UserHeader: "X-User", SecretHeader: "X-Gate", Secret: proxySecret, TrustedSources: []string{"127.0.0.0/8"}})
	for _, tt := range []struct {
		remote, secret string
		ok             bool
	}{
		{"127.0.0.1:1", "", true},
		{"203.0.113.1:1", proxySecret, true},
		{"203.0.113.1:1", "", false},
		{"203.0.113.1:1", "nope", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tt.remote
		r.Host = "127.0.0.1:8081"
		r.Header.Set("X-User", "carol")
		if tt.secret != "" {
			r.Header.Set("x-gate", tt.secret)
		}
		_, err := a.Identify(r)
		if (err == nil) != tt.ok {
			t.Errorf("from %s with secret %q: err = %v, want ok %v", tt.remote, tt.secret, err, tt.ok)
		}
	}
	if a.Routes() != nil || a.LoginURL("/approvals") != "" {
		t.Error("trusted_header has routes or a login URL")
	}
}

func manyGroups(n int) string {
	gs := make([]string, n)
	for i := range gs {
		gs[i] = "g" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	return strings.Join(gs, ",")
}

// TestTrustedSourceRebinding: a browser on a trusted source's host sends a
// web page's requests there, the page's identity headers included, once
// the page's domain is rebound to that address. Its Host names the page's
// domain: a trusted source is believed only when Host names toolgate by an
// address, a private or single-label name, or public_url's host. The
// secret is proof enough whatever the Host (no page knows it).
func TestTrustedSourceRebinding(t *testing.T) {
	a := newHeader(t, HeaderConfig{
		UserHeader: "X-User", SecretHeader: "X-Gate", Secret: proxySecret,
		TrustedSources: []string{"127.0.0.0/8"}, PublicURL: "https://Approvals.example.com/toolgate",
	})
	for _, tt := range []struct {
		host, secret string
		ok           bool
	}{
		{"rebind.attacker.example:22041", "", false},
		{"evil.example.com", "", false},
		{"approvals.example.com", "", true},
		{"APPROVALS.example.com.:443", "", true},
		{"127.0.0.1:8081", "", true},
		{"localhost:8081", "", true},
		{"toolgate.toolgate.svc.cluster.local", "", true},
		{"rebind.attacker.example:22041", proxySecret, true},
	} {
		r := httptest.NewRequest(http.MethodGet, "/approvals", nil)
		r.RemoteAddr = "127.0.0.1:5000"
		r.Host = tt.host
		r.Header.Set("X-User", "mallory")
		if tt.secret != "" {
			r.Header.Set("X-Gate", tt.secret)
		}
		got, err := a.Identify(r)
		if (err == nil) != tt.ok {
			t.Errorf("Host %q, secret %v: %+v, %v; want ok %v", tt.host, tt.secret != "", got, err, tt.ok)
		}
	}
}
