package policy

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A file-path target can read as one path to the policy and as another to
// the tool, through two conversions a tool may make before it opens the
// path: decoding percent-escapes (a tool that URL-decodes its argument
// opens secrets/key for "notes/%2e%2e/secrets/key"), and, on Windows, a
// "best-fit" conversion to the ANSI code page, which turns look-alikes
// into ASCII ("notes\uff0e\uff0e\uff3csecrets" is notes..\secrets to a
// tool that calls an ANSI API or passes the path on a command line to a
// program that reads it as ANSI: the WorstFit attacks).
//
// Where such a conversion makes path syntax, the call is refused
// (CheckTargetSpelling) rather than the target being converted as the
// tool would: toolgate does not know whether a tool decodes, nor its code
// page, and the same character becomes different things in different
// code pages (U+00A5 is "\" to code page 932, "¥" to 1252, "Y" to 1250),
// so no one conversion is the tool's. A refused call is seen and
// explained; a guessed conversion would be a silent disagreement.

// maxDecodes bounds how many times a target's percent-escapes are decoded
// (a tool may decode more than once, "%252e" being "." to one that decodes
// twice): a target still encoded after that is refused.
const maxDecodes = 8

// maxDecodedLen bounds the targets percent-decoding is tried on, in bytes:
// each pass costs about seventeen bytes of allocation per byte of target,
// so a body-sized target encoded eight deep cost some 300 MB and half a
// second of CPU a call. A longer target that may hold a percent-escape is
// refused, as one encoded too many times is; no file path needs more (4096
// is Linux's PATH_MAX).
const maxDecodedLen = 4096

// maxDecodedTotal bounds the bytes of all a call's targets that may hold a
// percent-escape, which are decoded: many targets under maxDecodedLen each
// would cost what one large one did. 256 targets of 128 bytes fit.
const maxDecodedTotal = 32 << 10

// misreading is a spelling in a file-path target that a tool may read as
// other path syntax than toolgate does.
type misreading struct {
	char    rune   // a look-alike best-fit turns into As, or 0
	escape  string // a percent-escape as written in the target, or ""
	as      byte   // the path syntax it becomes; 0: encoded too many times
	decoded bool   // char is in the target's percent-decoded spelling
	long    bool   // longer than maxDecodedLen: not decoded
}

// misread reports the first misreading in raw, a value normalizeTarget
// reads as a file path: a percent-escape of ".", "/" or "\" (encoded any
// number of times: "%2e", "%252E"), or a target encoded more than
// maxDecodes times; with FoldWindows also a character best-fit turns into
// path syntax (bestFitSyntax), in raw or in its decoded spelling, or one it
// turns into a space at the end of a segment, where Windows drops it.
func misread(raw string, fold Fold) (misreading, bool) {
	if m, ok := bestFitMisread(raw, fold); ok {
		return m, true
	}
	if !mayBeEncoded(raw, fold) {
		return misreading{}, false
	}
	if len(raw) > maxDecodedLen {
		return misreading{long: true}, true
	}
	dec, m, deep := decodePercent(raw, fold)
	if m.as != 0 || deep {
		return m, true
	}
	if m, ok := bestFitMisread(dec, fold); ok {
		m.decoded = true
		return m, true
	}
	return misreading{}, false
}

// bestFitSyntax is the ASCII path syntax that a Windows best-fit
// conversion to some ANSI code page makes of r, or 0. The characters are
// those the published best-fit tables (bestfit1250.txt to bestfit1258.txt,
// bestfit932.txt, bestfit949.txt) map to ".", "/", "\" or ":", and those
// whose compatibility form is one of them (small and vertical forms), which
// a code page without them may best-fit alike. Only path syntax is refused:
// best-fit also turns "ｓ" or "ā" into "s" or "a", but refusing every such
// letter would refuse names in most scripts.
func bestFitSyntax(r rune) byte {
	switch r {
	case 0xFF0E, 0xFE52, 0x2024, 0x2025: // fullwidth, small full stop; one and two dot leaders
		return '.'
	case 0xFF0F, 0x2215, 0x2044: // fullwidth solidus, division slash, fraction slash
		return '/'
	case 0xFF3C, 0xFE68, 0x2216, 0x00A5, 0x20A9: // fullwidth, small reverse solidus, set minus, yen (932), won (949)
		return '\\'
	case 0xFF1A, 0xFE55, 0xFE13, 0x2236, 0x0589: // fullwidth, small, vertical colon, ratio, Armenian full stop
		return ':'
	}
	return 0
}

// isBestFitSpace reports whether a best-fit conversion may make r a space:
// the spaces of U+2000 to U+2006 and U+3000 (ideographic) do in the tables;
// U+00A0 may, in a code page without it. Windows drops a segment's
// trailing spaces, so "secrets\u3000" may open secrets.
func isBestFitSpace(r rune) bool {
	return 0x2000 <= r && r <= 0x2006 || r == 0x3000 || r == 0x00A0
}

// isBestFitPercent reports whether a best-fit conversion makes r a "%"
// (fullwidth, small, Arabic percent sign): with FoldWindows it starts a
// percent-escape as "%" does, since a tool may convert before it decodes.
func isBestFitPercent(r rune) bool { return r == 0xFF05 || r == 0xFE6A || r == 0x066A }

// bestFitMisread reports, with FoldWindows, the first character of s that
// best-fit turns into path syntax, or else a space look-alike that ends a
// segment (trailing dots and spaces aside).
func bestFitMisread(s string, fold Fold) (misreading, bool) {
	if fold != FoldWindows || isASCII(s) {
		return misreading{}, false
	}
	for _, r := range s {
		if as := bestFitSyntax(r); as != 0 {
			return misreading{char: r, as: as}, true
		}
	}
	for seg := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '/' || r == '\\' }) {
		if r, _ := utf8.DecodeLastRuneInString(strings.TrimRight(seg, ". ")); isBestFitSpace(r) {
			return misreading{char: r, as: ' '}, true
		}
	}
	return misreading{}, false
}

// bestFitLetters is, with FoldWindows, the target a tool that converts the
// path s to an ANSI code page opens when s holds fullwidth forms of ASCII
// letters, digits or punctuation (U+FF01 to U+FF5E): every best-fit table
// makes them ASCII, so "ｓｅｃｒｅｔｓ/key" is secrets/key to such a tool, and
// a deny row for secrets/** must see that. Those that become path syntax
// are refused before (bestFitSyntax); other look-alikes (accented letters)
// differ from one code page to another and are left as written.
func bestFitLetters(k, s string, fold Fold) (TargetArg, bool) {
	if fold != FoldWindows || isASCII(s) || !pathValue(k, s) {
		return TargetArg{}, false
	}
	fullwidth := func(r rune) bool { return 0xFF01 <= r && r <= 0xFF5E }
	if !strings.ContainsFunc(s, fullwidth) {
		return TargetArg{}, false
	}
	ascii := strings.Map(func(r rune) rune {
		if fullwidth(r) {
			return r - 0xFEE0
		}
		return r
	}, s)
	p, rel, escapes := normalizePath(ascii, fold)
	return TargetArg{Arg: k, Target: p, Relative: rel, Raw: s, Escapes: escapes}, true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// mayBeEncoded reports whether s may hold a percent-escape: a "%", or with
// FoldWindows a character best-fit makes one.
func mayBeEncoded(s string, fold Fold) bool {
	return strings.IndexByte(s, '%') >= 0 || fold == FoldWindows && strings.ContainsFunc(s, isBestFitPercent)
}

// decodePercent decodes the percent-escapes of raw again and again, up to
// maxDecodes times, as tools that decode (once or more) read it; an escape
// that is not two hex digits stays as written. first is the first escape,
// as written in raw, that decodes to ".", "/" or "\"; deep reports that raw
// was still encoded after maxDecodes decodings. With FoldWindows a
// look-alike of "%" or of a hex digit counts as the character best-fit
// makes of it.
func decodePercent(raw string, fold Fold) (decoded string, first misreading, deep bool) {
	type span struct{ lo, hi int } // the bytes of raw a decoded byte stands for
	s, spans := raw, []span(nil)   // nil: s is raw
	at := func(i int) span {
		if spans == nil {
			return span{i, i + 1}
		}
		return spans[i]
	}
	for range maxDecodes + 1 {
		var (
			b    []byte
			next []span
		)
		for i := 0; i < len(s); {
			if w := percentAt(s, i, fold); w > 0 {
				if r, end, ok := uEscapeAt(s, i+w, fold); ok {
					// "%u002e": the non-standard escape JavaScript's
					// unescape and some servers decode.
					sp := span{at(i).lo, at(end - 1).hi}
					if (r == '.' || r == '/' || r == '\\') && first.as == 0 {
						first = misreading{escape: raw[sp.lo:sp.hi], as: byte(r)}
					}
					if b == nil {
						b, next = make([]byte, 0, len(s)), make([]span, 0, len(s))
						for j := range i {
							b, next = append(b, s[j]), append(next, at(j))
						}
					}
					var enc []byte
					if utf16.IsSurrogate(r) {
						enc = []byte{0xFF} // a lone half: no character, so the spelling is unreadable
					} else {
						enc = utf8.AppendRune(nil, r)
					}
					for _, c := range enc {
						b, next = append(b, c), append(next, sp)
					}
					i = end
					continue
				}
				if hi, n := hexAt(s, i+w, fold); n > 0 {
					if lo, m := hexAt(s, i+w+n, fold); m > 0 {
						c, end := hi<<4|lo, i+w+n+m
						sp := span{at(i).lo, at(end - 1).hi}
						if (c == '.' || c == '/' || c == '\\') && first.as == 0 {
							first = misreading{escape: raw[sp.lo:sp.hi], as: c}
						}
						if b == nil {
							b, next = make([]byte, 0, len(s)), make([]span, 0, len(s))
							for j := range i {
								b, next = append(b, s[j]), append(next, at(j))
							}
						}
						b, next = append(b, c), append(next, sp)
						i = end
						continue
					}
				}
			}
			if b != nil {
				b, next = append(b, s[i]), append(next, at(i))
			}
			i++
		}
		if b == nil {
			return s, first, false
		}
		s, spans = string(b), next
	}
	return s, first, true
}

// uEscapeAt reads the "u" and four hex digits of a "%uXXXX" escape whose
// "%" ends at i: the character and where the escape ends.
func uEscapeAt(s string, i int, fold Fold) (r rune, end int, ok bool) {
	if i >= len(s) || s[i] != 'u' && s[i] != 'U' {
		return 0, 0, false
	}
	end = i + 1
	for range 4 {
		v, n := hexAt(s, end, fold)
		if n == 0 {
			return 0, 0, false
		}
		r, end = r<<4|rune(v), end+n
	}
	return r, end, true
}

// percentAt returns the length of the "%" starting s[i:], or 0.
func percentAt(s string, i int, fold Fold) int {
	if s[i] == '%' {
		return 1
	}
	if fold == FoldWindows && s[i] >= utf8.RuneSelf {
		if r, n := utf8.DecodeRuneInString(s[i:]); isBestFitPercent(r) {
			return n
		}
	}
	return 0
}

// hexAt returns the value and length of the hex digit starting s[i:], or
// a length of 0. With FoldWindows a fullwidth digit or letter A to F counts
// (best-fit makes it the ASCII one).
func hexAt(s string, i int, fold Fold) (v byte, n int) {
	if i >= len(s) {
		return 0, 0
	}
	switch c := s[i]; {
	case '0' <= c && c <= '9':
		return c - '0', 1
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, 1
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, 1
	case c < utf8.RuneSelf || fold != FoldWindows:
		return 0, 0
	}
	switch r, n := utf8.DecodeRuneInString(s[i:]); {
	case 0xFF10 <= r && r <= 0xFF19:
		return byte(r - 0xFF10), n
	case 0xFF21 <= r && r <= 0xFF26:
		return byte(r-0xFF21) + 10, n
	case 0xFF41 <= r && r <= 0xFF46:
		return byte(r-0xFF41) + 10, n
	}
	return 0, 0
}

// pathValue reports whether normalizeTarget reads raw, a value of argument
// arg, as a file path: not empty, not a command, not a URL.
func pathValue(arg, raw string) bool {
	switch {
	case raw == "" || commandArg(arg):
		return false
	case !urlArg(arg):
		// Even one that parses as a URL: a tool may join it to its root.
		return true
	}
	_, _, isURL, _ := asURL(arg, raw)
	return !isURL
}

// decodedTarget is the target a tool that percent-decodes the file path s
// opens, when that differs from s: deny and ask rows then see it too, and
// allow rows must cover it as well. It is opaque when the decoded bytes
// are not a name the policy can read (invalid UTF-8, a control character
// or another character CheckControl refuses) or s was encoded more than
// maxDecodes times; it escapes when it climbs above its root.
func decodedTarget(k, s string, fold Fold) (TargetArg, bool) {
	if !mayBeEncoded(s, fold) || !pathValue(k, s) {
		return TargetArg{}, false
	}
	if len(s) > maxDecodedLen {
		return TargetArg{Arg: k, Raw: s, Escapes: true, Opaque: true}, true
	}
	dec, _, deep := decodePercent(s, fold)
	if dec == s {
		return TargetArg{}, false
	}
	norm, rel, escapes := normalizePath(dec, fold)
	if deep || !utf8.ValidString(dec) || refusedInTarget(dec) >= 0 {
		return TargetArg{Arg: k, Raw: s, Escapes: escapes || deep, Opaque: true}, true
	}
	return TargetArg{Arg: k, Target: norm, Relative: rel, Raw: s, Escapes: escapes}, true
}

// SpellingError reports a file-path target that a tool may read as other
// path syntax than toolgate does (CheckTargetSpelling).
type SpellingError struct {
	What  string // "target" or "argument key"
	Value string // the target string, or the key
	// Char is a character a Windows best-fit conversion makes path syntax
	// (target_fold: windows), or 0.
	Char rune
	// Escape is a percent-escape as written in Value ("%2e", "%252F"),
	// or "" (with Char 0 too: Value is encoded too many times).
	Escape  string
	As      string // the path syntax Char or Escape becomes
	Decoded bool   // Char is in Value's percent-decoded spelling
	// Long: Value may hold a percent-escape and is longer than
	// maxDecodedLen, too long to be decoded and judged; with Total, the
	// call's targets that may hold one are longer than maxDecodedTotal in
	// all (Value is the one that went past it).
	Long, Total bool
}

func (e *SpellingError) Error() string {
	v := quoteLookalikes(shortened(e.Value))
	switch {
	case e.Total:
		return fmt.Sprintf("the call's file-path targets that may hold a percent-escape come to more than %d bytes (%s %s went past it): too many to judge as a tool that decodes them reads them", maxDecodedTotal, e.What, v)
	case e.Long:
		return fmt.Sprintf("%s %s (%d bytes) may hold a percent-escape and is longer than %d bytes: too long to judge as a tool that decodes it reads it", e.What, v, len(e.Value), maxDecodedLen)
	case e.Char != 0 && e.As == " ":
		return fmt.Sprintf("%s %s ends a path segment with U+%04X, which a Windows tool may read as a space and drop (target_fold: windows)", e.What, v, e.Char)
	case e.Char != 0:
		where := ""
		if e.Decoded {
			where = " once percent-decoded"
		}
		return fmt.Sprintf("%s %s holds U+%04X%s, which a Windows tool may read as %q (target_fold: windows)", e.What, v, e.Char, where, e.As)
	case e.Escape != "":
		return fmt.Sprintf("%s %s holds %s, a percent-encoded %q, which a tool that decodes the path reads as path syntax", e.What, v, quoteLookalikes(e.Escape), e.As)
	}
	return fmt.Sprintf("%s %s is percent-encoded more than %d times", e.What, v, maxDecodes)
}

// shownLen is how much of a refused value a SpellingError quotes: the
// message goes back to the caller and into the log, and a value can be as
// long as a body.
const shownLen = 256

// shortened is s cut to about shownLen bytes, at a character's start, with
// "…" for what was cut.
func shortened(s string) string {
	if len(s) <= shownLen {
		return s
	}
	i := shownLen
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// quoteLookalikes is s quoted as ControlError quotes it, with the
// characters best-fit turns into path syntax, a space or "%" escaped too:
// the message must show what a reader would take for "." or "\".
func quoteLookalikes(s string) string {
	q := quote(s)
	lookalike := func(r rune) bool { return bestFitSyntax(r) != 0 || isBestFitSpace(r) || isBestFitPercent(r) }
	if !strings.ContainsFunc(q, lookalike) {
		return q
	}
	var b strings.Builder
	for _, r := range q {
		if lookalike(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CheckTargetSpelling refuses a call whose file-path target a tool may
// read as other path syntax than toolgate does (see misread): a string of
// an argument named in targetArgs, matched as NewTool matches it, or any
// string or key inside such an argument, that normalizeTarget reads as a
// path (not a URL, not a command), holding
//
//   - a percent-escape of ".", "/" or "\" ("%2e", "%2F", "%5c"), encoded
//     any number of times ("%252e"), or percent-encoded more than
//     maxDecodes times: a tool that decodes its path would read
//     "notes/%2e%2e/secrets/key" as secrets/key;
//   - with FoldWindows, a character a Windows best-fit conversion turns
//     into ".", "/", "\" or ":" (bestFitSyntax: U+FF0E, U+FF0F, U+FF3C,
//     U+2215, U+2216, U+FE68, U+00A5, U+20A9, U+FF1A, ...), in the path or
//     in its percent-decoded spelling, or one it turns into a space
//     (isBestFitSpace) at the end of a segment, where Windows drops it.
//
// Without FoldWindows best-fit look-alikes pass: a tool that does not
// resolve names as Windows does never converts them, and "¥", "₩" or a
// fullwidth colon are ordinary characters in names. Of several offending
// strings the error names the first in byte order. It is a *SpellingError.
// Call it after CheckControl, whose refusals come first.
func CheckTargetSpelling(args map[string]any, targetArgs []string, fold Fold) error {
	var worst *SpellingError
	budget := maxDecodedTotal
	note := func(what, k, v string) {
		if worst != nil && worst.Total {
			return
		}
		if mayBeEncoded(v, fold) && pathValue(k, v) {
			if budget -= len(v); budget < 0 {
				worst = &SpellingError{What: what, Value: v, Long: true, Total: true}
				return
			}
		}
		if worst != nil && v >= worst.Value {
			return
		}
		if !mayBeEncoded(v, fold) && (fold != FoldWindows || isASCII(v)) || !pathValue(k, v) {
			return
		}
		if m, ok := misread(v, fold); ok {
			worst = &SpellingError{What: what, Value: v, Char: m.char, Escape: m.escape, Decoded: m.decoded, Long: m.long}
			if m.as != 0 {
				worst.As = string(rune(m.as))
			}
		}
	}
	var scratch targetScratch
	for i, v := range scratch.values(args, targetArgs) {
		k := targetArgs[i]
		eachTargetString(v, func(what, s string) { note(what, k, s) })
	}
	if worst != nil {
		return worst
	}
	return nil
}
