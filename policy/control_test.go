package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

func TestCheckControl(t *testing.T) {
	cases := []struct {
		name string
		args map[string]any
		want string // "": accepted
	}{
		{"plain", map[string]any{"path": "a/b", "content": "line 1\nline 2\ttab"}, ""},
		{"nil", nil, ""},
		{"non-ASCII", map[string]any{"path": "données/é.txt", "ké": 1}, ""},
		{"DEL in the target", map[string]any{"path": "a\x7fb"}, `target "a\x7fb" holds the control character U+007F`},
		{"C1 NEL in the target", map[string]any{"path": "a\u0085b"}, `target "a\u0085b" holds the control character U+0085`},
		{"C1 CSI in a command", map[string]any{"command": "ls \u009b2J"}, "U+009B"},
		{"C1 in an array's string", map[string]any{"file": []any{"a", "b\u0080"}}, "U+0080"},
		{"DEL in a key", map[string]any{"ké\x7f": 1}, `argument key "ké\x7f" holds the control character U+007F`},
		{"C1 in a nested key", map[string]any{"opts": map[string]any{"k\u009f": 1}}, "U+009F"},
		{"DEL and C1 in a non-target value", map[string]any{"content": "a\x7f\u0085"}, ""},
		// Bidi controls and invisible format characters: refused in targets.
		{"right-to-left override", map[string]any{"path": "report\u202etxt.exe"}, `target "report\u202etxt.exe" holds the bidi control character U+202E`},
		{"embedding", map[string]any{"url": "https://x/\u202ab"}, "bidi control character U+202A"},
		{"isolate", map[string]any{"file": "a\u2066b\u2069"}, "U+2066"},
		{"right-to-left mark", map[string]any{"path": "a\u200fb"}, "U+200F"},
		{"Arabic letter mark", map[string]any{"path": "a\u061cb"}, "U+061C"},
		{"zero-width space", map[string]any{"path": ".e\u200bnv"}, `target ".e\u200bnv" holds the invisible format character U+200B`},
		{"BOM", map[string]any{"command": "\ufeffrm -rf x"}, "invisible format character U+FEFF"},
		{"soft hyphen in a host", map[string]any{"url": "https://ev\u00adil.com/"}, "U+00AD"},
		{"word joiner", map[string]any{"path": "a\u2060b"}, "U+2060"},
		{"invisible plus", map[string]any{"path": "a\u2064b"}, "U+2064"},
		{"combining grapheme joiner in a host", map[string]any{"url": "https://ev\u034fil.com/"}, `target "https://ev\u034fil.com/" holds the invisible format character U+034F`},
		{"Mongolian vowel separator", map[string]any{"path": "notes/a\u180eb"}, "invisible format character U+180E"},
		{"deprecated format character", map[string]any{"path": "a\u206bb"}, "U+206B"},
		{"Hangul filler for a blank", map[string]any{"command": "rm\u3164-rf"}, `target "rm\u3164-rf" holds the invisible format character U+3164`},
		{"halfwidth Hangul filler", map[string]any{"path": "a\uffa0b"}, "U+FFA0"},
		{"invisible Khmer vowel", map[string]any{"path": "notes/a\u17b5.txt"}, "U+17B5"},
		{"shorthand format control", map[string]any{"path": "a\U0001BCA0b"}, "U+1BCA0"},
		{"bidi in an opaque target's key", map[string]any{"path": map[string]any{"a\u202eb": "x"}}, `argument key "a\u202eb" holds the bidi control character U+202E`},
		{"bidi in a nested array", map[string]any{"path": []any{[]any{"a\u2067"}}}, "U+2067"},
		// Tag characters: invisible ASCII a model reads ("ASCII smuggling").
		{"tag letters", map[string]any{"path": "notes.txt\U000E0049\U000E0047\U000E004E"}, `target "notes.txt\U000e0049\U000e0047\U000e004e" holds the tag character U+E0049`},
		{"cancel tag", map[string]any{"url": "https://x/\U000E007F"}, "tag character U+E007F"},
		{"unassigned tag", map[string]any{"path": "a\U000E0000"}, "tag character U+E0000"},
		{"flag tag sequence", map[string]any{"file": []any{"\U0001F3F4\U000E0067\U000E0062\U000E007F.png"}}, "tag character U+E0067"},
		{"tag in an opaque target's key", map[string]any{"path": map[string]any{"k\U000E0041": "x"}}, `argument key "k\U000e0041" holds the tag character U+E0041`},
		// Variation selectors that select nothing.
		{"FE0F after a letter", map[string]any{"path": "report\uFE0F.txt"}, `target "report\ufe0f.txt" holds the variation selector U+FE0F where it selects nothing`},
		{"FE0E after a digit", map[string]any{"path": "v2\uFE0E"}, "variation selector U+FE0E"},
		{"FE00 after ASCII punctuation", map[string]any{"command": "rm -rf .\uFE00/x"}, "variation selector U+FE00"},
		{"at the start", map[string]any{"path": "\uFE0Fa"}, "variation selector U+FE0F"},
		{"after a non-ASCII letter", map[string]any{"path": "café\uFE0F.txt"}, "variation selector U+FE0F"},
		{"after another selector", map[string]any{"path": "\u2764\uFE0F\uFE0F"}, "variation selector U+FE0F"},
		{"ideographic selector after an emoji", map[string]any{"path": "\u2764\U000E0100"}, `target "❤\U000e0100" holds the variation selector U+E0100`},
		{"ideographic selector after a letter", map[string]any{"path": "a\U000E01EF"}, "variation selector U+E01EF"},
		// Mongolian free variation selectors select nothing outside Mongolian.
		{"FVS1 after a letter", map[string]any{"path": "report\u180B.txt"}, `target "report\u180b.txt" holds the variation selector U+180B where it selects nothing`},
		{"FVS2 after a digit", map[string]any{"path": "v2\u180C"}, "variation selector U+180C"},
		{"FVS3 in a host", map[string]any{"url": "https://ev\u180Dil.com/"}, "variation selector U+180D"},
		{"FVS4 at the start", map[string]any{"file": "\u180Fa"}, "variation selector U+180F"},
		{"FVS after an emoji", map[string]any{"path": "\u2764\u180B"}, "variation selector U+180B"},
		{"FVS after an ideograph", map[string]any{"path": "\u845B\u180B"}, "variation selector U+180B"},
		{"FVS after a Mongolian digit", map[string]any{"path": "\u1811\u180B"}, "variation selector U+180B"},
		{"FVS after another FVS", map[string]any{"path": "\u1820\u180B\u180C"}, "variation selector U+180C"},
		{"FVS in an opaque target's key", map[string]any{"path": map[string]any{"k\u180F": "x"}}, `argument key "k\u180f" holds the variation selector U+180F where it selects nothing`},
		{"tag and selector in a non-target value", map[string]any{"content": "a\uFE0F\U000E0041\u180B"}, ""},
		// A Mongolian letter's free variation selector picks its form.
		{"Mongolian word with FVS", map[string]any{"path": "\u1824\u180B\u1837\u1822\u180C\u182D\u180D.txt", "file": "\u1820\u180F"}, ""},
		// Selectors that pick a form: emoji presentation, a CJK glyph.
		{"emoji with FE0F", map[string]any{"path": "\u2764\uFE0F/notes.md", "file": "\u263A\uFE0E.txt"}, ""},
		{"emoji ZWJ sequence with FE0F", map[string]any{"path": "\U0001F3F3\uFE0F\u200D\U0001F308.png"}, ""},
		{"ideograph with a selector", map[string]any{"path": "\u845B\U000E0100城.txt", "file": "\u8FBB\uFE00"}, ""},
		// Right-to-left names need no controls; joiners are letters' business.
		{"Hebrew and Arabic names", map[string]any{"path": "מסמכים/דוח.txt", "file": "تقارير/ملف.pdf"}, ""},
		{"Persian with a zero-width non-joiner", map[string]any{"path": "می\u200cخواهم.txt"}, ""},
		{"emoji with a zero-width joiner", map[string]any{"path": "👩\u200d💻/notes.md"}, ""},
		{"Old Hangul syllable with a conjoining filler", map[string]any{"path": "\u115f\u1161\u11a8.txt"}, ""},
		{"bidi and invisible in a non-target value", map[string]any{"content": "a\u202eb\u200b\ufeff"}, ""},
		{"bidi in a non-target key", map[string]any{"labels": map[string]any{"\u200fשם": "x"}}, ""},
		{"NUL in the target", map[string]any{"path": "notes.txt\x00.png"}, `target "notes.txt\x00.png" holds the control character U+0000`},
		{"newline in the target", map[string]any{"file": "a\nb"}, "U+000A"},
		{"target named in another case", map[string]any{"Path": "a\x1fb"}, "U+001F"},
		{"a later target argument", map[string]any{"path": "a", "url": "http://x/\r"}, "U+000D"},
		{"NUL in a key", map[string]any{"pa\x00th": "x"}, `argument key "pa\x00th"`},
		{"tab in a nested key", map[string]any{"opts": map[string]any{"a": []any{map[string]any{"k\t": 1}}}}, `argument key "k\t"`},
		{"ESC in a non-target value", map[string]any{"content": "\x1b[31m"}, ""},
	}
	for _, tc := range cases {
		err := policy.CheckControl(tc.args, policy.DefaultTargetArgs)
		var ce *policy.ControlError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ce)):
			t.Errorf("%s: err = %v, want a *ControlError containing %q", tc.name, err, tc.want)
		}
	}
	// Of several, the first in byte order, whatever the map order.
	args := map[string]any{"b\x01": 1, "a\x02": 2, "c\x03": 3}
	for range 20 {
		if err := policy.CheckControl(args, nil); err == nil || !strings.Contains(err.Error(), `"a\x02"`) {
			t.Fatalf("err = %v, want the key a\\x02", err)
		}
	}
}
