package policy

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ControlError reports a character toolgate refuses in an argument key or
// a target: a control character, or in a target a bidi control or an
// invisible format character.
type ControlError struct {
	What  string // "argument key" or "target"
	Value string // the key or the target string
	Char  rune   // the first refused character of Value
}

func (e *ControlError) Error() string {
	kind := "control character"
	switch {
	case unicode.Is(unicode.Bidi_Control, e.Char):
		kind = "bidi control character"
	case isInvisible(e.Char):
		kind = "invisible format character"
	}
	return fmt.Sprintf("%s %q holds the %s U+%04X", e.What, e.Value, kind, e.Char)
}

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
//     invisible operators, BOM).
//
// String values other than targets may hold any of them (text with
// newlines, right-to-left prose). When several strings do, the error names
// the first in byte order, so that it does not depend on map order. The
// error is a *ControlError.
func CheckControl(args map[string]any, targetArgs []string) error {
	var worst *ControlError
	note := func(what, v string, refused func(rune) bool) {
		if i := strings.IndexFunc(v, refused); i >= 0 && (worst == nil || v < worst.Value) {
			r, _ := utf8.DecodeRuneInString(v[i:])
			worst = &ControlError{What: what, Value: v, Char: r}
		}
	}
	checkKeys(args, func(what, v string) { note(what, v, unicode.IsControl) })
	if worst != nil {
		return worst
	}
	for name, v := range args {
		if !isTargetArg(name, targetArgs) {
			continue
		}
		// Every string inside: a target, an array's, or one inside an
		// opaque value (keys too), which NewTool reads for escaping paths.
		var strs func(v any)
		strs = func(v any) {
			switch v := v.(type) {
			case string:
				note("target", v, refusedInTarget)
			case []any:
				for _, e := range v {
					strs(e)
				}
			case map[string]any:
				for k, e := range v {
					note("argument key", k, refusedInTarget)
					strs(e)
				}
			}
		}
		strs(v)
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

// refusedInTarget reports whether a target may not hold r: a control
// character, a bidi control or an invisible format character.
func refusedInTarget(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || isInvisible(r)
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
// them.
func isInvisible(r rune) bool {
	switch {
	case r == 0x00AD, r == 0x200B, r == 0xFEFF:
		return true
	case 0x2060 <= r && r <= 0x2064:
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

// isTargetArg reports whether the argument called name is one of
// targetArgs, matched as NewTool matches it (case-insensitively).
func isTargetArg(name string, targetArgs []string) bool {
	return slices.ContainsFunc(targetArgs, func(k string) bool { return strings.EqualFold(name, k) })
}
