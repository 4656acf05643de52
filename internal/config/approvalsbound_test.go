package config

import "testing"

// TestApprovalsBound: the default public_url of an approvals listener on
// port 0 becomes the address it was bound to; a public_url of the file's
// own, or a fixed port, is left alone.
func TestApprovalsBound(t *testing.T) {
	for _, tc := range []struct{ listen, public, bound, want string }{
		{"127.0.0.1:0", "", "127.0.0.1:43123", "http://127.0.0.1:43123"},
		{"0.0.0.0:0", "", "[::]:43123", "http://localhost:43123"},
		{"[::1]:0", "", "[::1]:43123", "http://[::1]:43123"},
		{"127.0.0.1:0", "https://approve.example.com", "127.0.0.1:43123", "https://approve.example.com"},
		{"127.0.0.1:8081", "", "127.0.0.1:8081", "http://127.0.0.1:8081"},
	} {
		c := &Config{Listen: Listen{Approvals: tc.listen}, PublicURL: tc.public}
		c.ApplyDefaults()
		c.ApprovalsBound(tc.bound)
		if c.PublicURL != tc.want {
			t.Errorf("listen %s, public_url %q, bound %s: public_url %q, want %q", tc.listen, tc.public, tc.bound, c.PublicURL, tc.want)
		}
	}
}
