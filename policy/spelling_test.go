package policy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/policy"
)

// TestCheckTargetSpelling: a file-path target that a tool may read as
// other path syntax, after percent-decoding it or (target_fold: windows)
// converting it to an ANSI code page, is refused, naming what it holds;
// names without such spellings, URLs and commands pass.
func TestCheckTargetSpelling(t *testing.T) {
	none, win := policy.FoldNone, policy.FoldWindows
	cases := []struct {
		name string
		fold policy.Fold
		args map[string]any
		want string // "": accepted
	}{
		// Percent-escapes of path syntax, whatever the fold.
		{"encoded dot segments", none, map[string]any{"path": "notes/%2e%2e/secrets/key"}, `target "notes/%2e%2e/secrets/key" holds "%2e", a percent-encoded ".", which a tool that decodes the path reads as path syntax`},
		{"upper-case escape", none, map[string]any{"file_path": "notes/%2E%2E/x"}, `holds "%2E", a percent-encoded "."`},
		{"encoded slash", none, map[string]any{"path": "notes%2f..%2fsecrets"}, `holds "%2f", a percent-encoded "/"`},
		{"encoded backslash", none, map[string]any{"file": `notes%5C..%5Csecrets`}, `holds "%5C", a percent-encoded "\\"`},
		{"encoded dot inside a name", none, map[string]any{"path": "%2eenv"}, `holds "%2e"`},
		{"double-encoded", none, map[string]any{"path": "notes/%252e%252e/x"}, `holds "%252e", a percent-encoded "."`},
		{"triple-encoded, mixed case", none, map[string]any{"path": "a/%25252F"}, `holds "%25252F", a percent-encoded "/"`},
		{"hex digits encoded themselves", none, map[string]any{"path": "a/%25%32%65%25%32%65/x"}, `holds "%25%32%65", a percent-encoded "."`},
		{"encoded too many times", none, map[string]any{"path": "a%" + strings.Repeat("25", 9) + "41"}, "is percent-encoded more than 8 times"},
		{"in an array", none, map[string]any{"file": []any{"docs/a.md", "docs/%2e%2e/%2e%2e/x"}}, `target "docs/%2e%2e/%2e%2e/x"`},
		{"in an opaque target's key", none, map[string]any{"path": map[string]any{"%2e%2e/x": "y"}}, `argument key "%2e%2e/x" holds "%2e"`},
		{"target named in another case", none, map[string]any{"PATH": "%2e%2e/x"}, `holds "%2e"`},
		{"a url argument without a scheme is a path", none, map[string]any{"url": "docs/%2e%2e/x"}, `holds "%2e"`},
		{"%u escape of a dot", none, map[string]any{"path": "notes/%u002e%u002E/secrets/key"}, `holds "%u002e", a percent-encoded "."`},
		{"%u escape of a backslash", none, map[string]any{"file": []any{"a%U005Cb"}}, `a percent-encoded "\\"`},
		// A tool may join a path argument's value to its root, URL or not
		// ("a://b/%2e%2e/%2e%2e/secrets/key" is secrets/key to it).
		{"a path argument with a scheme is a path too", none, map[string]any{"path": "https://x.com/%2e%2e/a"}, `holds "%2e"`},
		{"a url argument is a URL", none, map[string]any{"url": "https://x.com/%2e%2e/a"}, ""},
		{"URL", none, map[string]any{"url": "https://x.com/a%2Fb/%2e%2e"}, ""},
		{"command", none, map[string]any{"command": "cat notes/%2e%2e/secrets"}, ""},
		{"other escapes pass", none, map[string]any{"path": "docs/My%20Report%281%29.pdf"}, ""},
		{"stray percent", none, map[string]any{"path": "docs/100%.txt", "file": "50%off/%zz"}, ""},
		{"not a target argument", none, map[string]any{"content": "%2e%2e/x", "path": "docs/a.md"}, ""},
		{"empty", none, map[string]any{"path": ""}, ""},
		// Without target_fold, best-fit look-alikes are ordinary characters.
		{"look-alikes without fold", none, map[string]any{"path": "notes\uff0e\uff0e\uff3csecrets\uff3ckey", "file": "価格¥100/a∕b：c\u3000"}, ""},
		{"fullwidth percent without fold", none, map[string]any{"path": "notes/\uff052e\uff052e/x"}, ""},
		// target_fold: windows: characters best-fit makes path syntax.
		{"fullwidth dots and reverse solidus", win, map[string]any{"path": "notes\uff0e\uff0e\uff3csecrets\uff3ckey"}, `target "notes\uff0e\uff0e\uff3csecrets\uff3ckey" holds U+FF0E, which a Windows tool may read as "." (target_fold: windows)`},
		{"fullwidth solidus", win, map[string]any{"path": "a\uff0fb"}, `holds U+FF0F, which a Windows tool may read as "/"`},
		{"division slash", win, map[string]any{"path": "a\u2215b"}, "U+2215"},
		{"fraction slash", win, map[string]any{"path": "a\u2044b"}, "U+2044"},
		{"set minus", win, map[string]any{"path": "a\u2216b"}, `holds U+2216, which a Windows tool may read as "\\"`},
		{"small reverse solidus", win, map[string]any{"path": "a\ufe68b"}, "U+FE68"},
		{"yen sign", win, map[string]any{"file": "..¥secrets"}, `target "..\u00a5secrets" holds U+00A5, which a Windows tool may read as "\\"`},
		{"won sign", win, map[string]any{"path": "a₩b"}, "U+20A9"},
		{"fullwidth colon", win, map[string]any{"path": "c\uff1asecrets"}, `holds U+FF1A, which a Windows tool may read as ":"`},
		{"ratio", win, map[string]any{"path": "notes\u2236stream"}, "U+2236"},
		{"one dot leader", win, map[string]any{"path": "\u2024env"}, "U+2024"},
		{"small full stop", win, map[string]any{"path": "a/\ufe52\ufe52/b"}, "U+FE52"},
		{"ideographic space ends a segment", win, map[string]any{"path": "secrets\u3000/key"}, `target "secrets\u3000/key" ends a path segment with U+3000, which a Windows tool may read as a space and drop`},
		{"en quad before trailing dots", win, map[string]any{"path": "secrets\u2000. "}, "U+2000"},
		{"no-break space at the end", win, map[string]any{"path": "secrets.txt\u00a0"}, "U+00A0"},
		{"fullwidth percent-escape", win, map[string]any{"path": "notes/\uff052e\uff052e/x"}, `holds "\uff052e", a percent-encoded "."`},
		{"fullwidth hex digits", win, map[string]any{"path": "notes/%\uff12\uff45/x"}, `holds "%２ｅ", a percent-encoded "."`},
		{"look-alike percent-encoded", win, map[string]any{"path": "notes%EF%BC%8E%EF%BC%8E/x"}, "holds U+FF0E once percent-decoded"},
		{"look-alike in an opaque target", win, map[string]any{"path": []any{[]any{"a\uff3cb"}}}, "U+FF3C"},
		// target_fold: windows keeps ordinary names.
		{"Japanese name", win, map[string]any{"path": "資料/第１回　議事録.docx", "file": "ＰＤＦ/報告（２０２４）.pdf"}, ""},
		{"ideographic space inside a name", win, map[string]any{"path": "a\u3000b/c"}, ""},
		{"accented and fullwidth letters", win, map[string]any{"path": "café/ｓｅｃｒｅｔ.txt"}, ""},
		{"fullwidth percent sign in a name", win, map[string]any{"path": "50\uff05OFF.pdf"}, ""},
		{"look-alike in a URL", win, map[string]any{"url": "https://x.com/a\uff0fb"}, ""},
		{"look-alike in a command", win, map[string]any{"command": "type a\uff3cb"}, ""},
	}
	for _, tc := range cases {
		err := policy.CheckTargetSpelling(tc.args, policy.DefaultTargetArgs, tc.fold)
		var se *policy.SpellingError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &se)):
			t.Errorf("%s: err = %v, want a *SpellingError containing %q", tc.name, err, tc.want)
		}
	}
	// Of several, the first in byte order, whatever the map order.
	args := map[string]any{"path": "b/%2e%2e", "file": "a/%2e%2e", "target": "c/%2e%2e"}
	for range 20 {
		if err := policy.CheckTargetSpelling(args, policy.DefaultTargetArgs, none); err == nil || !strings.Contains(err.Error(), `"a/%2e%2e"`) {
			t.Fatalf("err = %v, want the target a/%%2e%%2e", err)
		}
	}
}

// TestMisreadTargetsEscape: a target CheckTargetSpelling refuses escapes
// all the same, so that a call built without that check (parked before
// it) is denied by the shipped library.
func TestMisreadTargetsEscape(t *testing.T) {
	cases := []struct {
		raw  string
		fold policy.Fold
	}{
		{"notes/%2e%2e/secrets/key", policy.FoldNone},
		{"report%2Epdf", policy.FoldNone},
		{"notes/%252e%252e/x", policy.FoldWindows},
		{"notes\uff0e\uff0e\uff3csecrets\uff3ckey", policy.FoldWindows},
		{"secrets\u3000/key", policy.FoldWindows},
	}
	for _, tc := range cases {
		if _, esc := policy.NormalizeTargetFold("path", tc.raw, tc.fold); !esc {
			t.Errorf("NormalizeTargetFold(%q, %v) does not escape", tc.raw, tc.fold)
		}
	}
	for _, raw := range []string{"notes\uff0e\uff0e\uff3csecrets", "docs/a%20b.md", "価格¥100"} {
		if _, esc := policy.NormalizeTargetFold("path", raw, policy.FoldNone); esc {
			t.Errorf("NormalizeTargetFold(%q, none) escapes", raw)
		}
	}
	tool := policy.NewTool("read", map[string]any{"path": map[string]any{"k": "%2e%2e/x"}}, policy.DefaultTargetArgs)
	if a := tool.Targets[0]; !a.Opaque || !a.Escapes || a.Raw != "%2e%2e/x" {
		t.Errorf("opaque target %+v, want it to escape with %%2e%%2e/x", a)
	}
}

// TestDecodedTarget: a file path holding percent-escapes is also its
// decoded spelling, the path a tool that decodes its argument opens.
func TestDecodedTarget(t *testing.T) {
	cases := []struct {
		name string
		fold policy.Fold
		args map[string]any
		want []policy.TargetArg
	}{
		{"encoded letters", policy.FoldNone, map[string]any{"path": "%73ecrets/key"}, []policy.TargetArg{
			{Arg: "path", Target: "%73ecrets/key", Raw: "%73ecrets/key"},
			{Arg: "path", Target: "secrets/key", Raw: "%73ecrets/key"},
		}},
		{"encoded dot segments", policy.FoldNone, map[string]any{"path": "notes/%2e%2e/secrets/key"}, []policy.TargetArg{
			{Arg: "path", Target: "notes/%2e%2e/secrets/key", Raw: "notes/%2e%2e/secrets/key", Escapes: true},
			{Arg: "path", Target: "secrets/key", Raw: "notes/%2e%2e/secrets/key"},
		}},
		{"climbs once decoded", policy.FoldNone, map[string]any{"file": []any{"%252e%252e/%252e%252e/etc"}}, []policy.TargetArg{
			{Arg: "file", Target: "%252e%252e/%252e%252e/etc", Raw: "%252e%252e/%252e%252e/etc", Escapes: true},
			{Arg: "file", Target: "../../etc", Raw: "%252e%252e/%252e%252e/etc", Escapes: true},
		}},
		{"rooted", policy.FoldNone, map[string]any{"path": "/%73ecrets"}, []policy.TargetArg{
			{Arg: "path", Target: "/%73ecrets", Relative: "%73ecrets", Raw: "/%73ecrets"},
			{Arg: "path", Target: "/secrets", Relative: "secrets", Raw: "/%73ecrets"},
		}},
		{"a space", policy.FoldNone, map[string]any{"path": "docs/My%20Report.pdf"}, []policy.TargetArg{
			{Arg: "path", Target: "docs/My%20Report.pdf", Raw: "docs/My%20Report.pdf"},
			{Arg: "path", Target: "docs/My Report.pdf", Raw: "docs/My%20Report.pdf"},
		}},
		{"a trailing space on Windows", policy.FoldWindows, map[string]any{"path": "Secrets%20/key"}, []policy.TargetArg{
			{Arg: "path", Target: "secrets%20/key", Raw: "Secrets%20/key"},
			{Arg: "path", Target: "secrets/key", Raw: "Secrets%20/key"},
		}},
		{"fullwidth letters and percent on Windows", policy.FoldWindows, map[string]any{"path": "\uff05\uff17\uff13ecrets"}, []policy.TargetArg{
			{Arg: "path", Target: "\uff05\uff17\uff13ecrets", Raw: "\uff05\uff17\uff13ecrets"},
			{Arg: "path", Target: "secrets", Raw: "\uff05\uff17\uff13ecrets"},
			// the best-fit spelling: what an ANSI tool that does not decode opens
			{Arg: "path", Target: "%73ecrets", Raw: "\uff05\uff17\uff13ecrets"},
		}},
		{"fullwidth letters on Windows", policy.FoldWindows, map[string]any{"path": "\uff53\uff45\uff43\uff52\uff45\uff54\uff53/Key"}, []policy.TargetArg{
			{Arg: "path", Target: "\uff53\uff45\uff43\uff52\uff45\uff54\uff53/key", Raw: "\uff53\uff45\uff43\uff52\uff45\uff54\uff53/Key"},
			{Arg: "path", Target: "secrets/key", Raw: "\uff53\uff45\uff43\uff52\uff45\uff54\uff53/Key"},
		}},
		{"fullwidth letters without folding", policy.FoldNone, map[string]any{"path": "\uff53ecrets/key"}, []policy.TargetArg{
			{Arg: "path", Target: "\uff53ecrets/key", Raw: "\uff53ecrets/key"},
		}},
		{"a control character once decoded", policy.FoldNone, map[string]any{"path": "x.env%00.txt"}, []policy.TargetArg{
			{Arg: "path", Target: "x.env%00.txt", Raw: "x.env%00.txt"},
			{Arg: "path", Raw: "x.env%00.txt", Opaque: true},
		}},
		{"invalid UTF-8 once decoded", policy.FoldNone, map[string]any{"path": "caf%E9.txt"}, []policy.TargetArg{
			{Arg: "path", Target: "caf%E9.txt", Raw: "caf%E9.txt"},
			{Arg: "path", Raw: "caf%E9.txt", Opaque: true},
		}},
		{"encoded too many times", policy.FoldNone, map[string]any{"path": "a%" + strings.Repeat("25", 9) + "41"}, []policy.TargetArg{
			{Arg: "path", Target: "a%" + strings.Repeat("25", 9) + "41", Raw: "a%" + strings.Repeat("25", 9) + "41", Escapes: true},
			{Arg: "path", Raw: "a%" + strings.Repeat("25", 9) + "41", Escapes: true, Opaque: true},
		}},
		{"nothing to decode", policy.FoldNone, map[string]any{"path": "docs/100%.txt", "url": "https://x.com/%73", "command": "echo %73"}, []policy.TargetArg{
			{Arg: "path", Target: "docs/100%.txt", Raw: "docs/100%.txt"},
			{Arg: "url", Target: "https://x.com/s", Raw: "https://x.com/%73"},
			{Arg: "command", Target: "echo %73", Raw: "echo %73"},
		}},
		{"fullwidth percent without fold", policy.FoldNone, map[string]any{"path": "\uff0573"}, []policy.TargetArg{
			{Arg: "path", Target: "\uff0573", Raw: "\uff0573"},
		}},
	}
	for _, tc := range cases {
		tool := policy.NewToolWith("read", tc.args, policy.DefaultTargetArgs, tc.fold)
		if diff := cmp.Diff(tc.want, tool.Targets); diff != "" {
			t.Errorf("%s: targets (-want +got):\n%s", tc.name, diff)
		}
	}
	// tool.target stays the target as sent, normalised.
	tool := policy.NewTool("read", map[string]any{"path": "%73ecrets"}, policy.DefaultTargetArgs)
	if tool.Target != "%73ecrets" || tool.TargetEscapes || tool.SoleTarget("%73ecrets") {
		t.Errorf("target %q escapes %v, sole %v; want %%73ecrets, not escaping, not the sole target", tool.Target, tool.TargetEscapes, tool.SoleTarget("%73ecrets"))
	}
}

// TestTrimmedTarget: a value with white space at either end is also its
// trimmed spelling, what a tool that trims its arguments reads, with that
// spelling's own entries; a command is not.
func TestTrimmedTarget(t *testing.T) {
	cases := []struct {
		name string
		args map[string]any
		want []policy.TargetArg
	}{
		{"a leading space", map[string]any{"path": " secrets/key"}, []policy.TargetArg{
			{Arg: "path", Target: " secrets/key", Raw: " secrets/key"},
			{Arg: "path", Target: "secrets/key", Raw: " secrets/key"},
		}},
		{"Unicode spaces, rooted", map[string]any{"path": []any{"\u00a0/secrets/key\u3000\ufeff"}}, []policy.TargetArg{
			{Arg: "path", Target: "\u00a0/secrets/key\u3000\ufeff", Raw: "\u00a0/secrets/key\u3000\ufeff"},
			{Arg: "path", Target: "/secrets/key", Relative: "secrets/key", Raw: "\u00a0/secrets/key\u3000\ufeff"},
		}},
		{"trimmed, then decoded", map[string]any{"path": "%73ecrets/key "}, []policy.TargetArg{
			{Arg: "path", Target: "%73ecrets/key ", Raw: "%73ecrets/key "},
			{Arg: "path", Target: "secrets/key ", Raw: "%73ecrets/key "},
			{Arg: "path", Target: "secrets/key", Raw: "%73ecrets/key "}, // decoded, then trimmed
			{Arg: "path", Target: "%73ecrets/key", Raw: "%73ecrets/key "},
			{Arg: "path", Target: "secrets/key", Raw: "%73ecrets/key "},
		}},
		{"only spaces, a URL, a command", map[string]any{"path": "  ", "url": " https://x.com/a", "command": " rm -rf / "}, []policy.TargetArg{
			{Arg: "path", Target: "  ", Raw: "  "},
			{Arg: "url", Target: "https://x.com/a", Raw: " https://x.com/a"},
			{Arg: "command", Target: " rm -rf / ", Raw: " rm -rf / "},
		}},
	}
	for _, tc := range cases {
		tool := policy.NewToolWith("read", tc.args, policy.DefaultTargetArgs, policy.FoldNone)
		if diff := cmp.Diff(tc.want, tool.Targets); diff != "" {
			t.Errorf("%s: targets (-want +got):\n%s", tc.name, diff)
		}
	}
	if tool := policy.NewTool("read", map[string]any{"path": " secrets/key"}, policy.DefaultTargetArgs); tool.Target != " secrets/key" {
		t.Errorf("target %q, want the value as sent", tool.Target)
	}
}

// TestTrimmedTargetDecides: deny rows fire on the trimmed spelling.
func TestTrimmedTargetDecides(t *testing.T) {
	e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), []string{
		`{id: docs, effect: allow, tool: read, target: "docs/**"}`,
		`{id: secrets, effect: deny, tool: read, target: "secrets/**"}`,
	})})
	for _, tc := range []struct {
		path string
		want outcome
	}{
		{" secrets/key", outcome{"deny", []string{"secrets"}}},
		{"secrets/key\t\u2003", outcome{"deny", []string{"secrets"}}},
		{"\ufeff%73ecrets/key", outcome{"deny", []string{"secrets"}}},
		// Decoded, then trimmed.
		{"%20secrets/key", outcome{"deny", []string{"secrets"}}},
		{"%C2%A0secrets/key", outcome{"deny", []string{"secrets"}}},
		{"secrets/key%E3%80%80", outcome{"deny", []string{"secrets"}}},
		{"docs/a ", outcome{"allow", []string{"docs"}}},
	} {
		if diff := cmp.Diff(tc.want, decide(t, e, call("read", tc.path))); diff != "" {
			t.Errorf("%q: decision (-want +got):\n%s", tc.path, diff)
		}
	}
}

// TestTrimmedURLPathDecides: a URL-shaped path with white space at one
// end is also its trimmed path reading (a tool that trims, then joins the
// URL's path to its root), and so is one decoded, then trimmed: a deny
// row naming that path exactly fires.
func TestTrimmedURLPathDecides(t *testing.T) {
	e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), []string{
		`{id: any, effect: allow, tool: read, target: "**"}`,
		`{id: key, effect: deny, tool: read, target: "secrets/key"}`,
	})})
	for _, p := range []string{"a://b/../../secrets/key ", "file:///../secrets/key\u00a0", "file:///../secrets/key ", "a://b/../../secrets/key%20", "file:///../secrets/key%E3%80%80"} {
		got := decide(t, e, call("read", p))
		if got.Action != "deny" || !slices.Contains(got.RuleIDs, "key") {
			t.Errorf("%q: %+v, want denied by key", p, got)
		}
	}
}

// TestDecodedTargetDecides: rules-table rows see the decoded spelling:
// deny and ask rows fire on it, allow rows must cover it too.
func TestDecodedTargetDecides(t *testing.T) {
	e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), []string{
		`{id: docs, effect: allow, tool: read, target: "docs/**"}`,
		`{id: secrets, effect: deny, tool: read, target: "secrets/**"}`,
		`{id: env, effect: deny, tool: read, target: "**/.env"}`,
	})})
	cases := []struct {
		path string
		want outcome
	}{
		{"docs/My%20Report.pdf", outcome{"allow", []string{"docs"}}},
		{"%73ecrets/key", outcome{"deny", []string{"secrets"}}},
		{"docs/%2e%2e/secrets/key", outcome{"deny", []string{"secrets", "toolgate.target_escapes"}}},
		{"docs/%2e%2e/notes/a", outcome{"deny", []string{"toolgate.target_escapes"}}},
		{"docs/%2eenv", outcome{"deny", []string{"env", "toolgate.target_escapes"}}},
		// Opaque once decoded: deny rows fire on it, no allow row covers it.
		{"docs/caf%E9.txt", outcome{"deny", []string{"env", "secrets"}}},
	}
	for _, tc := range cases {
		in := call("read", tc.path)
		got := decide(t, e, in)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: decision (-want +got):\n%s", tc.path, diff)
		}
	}
}
