package rebind

import "testing"

// TestSafeHost: names nobody can point at someone else's address pass,
// and so do the allowed ones; any other DNS name could be rebound.
func TestSafeHost(t *testing.T) {
	allowed := []string{"approvals.example.com"}
	for host, want := range map[string]bool{
		"127.0.0.1:8081":             true,
		"[::1]:8081":                 true,
		"10.1.2.3":                   true,
		"localhost:8081":             true,
		"toolgate":                   true, // a compose service
		"toolgate.svc.cluster.local": true,
		"app.localhost":              true,
		"box.internal:80":            true,
		"nas.home.arpa":              true,
		"approvals.example.com":      true,
		"APPROVALS.example.com.:443": true,
		"rebind.attacker.example":    false,
		"evil.example.com:8081":      false,
		"example.com":                false,
		"localhost.attacker.com":     false,
		"":                           false,
	} {
		if got := SafeHost(host, allowed); got != want {
			t.Errorf("SafeHost(%q) = %v, want %v", host, got, want)
		}
	}
}
