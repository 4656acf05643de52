package policy_test

import (
	"testing"

	"github.com/toolgate/toolgate/policy"
)

// TestURLHostSpellings: every spelling of a host that an HTTP client or a
// WHATWG URL parser sends to the same place is one target, so a deny row
// on the host sees it.
func TestURLHostSpellings(t *testing.T) {
	for _, tc := range []struct{ raw, want, written string }{
		{"https://evil.com/x", "https://evil.com/x", ""},
		{"https://user@evil.com/x", "https://evil.com/x", ""},
		{"https://good.example.com@evil.com/x", "https://evil.com/x", ""},
		{"https://u:p@evil.com:8443/x", "https://evil.com:8443/x", ""},
		{"https://evil.com./x", "https://evil.com/x", ""},
		{"https://evil.com:443/x", "https://evil.com/x", ""},
		{"http://evil.com:80/x", "http://evil.com/x", ""},
		{"https://evil.com:0443/x", "https://evil.com/x", ""},
		{"https://evil.com:/x", "https://evil.com/x", ""},
		{"https://%65vil.com/x", "https://evil.com/x", ""},
		{"https://ＥＶＩＬ.com/x", "https://evil.com/x", ""},
		{"https://evil。com/x", "https://evil.com/x", ""},
		{"https:/evil.com/x", "https://evil.com/x", ""},
		{"https:evil.com/x", "https://evil.com/x", ""},
		{"https:\\\\evil.com/x", "https://evil.com/x", ""},
		{"https:///evil.com/x", "https://evil.com/x", ""},
		{" https://evil.com/x ", "https://evil.com/x", ""},
		{"HTTPS://EVIL.COM/x", "https://evil.com/x", ""},
		{"http://0x7f.1/x", "http://127.0.0.1/x", ""},
		{"http://2130706433/x", "http://127.0.0.1/x", ""},
		{"http://0177.0.0.1/x", "http://127.0.0.1/x", ""},
		{"http://0xa9.0xfe.0xa9.0xfe/latest", "http://169.254.169.254/latest", ""},
		{"http://[::ffff:a9fe:a9fe]/latest", "http://169.254.169.254/latest", ""},
		{"http://[0:0::1]/", "http://[::1]/", ""},
		{"https://bücher.example/x", "https://xn--bcher-kva.example/x", "https://bücher.example/x"},
		{"https://xn--bcher-kva.example/x", "https://xn--bcher-kva.example/x", "https://bücher.example/x"},
		{"https://under_score.example/x", "https://under_score.example/x", ""},
		{"file:///etc/passwd", "file:///etc/passwd", ""},
		{"http://[::ffff:a9fe:a9fe%25eth0]/latest", "http://169.254.169.254/latest", ""},
		{"http://[fe80::1%25eth0]:8080/", "http://[fe80::1]:8080/", ""},
		{"https://evil.com/%zz", "https://evil.com/%25zz", ""},
		{"http://169.254.169.254/latest/#%", "http://169.254.169.254/latest/#%25", ""},
		{"https://ab--c.ＥＶＩＬ.com/x", "https://ab--c.evil.com/x", ""},
		{"https://-a.evil.com/x", "https://-a.evil.com/x", ""},
		{"urn:isbn:0451450523", "urn:isbn:0451450523", ""},
		{"docs/a.md", "docs/a.md", ""},
	} {
		tool := policy.NewTool("fetch", map[string]any{"url": tc.raw}, policy.DefaultTargetArgs)
		got := tool.Targets[0]
		if got.Opaque || got.Target != tc.want || got.Relative != tc.written {
			t.Errorf("%q: target %q also %q, want %q also %q", tc.raw, got.Target, got.Relative, tc.want, tc.written)
		}
	}
}

// TestURLUnreadable: a URL whose host clients read in more than one way,
// or that toolgate cannot read as they do, is an opaque target: deny and
// ask rows fire on it, allow rows other than "*" do not.
func TestURLUnreadable(t *testing.T) {
	for _, raw := range []string{
		"http://good.com\\@169.254.169.254/latest/", // curl: 169.254.169.254; browsers: good.com
		"https://x.example.com\\@evil.com/",
		"https://evil.com\\.example.com/x",
		"https:\\\\evil.com\\x",
		"http://local\u200dhost/x", // curl's transitional retry: localhost
		"https://evi\u200cl.com/x",
		"https://",
		"http://@/x",
		// the unspecified address reaches the local host on Linux and macOS
		"http://0/admin", "http://0.0.0.0:8080/admin", "http://0x0.0/", "http://[::]/", "http://[::ffff:0.0.0.0]/",
		"http://[0:0:0:0:0:0:0:0]:80/",
	} {
		tool := policy.NewTool("fetch", map[string]any{"url": raw}, policy.DefaultTargetArgs)
		if a := tool.Targets[0]; !a.Opaque || a.Target != "" || tool.Target != raw {
			t.Errorf("%q: target %+v, tool.target %q; want opaque, tool.target as sent", raw, a, tool.Target)
		}
	}
}
