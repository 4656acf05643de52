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
	} {
		tool := policy.NewTool("fetch", map[string]any{"url": tc.raw}, policy.DefaultTargetArgs)
		got := tool.Targets[0]
		if got.Target != tc.want || got.Relative != tc.written {
			t.Errorf("%q: target %q also %q, want %q also %q", tc.raw, got.Target, got.Relative, tc.want, tc.written)
		}
	}
}
