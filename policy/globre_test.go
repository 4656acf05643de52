package policy

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/glob"
)

// TestGlobRegexpMatchesGlob: on generated globs and strings, the regular
// expression, and the matcher rows use (the expression behind a test of
// the glob's literal ends), match exactly what the glob package does, with "/" as the
// separator (targets) and with none (tool names).
func TestGlobRegexpMatchesGlob(t *testing.T) {
	parts := []string{"a", "b", "/", ".", "*", "**", "?", "[ab]", "[!a]", "[a-c]", "[!/]", "{a,b}", "{,a/}", "{**/,}", `\*`, ",", "}", "é", "{a,{b,*}}"}
	letters := []string{"a", "b", "c", "/", ".", "*", ",", "é", "}"}
	rng := rand.New(rand.NewPCG(1, 2))
	compared := 0
	for range 4000 {
		var p strings.Builder
		for range 1 + rng.IntN(6) {
			p.WriteString(parts[rng.IntN(len(parts))])
		}
		pattern := p.String()
		for _, sep := range [][]rune{{'/'}, nil} {
			g, gerr := glob.Compile(pattern, sep...)
			re, rerr := compileGlob(pattern, sep...)
			if (gerr == nil) != (rerr == nil) {
				t.Fatalf("%q (sep %q): glob error %v, regexp error %v", pattern, sep, gerr, rerr)
			}
			match, merr := compileMatcher(pattern, sep...)
			if (gerr == nil) != (merr == nil) {
				t.Fatalf("%q (sep %q): glob error %v, matcher error %v", pattern, sep, gerr, merr)
			}
			if gerr != nil {
				continue
			}
			for range 30 {
				var s strings.Builder
				for range rng.IntN(8) {
					s.WriteString(letters[rng.IntN(len(letters))])
				}
				compared++
				want := g.Match(s.String())
				if got := re.MatchString(s.String()); got != want {
					t.Errorf("%q (sep %q) on %q: regexp %v, glob %v (%s)", pattern, sep, s.String(), got, want, re)
				}
				if got := match(s.String()); got != want {
					t.Errorf("%q (sep %q) on %q: matcher %v, glob %v", pattern, sep, s.String(), got, want)
				}
			}
		}
	}
	if compared < 100000 {
		t.Fatalf("only %d comparisons: the generator makes too few valid globs", compared)
	}
}

// TestGlobRegexpLinear: a row's glob the backtracking matcher takes
// tens of milliseconds on, against a target built for it, is matched in
// a pass over the target. The bound is loose (a second for
// what takes microseconds) so that only a matcher that backtracks fails.
func TestGlobRegexpLinear(t *testing.T) {
	match, err := compileMatcher(TargetPattern("**/.git/**/hooks/**"), '/')
	if err != nil {
		t.Fatal(err)
	}
	target := strings.Repeat(".ssh/.git/", 16<<10/10) // hooks/ nowhere
	start := time.Now()
	for range 10 {
		if match(target) {
			t.Fatal("matched a target without hooks/")
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("10 matches of a 16 KiB target took %v", took)
	}
}

// TestGlobMatcherInvalidUTF8: the matcher answers as the expression does
// (and so as the Rego library's regex.match) on a target that is not
// UTF-8, even for a glob whose fixed end is U+FFFD, which the expression
// reads an invalid byte as and a byte comparison would not.
func TestGlobMatcherInvalidUTF8(t *testing.T) {
	for _, c := range [][2]string{
		{"\uFFFD**/*.exe", "\xff/a.exe"},
		{"**/*\uFFFD", "a/b\xff"},
		{"\uFFFD*x*", "\xffx"},
		{"docs/**/*.md", "docs/\xff/a.md"},
	} {
		re, err := compileGlob(c[0], '/')
		if err != nil {
			t.Fatal(err)
		}
		match, err := compileMatcher(c[0], '/')
		if err != nil {
			t.Fatal(err)
		}
		if got, want := match(c[1]), re.MatchString(c[1]); got != want {
			t.Errorf("%q on %q: matcher %v, expression %v", c[0], c[1], got, want)
		}
	}
}
