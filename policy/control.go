package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ControlError reports a character toolgate refuses in an argument key or
// a target: a control character, or in a target a bidi control, an
// invisible format character, a tag character or a variation selector
// where it selects nothing.
type ControlError struct {
	What  string // "argument key" or "target"
	Value string // the key or the target string
	Char  rune   // the first refused character of Value
}

// LogSafe is err's message for a log: an argument's value, which a
// *ControlError or *SpellingError quotes for the agent that sent it, is
// named by its length instead, since it may hold a secret that log.arguments
// and the policy's masks keep out of the decision log. Any other error's
// message is as it is.
func LogSafe(err error) string {
	var ce *ControlError
	if errors.As(err, &ce) {
		c := *ce
		c.Value = fmt.Sprintf("(%d bytes)", len(ce.Value))
		return c.Error()
	}
	var se *SpellingError
	if errors.As(err, &se) {
		c := *se
		c.Value = fmt.Sprintf("(%d bytes)", len(se.Value))
		return c.Error()
	}
	return err.Error()
}

func (e *ControlError) Error() string {
	kind := "control character"
	switch {
	case unicode.Is(unicode.Bidi_Control, e.Char):
		kind = "bidi control character"
	case isInvisible(e.Char):
		kind = "invisible format character"
	case isTag(e.Char):
		kind = "tag character"
	case isVariationSelector(e.Char):
		return fmt.Sprintf("%s %s holds the variation selector U+%04X where it selects nothing", e.What, quote(e.Value), e.Char)
	}
	return fmt.Sprintf("%s %s holds the %s U+%04X", e.What, quote(e.Value), kind, e.Char)
}

// quote is s quoted as %q quotes it, but with variation selectors and
// the invisible characters Go counts as printable (isInvisible: the
// grapheme joiner, a mark; the Hangul fillers, letters) escaped too: the
// message would otherwise show nothing where the refused character is.
func quote(s string) string {
	q := strconv.Quote(s)
	if !strings.ContainsFunc(q, shownAsNothing) {
		return q
	}
	var b strings.Builder
	for _, r := range q {
		switch {
		case r > 0xFFFF && shownAsNothing(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		case shownAsNothing(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func shownAsNothing(r rune) bool { return isVariationSelector(r) || isInvisible(r) }

// CheckControl refuses arguments that a tool server could read otherwise
// than the policy does, or that would read otherwise to an approver than
// to the tool:
//
//   - a key, at any depth, holding a control character (IsControl: C0
//     U+0000 to U+001F, DEL U+007F, C1 U+0080 to U+009F);
//   - a target string (a string argument whose name, matched as NewTool
//     matches it, is in targetArgs, or any string or key inside such an
//     argument) holding a control character, a bidi control (U+061C,
//     U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069: they reorder
//     how the text shows, "Trojan Source") or an invisible format
//     character (isInvisible: soft hyphen, zero-width space, word joiner,
//     invisible operators, BOM), a tag character (U+E0000 to U+E007F) or a
//     variation selector (Mongolian ones included) that selects nothing
//     (strayVariationSelector).
//
// String values other than targets may hold any of them (text with
// newlines, right-to-left prose). When several strings do, the error names
// the first in byte order, so that it does not depend on map order. The
// error is a *ControlError.
func CheckControl(args map[string]any, targetArgs []string) error {
	var worst *ControlError
	// refused returns the byte offset of the first refused character, or -1.
	note := func(what, v string, refused func(string) int) {
		if i := refused(v); i >= 0 && (worst == nil || v < worst.Value) {
			r, _ := utf8.DecodeRuneInString(v[i:])
			worst = &ControlError{What: what, Value: v, Char: r}
		}
	}
	control := func(s string) int { return strings.IndexFunc(s, unicode.IsControl) }
	checkKeys(args, func(what, v string) { note(what, v, control) })
	if worst != nil {
		return worst
	}
	for name, v := range args {
		if !isTargetArg(name, targetArgs) {
			continue
		}
		// Every string inside: a target, an array's, or one inside an
		// opaque value (keys too), which NewTool reads for escaping paths.
		eachTargetString(v, func(what, s string) { note(what, s, refusedInTarget) })
	}
	if worst != nil {
		return worst
	}
	return nil
}

// checkKeys passes every object key under v to note.
func checkKeys(v any, note func(what, v string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			note("argument key", k)
			checkKeys(x, note)
		}
	case []any:
		for _, x := range v {
			checkKeys(x, note)
		}
	}
}

// refusedInTarget returns the byte offset in s of the first character a
// target may not hold, or -1: a control character, a bidi control, an
// invisible format character, a tag character, or a variation selector
// that selects nothing.
func refusedInTarget(s string) int {
	prev := rune(-1) // none: s starts here
	for i, r := range s {
		switch {
		case unicode.IsControl(r), unicode.Is(unicode.Bidi_Control, r), isInvisible(r), isTag(r):
			return i
		case isVariationSelector(r) && strayVariationSelector(prev, r):
			return i
		}
		prev = r
	}
	return -1
}

// isTag reports whether r is in the Tags block, U+E0000 to U+E007F. Tag
// characters show as nothing, yet each stands for an ASCII character that
// a model reads ("ASCII smuggling"): a target could carry instructions an
// approver never sees, or be a name that looks like another. Their one use
// a target might see, an emoji flag of a region (England's), is not worth
// that.
func isTag(r rune) bool { return 0xE0000 <= r && r <= 0xE007F }

// isVariationSelector reports whether r is a variation selector: U+FE00
// to U+FE0F, U+E0100 to U+E01EF (the ideographic ones), or a Mongolian
// free variation selector (U+180B to U+180D, U+180F).
func isVariationSelector(r rune) bool {
	return 0xFE00 <= r && r <= 0xFE0F || 0xE0100 <= r && r <= 0xE01EF || isMongolianFVS(r)
}

// isMongolianFVS reports whether r is a Mongolian free variation selector,
// U+180B to U+180D or U+180F (U+180E is the vowel separator).
func isMongolianFVS(r rune) bool { return 0x180B <= r && r <= 0x180D || r == 0x180F }

// strayVariationSelector reports whether the variation selector vs, right
// after prev (-1: nothing), selects nothing. A selector picks a form of
// the character before it and shows as nothing itself, so after a letter
// or a digit it only makes two names look alike (report\uFE0F.txt passes
// for report.txt). The rule, simple over exact: U+FE00 to U+FE0F may
// follow a symbol outside ASCII (emoji are symbols: text or emoji
// presentation with U+FE0E or U+FE0F, as in a heart with U+FE0F) or an
// ideograph; U+E0100 to U+E01EF, which select regional glyphs of CJK
// ideographs, may follow only an ideograph; the Mongolian free variation
// selectors, which pick a contextual form of a Mongolian letter, may follow
// only a letter of the Mongolian script. The few emoji that are not
// symbols (keycaps such as 1 U+FE0F U+20E3, U+203C, U+2139) are refused
// with a selector; their bare forms pass.
func strayVariationSelector(prev, vs rune) bool {
	if isMongolianFVS(vs) {
		return prev < 0 || !unicode.Is(unicode.Mongolian, prev) || !unicode.IsLetter(prev)
	}
	ideograph := prev >= 0 && unicode.Is(unicode.Ideographic, prev)
	if vs >= 0xE0100 {
		return !ideograph
	}
	symbol := prev > unicode.MaxASCII && unicode.IsSymbol(prev)
	return !symbol && !ideograph
}

// isInvisible reports whether r is one of the format characters that
// show as nothing and have no place in a name, a path, a URL or a
// command: U+00AD SOFT HYPHEN, U+200B ZERO WIDTH SPACE, U+2060 WORD
// JOINER, U+2061 to U+2064 (invisible operators) and U+FEFF ZERO WIDTH
// NO-BREAK SPACE (the BOM). A target holding one would read as another
// string on a page or in a chat message; URL stacks that map hosts as
// UTS #46 does drop them, so "ev\u00adil.com" would reach evil.com past a
// row that names it. U+200C and U+200D (zero-width non-joiner and joiner)
// are not among them: Persian and Indic words and emoji sequences need
// them. Also the characters that show as nothing or as a blank without
// being a space: U+034F COMBINING GRAPHEME JOINER and U+1BCA0 to U+1BCA3
// (shorthand format controls), which UTS #46 drops as it drops a soft
// hyphen; U+180E MONGOLIAN VOWEL SEPARATOR; U+206A to U+206F (deprecated
// format characters); U+3164 and U+FFA0, the Hangul fillers that pass
// for a blank in names; and U+17B4 and U+17B5, Khmer vowels Unicode says
// not to use, which show as nothing. The conjoining fillers U+115F and U+1160 stay:
// Old Hangul syllables are written with them.
func isInvisible(r rune) bool {
	switch {
	case r == 0x00AD, r == 0x034F, r == 0x180E, r == 0x200B, r == 0x3164, r == 0xFEFF, r == 0xFFA0, r == 0x17B4, r == 0x17B5:
		return true
	case 0x2060 <= r && r <= 0x2064, 0x206A <= r && r <= 0x206F, 0x1BCA0 <= r && r <= 0x1BCA3:
		return true
	}
	return false
}

// CheckTargets refuses a call that names more than MaxTargets targets
// (strings and other values in the arguments named in targetArgs, an
// array's items each counting): the rules table matches every target, so
// their number bounds the work of a decision, and a target past the bound
// would be one the policy never read.
func CheckTargets(args map[string]any, targetArgs []string) error {
	n := 0
	for name, v := range args {
		if !isTargetArg(name, targetArgs) {
			continue
		}
		switch v := v.(type) {
		case nil:
		case []any:
			for _, e := range v {
				if e != nil {
					n++
				}
			}
		default:
			n++
		}
	}
	if n > MaxTargets {
		return fmt.Errorf("the call names %d targets (values of the arguments in target_args); at most %d", n, MaxTargets)
	}
	return nil
}

// eachTargetString calls f with every string inside v, a target argument's
// value: the value itself, an array's strings, and the keys ("argument
// key") and strings of an object at any depth ("target").
func eachTargetString(v any, f func(what, s string)) {
	switch v := v.(type) {
	case string:
		f("target", v)
	case []any:
		for _, e := range v {
			eachTargetString(e, f)
		}
	case map[string]any:
		for k, e := range v {
			f("argument key", k)
			eachTargetString(e, f)
		}
	}
}

// isTargetArg reports whether the argument called name is one of
// targetArgs, matched as NewTool matches it (SameArgName).
func isTargetArg(name string, targetArgs []string) bool {
	return slices.ContainsFunc(targetArgs, func(k string) bool { return SameArgName(name, k) })
}
