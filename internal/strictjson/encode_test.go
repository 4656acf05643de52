package strictjson

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestAppendString: the same JSON string encoding/json writes, without
// HTML escaping (AppendString) and with it (AppendHTMLString), for every
// kind of character it treats specially.
func TestAppendString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " and \ backslash`, "tab\tnl\nCR\r", "\b\f", "\x00\x01\x1f\x7f",
		"<&>", "a<b>c&d \"<\"", "café", "caf\xe9 \xff", "\u2028\u2029", "emoji 🙂", "\xed\xa0\x80",
	} {
		for _, html := range []bool{false, true} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
			got := AppendString(nil, s)
			if html {
				got = AppendHTMLString(nil, s)
			}
			if string(got) != string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
				t.Errorf("HTML escaping %v: %q = %s, want %s", html, s, got, want.Bytes())
			}
		}
	}
}

func TestAppendStrings(t *testing.T) {
	for _, ss := range [][]string{nil, {}, {""}, {"a", "<&>", "caf\xe9"}} {
		want := "[]"
		if len(ss) > 0 {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(ss); err != nil {
				t.Fatal(err)
			}
			want = string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
		}
		if got := AppendStrings(nil, ss); string(got) != want {
			t.Errorf("AppendStrings(%q) = %s, want %s", ss, got, want)
		}
	}
}
