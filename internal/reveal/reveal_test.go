package reveal

import (
	"encoding/json"
	"testing"
)

// TestReveal: what hides or reorders text is spelled out as a JSON escape
// of itself; ordinary text, line breaks and tabs stay.
func TestReveal(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"line one\nline two\r\n\ttabbed", "line one\nline two\r\n\ttabbed"},
		{"a\u202etxt.exe", `a\u202etxt.exe`},     // right-to-left override
		{"zero\u200bwidth", `zero\u200bwidth`},   // zero-width space
		{"bell\x07", `bell\u0007`},               // control
		{"line\u2028sep", `line\u2028sep`},       // line separator
		{"tag\U000E0041", `tag\udb40\udc41`},     // tag character, as a JSON surrogate pair
		{"tag\U000E0002", `tag\udb40\udc02`},     // unassigned, in the Tags block
		{"report\uFE0F.txt", `report\ufe0f.txt`}, // variation selector
		{"\u2764\uFE0F", `❤\ufe0f`},              // even after an emoji, as joiners are
		{"\u845B\U000E0100", `葛\udb40\udd00`},    // ideographic variation selector
		{"\u1820\u180B", `ᠠ\u180b`},              // Mongolian free variation selector
		{"a\u3164b\u2800c", `a\u3164b\u2800c`},   // Hangul filler, blank Braille pattern: draw nothing
		{"bad\xffbyte", "bad\ufffdbyte"},         // invalid UTF-8
		{"émoji 👍 日本", "émoji 👍 日本"},             // ordinary text stays
	}
	for _, tt := range tests {
		if got := String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Revealed JSON is still the same JSON.
	raw := "{\"p\":\"a\u202eb\"}"
	var before, after map[string]string
	if err := json.Unmarshal([]byte(raw), &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(String(raw)), &after); err != nil {
		t.Fatal(err)
	}
	if before["p"] != after["p"] {
		t.Errorf("reveal changed the JSON value: %q, then %q", before["p"], after["p"])
	}
}
