package policy

import (
	"strings"
	"testing"
)

// TestSoleTargetOtherSpellings: SoleTarget is false for spellings normalised
// to the target that a tool or server reads as another resource or with
// other credentials.
func TestSoleTargetOtherSpellings(t *testing.T) {
	for _, c := range []struct{ arg, raw, target string }{
		{"url", " https://u:p@h/x", "https://h/x"},                      // leading space: userinfo unseen
		{"url", " https://h./x", "https://h/x"},                         // leading space: trailing dot unseen
		{"url", " https://h/a/%2e%2e/x", "https://h/x"},                 // leading space: escaped dot segment unseen
		{"url", " https://h/a//x", "https://h/a/x"},                     // leading space: empty segment unseen
		{"url", "https://example.com\u3002/x", "https://example.com/x"}, // ideographic full stop: trailing dot
		{"url", "https://example.com\uff0e/x", "https://example.com/x"}, // fullwidth full stop: trailing dot
		{"url", "https://u%40h/x", "https://h/x"},                       // escaped @: user information once decoded
		{"path", `C:\x`, "C:/x"},                                        // backslash: a file named C:\x on Linux (regression)
		{"path", `notes:\x`, "notes:/x"},                                // same, any scheme-like prefix
		{"url", "https://h/a%3Bb", "https://h/a;b"},                     // escaped reserved ";" (RFC 3986 2.2: not equivalent)
	} {
		tl := NewTool("t", map[string]any{c.arg: c.raw}, []string{c.arg})
		if tl.Target != c.target {
			t.Errorf("%q: target %q, want %q (test premise)", c.raw, tl.Target, c.target)
			continue
		}
		if tl.SoleTarget(c.target) {
			t.Errorf("%s %q: SoleTarget(%q) = true: a grant for it stands in for another reading", c.arg, c.raw, c.target)
		}
	}
}

// TestRedactURLParams: a value with a scheme loses its ;params in the
// decision log, in its URL reading and its path reading ("https:/h/x;"),
// and without slashes (jdbc:sqlserver:db;password=).
func TestRedactURLParams(t *testing.T) {
	for _, c := range []struct{ arg, raw, secret string }{
		{"path", "jdbc:sqlserver://db;user=sa;password=hunter2", "hunter2"},
		{"file", "https://api.example.com/x;token=hunter2", "hunter2"},
		{"url", "jdbc:sqlserver:db;password=hunter2", "hunter2"},
	} {
		r := NewTool("t", map[string]any{c.arg: c.raw}, []string{c.arg}).Redacted()
		all := []string{r.Target}
		for _, a := range r.Targets {
			all = append(all, a.Target, a.Relative, a.Raw)
		}
		if kept := strings.Join(all, " "); strings.Contains(kept, c.secret) {
			t.Errorf("%s %q: redacted targets keep %q: %q", c.arg, c.raw, c.secret, kept)
		}
	}
}

// TestSoleTargetOfWindowsPaths: an ordinary Windows path is its own sole
// target: its drive letter is no URL scheme, its first directory no host.
func TestSoleTargetOfWindowsPaths(t *testing.T) {
	for _, raw := range []string{
		"C:/me@corp/notes.txt", // "@" in the first directory: read as user information
		"C:/build./out.txt",    // a directory ending in "." (a file name on Linux): read as a host's trailing dot
		"D:/john.doe@example.com/report.md",
	} {
		tl := NewTool("t", map[string]any{"path": raw}, []string{"path"})
		if !tl.SoleTarget(tl.Target) {
			t.Errorf("path %q: SoleTarget(%q) = false: no grant for this ordinary path can be remembered", raw, tl.Target)
		}
	}
}

// TestSoleTargetFileNoSlash: file:etc/x is file:///etc/x to a WHATWG
// parser, but Python's urllib (url2pathname of "etc/x") opens etc/x under
// its working directory: no grant for file:///etc/x stands in for it.
func TestSoleTargetFileNoSlash(t *testing.T) {
	tl := NewTool("t", map[string]any{"url": "file:etc/passwd"}, []string{"url"})
	if tl.Target != "file:///etc/passwd" {
		t.Fatalf("target %q (premise)", tl.Target)
	}
	if tl.SoleTarget("file:///etc/passwd") {
		t.Errorf(`url "file:etc/passwd": SoleTarget("file:///etc/passwd") = true; urllib opens ./etc/passwd`)
	}
}
