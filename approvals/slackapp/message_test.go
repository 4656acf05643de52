package slackapp

import "testing"

// TestEsc: untrusted text in the updated message (the fallback text's tool
// name, an approver's name) is escaped, on one line, cut to max runes, and
// its hidden characters are spelled out, as notify's are.
func TestEsc(t *testing.T) {
	for in, want := range map[string]string{
		"write_note <!channel> & co": "write_note &lt;!channel&gt; &amp; co",
		"a\nb\tc":                    "a b c",
		"evil\u202etxt.exe":          `evil\u202etxt.exe`,
		"abcdefghij":                 "abcd…",
	} {
		max := 100
		if in == "abcdefghij" {
			max = 5
		}
		if got := esc(in, max); got != want {
			t.Errorf("esc(%q) = %q, want %q", in, got, want)
		}
	}
}
