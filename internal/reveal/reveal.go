// Package reveal spells out the characters that hide or reorder text, so
// that people deciding on a call (on the approval page, in Slack or in
// Teams) see the bytes that will run, not a disguise.
package reveal

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// String spells out characters that hide or reorder text (bidi overrides,
// zero-width and other format characters, tag characters, variation
// selectors, controls, line separators: Hidden) as \uXXXX. In JSON that
// is a valid escape of the same character. Newlines, tabs and carriage
// returns stay (comments span lines); invalid UTF-8 shows as U+FFFD.
func String(s string) string {
	if strings.IndexFunc(s, Hidden) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !Hidden(r) {
			b.WriteRune(r)
			continue
		}
		if r > 0xFFFF {
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// Hidden reports whether r is spelled out: controls, format characters
// (bidi, zero-width, tag characters), line and paragraph separators,
// private-use characters, the unassigned rest of the Tags block, and
// variation selectors. Policy refuses some of these only in targets, or
// only where they select nothing (an emoji's U+FE0F passes); what people
// read marks every one wherever it is, as it marks the joiners emoji use,
// so that what shows as nothing is never silent.
func Hidden(r rune) bool {
	switch r {
	case '\n', '\t', '\r':
		return false
	}
	// Other_Default_Ignorable_Code_Point: characters filed under other
	// categories that show as nothing (U+034F, the Hangul fillers U+115F,
	// U+1160, U+3164 and U+FFA0, the Khmer vowels U+17B4 and U+17B5).
	// U+2800, the blank Braille pattern, is a symbol that draws nothing.
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) ||
		0xE0000 <= r && r <= 0xE007F || r == 0x2800
}
