package signin

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Bounds of an approver's identity as any source gives it. A name or a
// group is recorded with every decision and shown on pages; these keep a
// hostile or broken source from filling logs and cookies.
const (
	MaxNameBytes  = 256
	MaxGroups     = 100
	MaxGroupBytes = 256
)

// noIdentity is an error wrapping ErrNoIdentity that says why.
func noIdentity(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNoIdentity, fmt.Sprintf(format, args...))
}

// checkName checks an approver's name: not empty, at most MaxNameBytes,
// valid UTF-8, no control characters.
func checkName(name string) error {
	switch {
	case name == "":
		return noIdentity("the approver's name is empty")
	case len(name) > MaxNameBytes:
		return noIdentity("the approver's name is longer than %d bytes", MaxNameBytes)
	case !utf8.ValidString(name):
		return noIdentity("the approver's name is not valid UTF-8")
	case strings.ContainsFunc(name, unicode.IsControl):
		return noIdentity("the approver's name holds control characters")
	case !norm.NFC.IsNormalString(name):
		// "josé" precomposed and "jose" + U+0301 look the same and are one
		// person, but compare as two names: a quorum would count them
		// twice. Identity providers send names composed (NFC).
		return noIdentity("the approver's name is not in Unicode normal form C (composed)")
	}
	return nil
}

// checkGroups checks an approver's groups: at most MaxGroups, each not
// empty, at most MaxGroupBytes, valid UTF-8, no control characters.
func checkGroups(groups []string) error {
	if len(groups) > MaxGroups {
		return noIdentity("the approver has %d groups, more than %d", len(groups), MaxGroups)
	}
	for i, g := range groups {
		switch {
		case g == "":
			return noIdentity("group %d is empty", i)
		case len(g) > MaxGroupBytes:
			return noIdentity("group %d is longer than %d bytes", i, MaxGroupBytes)
		case !utf8.ValidString(g):
			return noIdentity("group %d is not valid UTF-8", i)
		case strings.ContainsFunc(g, unicode.IsControl):
			return noIdentity("group %d holds control characters", i)
		}
	}
	return nil
}

// dedupe returns groups without repeats, in first-seen order.
func dedupe(groups []string) []string {
	seen := make(map[string]bool, len(groups))
	out := groups[:0:0]
	for _, g := range groups {
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}
