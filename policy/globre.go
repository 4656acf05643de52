package policy

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/gobwas/glob"
	"github.com/gobwas/glob/syntax"
)

// A rules table's glob with two or more stars is matched as a regular
// expression. glob.match (and the glob package under it) backtracks: a
// row with three "**" and literals between them ("**/.git/**/hooks/**")
// took 45 ms against one 4 KiB target built to defeat it, and the time
// grows with a power of the target's length that each star raises, where
// Go's regexp is linear in it. With one star or none the glob package is
// linear too, and faster than a regular expression (a prefix test for
// "docs/**"), so those keep it. globRegexp writes a glob as the expression
// that matches the same strings (TestGlobRegexpMatchesGlob compares the
// two); the Go library matches with it, and toolgate serves the
// expressions to the Rego library (rules_index.tool_regex and
// target_regex), whose regex.match is linear too.

// globMatcher is a compiled glob of the rules table: the glob package's
// matcher, or for a glob that would backtrack the regular expression.
type globMatcher func(string) bool

// compileMatcher compiles pattern as glob.Compile(pattern, sep...) would,
// as a regular expression when it has stars enough to backtrack.
func compileMatcher(pattern string, sep ...rune) (globMatcher, error) {
	if backtracks(pattern) {
		re, err := compileGlob(pattern, sep...)
		if err != nil {
			return nil, err
		}
		// Most targets fail on a fixed end ("**/*.exe" on notes/a.txt):
		// comparing it first spares the regular expression, which
		// costs a microsecond or two a target.
		prefix, suffix := literalEnds(pattern)
		if prefix == "" && suffix == "" || strings.ContainsRune(prefix+suffix, utf8.RuneError) {
			// An end holding U+FFFD: the expression reads an invalid
			// byte as U+FFFD, a byte comparison would not.
			return re.MatchString, nil
		}
		return func(s string) bool {
			return len(s) >= len(prefix)+len(suffix) && strings.HasPrefix(s, prefix) && strings.HasSuffix(s, suffix) && re.MatchString(s)
		}, nil
	}
	g, err := glob.Compile(pattern, sep...)
	if err != nil {
		return nil, err
	}
	return g.Match, nil
}

// backtracks says whether pattern has more than one star ("*" or "**"),
// which can make the glob package's matching more than linear.
func backtracks(pattern string) bool {
	stars := 0
	lex := syntax.NewLexer(pattern)
	for {
		switch lex.Next().Type {
		case syntax.Any, syntax.Super:
			if stars++; stars > 1 {
				return true
			}
		case syntax.EOF, syntax.Error:
			return false
		}
	}
}

// literalEnds is the text every match of pattern starts and ends with:
// its first token and its last, when they are text outside any "{a,b}".
// A pattern that backtracks has a star between the two, so a match holds
// both, one after the other.
func literalEnds(pattern string) (prefix, suffix string) {
	lex := syntax.NewLexer(pattern)
	depth := 0
	for i := 0; ; i++ {
		t := lex.Next()
		switch {
		case t.Type == syntax.EOF:
			return prefix, suffix
		case t.Type == syntax.Error:
			return "", ""
		case t.Type == syntax.Text && depth == 0:
			if i == 0 {
				prefix = t.Data
			}
			suffix = t.Data
			continue
		case t.Type == syntax.TermsOpen:
			depth++
		case t.Type == syntax.TermsClose:
			depth--
		}
		suffix = "" // the pattern goes on past the last text
	}
}

// globRegexp is the regular expression, anchored at both ends, that
// matches what glob.Compile(pattern, sep...) matches: "*" any run of
// characters but sep, "**" any run, "?" one character but sep, a class
// one character in (or, with "!", not in) it, separators included, and
// "{a,b}" either alternative.
func globRegexp(pattern string, sep ...rune) (string, error) {
	// The glob package refuses what it cannot parse; what it accepts, its
	// lexer splits into the tokens written out below.
	if _, err := glob.Compile(pattern, sep...); err != nil {
		return "", err
	}
	notSep := "(?s:.)"
	if len(sep) > 0 {
		var b strings.Builder
		b.WriteString("[^")
		for _, r := range sep {
			fmt.Fprintf(&b, `\x{%x}`, r)
		}
		b.WriteString("]")
		notSep = b.String()
	}
	var b strings.Builder
	b.WriteString(`^(?s:`)
	lex := syntax.NewLexer(pattern)
	for {
		t := lex.Next()
		switch t.Type {
		case syntax.EOF:
			b.WriteString(`)$`)
			return b.String(), nil
		case syntax.Error:
			return "", fmt.Errorf("glob %q: %s", pattern, t.Data)
		case syntax.Text:
			b.WriteString(regexp.QuoteMeta(t.Data))
		case syntax.Any:
			b.WriteString(notSep + "*")
		case syntax.Super:
			b.WriteString(".*")
		case syntax.Single:
			b.WriteString(notSep)
		case syntax.TermsOpen:
			b.WriteString("(?:")
		case syntax.TermSeparator:
			b.WriteString("|")
		case syntax.TermsClose:
			b.WriteString(")")
		case syntax.RangeOpen:
			if err := writeClass(&b, lex); err != nil {
				return "", fmt.Errorf("glob %q: %w", pattern, err)
			}
		default:
			return "", fmt.Errorf("glob %q: unexpected %v", pattern, t)
		}
	}
}

// writeClass writes the character class whose "[" the lexer has just
// given, consuming its tokens up to its "]": a range or a set, either
// negated, every character written as an escape.
func writeClass(b *strings.Builder, lex *syntax.Lexer) error {
	b.WriteString("[")
	for {
		t := lex.Next()
		switch t.Type {
		case syntax.Not:
			b.WriteString("^")
		case syntax.RangeLo, syntax.RangeHi, syntax.Text:
			for _, r := range t.Data {
				fmt.Fprintf(b, `\x{%x}`, r)
			}
		case syntax.RangeBetween:
			b.WriteString("-")
		case syntax.RangeClose:
			b.WriteString("]")
			return nil
		default:
			return fmt.Errorf("unexpected %v in a character class", t)
		}
	}
}

// compileGlob is globRegexp compiled.
func compileGlob(pattern string, sep ...rune) (*regexp.Regexp, error) {
	re, err := globRegexp(pattern, sep...)
	if err != nil {
		return nil, err
	}
	return regexp.Compile(re)
}
