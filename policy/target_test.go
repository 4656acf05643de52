package policy_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"testing/fstest"

	"golang.org/x/text/unicode/norm"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

func TestNormalizeTarget(t *testing.T) {
	cases := []struct {
		arg, raw, want string
		escapes        bool
	}{
		{"path", "notes/today.txt", "notes/today.txt", false},
		{"path", "./notes//today.txt", "notes/today.txt", false},
		{"path", `notes\today.txt`, "notes/today.txt", false},
		{"path", "notes/../.env", ".env", false},
		{"path", "../etc/passwd", "../etc/passwd", true},
		{"path", "notes/../../x", "../x", true},
		{"path", "..", "..", true},
		{"path", "/etc/../etc/passwd", "/etc/passwd", false},
		// Rooted: many tools join it to their root, where "/../etc" is
		// "../etc".
		{"path", "/../etc", "/etc", true},
		{"path", "/secrets/key", "/secrets/key", false},
		{"path", "..foo", "..foo", false},
		{"path", "", "", false},
		{"url", "HTTPS://Example.COM/a/../b", "https://example.com/b", false},
		{"uri", "https://example.com", "https://example.com/", false}, // the root, as a browser reads it
		{"url", "https://evil.com?.example.com/x", "https://evil.com/?.example.com/x", false},
		{"url", "https://evil.com#.example.com/x", "https://evil.com/#.example.com/x", false},
		{"url", `https://evil.com\.example.com/x`, `https://evil.com\.example.com/x`, false}, // clients disagree on its host: opaque, as sent
		{"path", "file:///etc/../passwd", "file:///passwd", false},
		// A path argument shaped like a URL is still a path to a tool that
		// joins it to its root; a url argument is a URL.
		{"path", "x://../../../etc/passwd", "x://../etc/passwd", true},
		{"file", `x:\..\..\..\etc`, "../../etc", true},
		{"url", "x://../../../etc/passwd", "x://../etc/passwd", false},
		// A file: URL a tool may turn into a path by string handling: a
		// ".." in its fragment or query climbs out of the path the URL
		// names, and "%25" is another character once decoded again.
		{"uri", "file:///docs/a#/../../etc/passwd", "file:///docs/a#/../../etc/passwd", true},
		{"uri", "FILE:///docs/a?x=/../../s", "file:///docs/a?x=/../../s", true},
		{"url", `file:///docs/a#\..\..\s`, `file:///docs/a#/../../s`, true},
		{"uri", "file:///docs/%252e%252e/secret", "file:///docs/%252e%252e/secret", true},
		{"uri", "file:///docs/a#/%2e%2e/%2E%2E/etc/passwd", "file:///docs/a#/%2e%2e/%2E%2E/etc/passwd", true},
		{"uri", "file:///docs/a#/.%2e/x", "file:///docs/a#/.%2e/x", true},
		{"uri", "file:///docs/a.txt#L10", "file:///docs/a.txt#L10", false},
		{"uri", "https://example.com/a#/../../b", "https://example.com/a#/../../b", false},
		{"command", "rm -rf /", "rm -rf /", false},
	}
	for _, tc := range cases {
		got, esc := policy.NormalizeTarget(tc.arg, tc.raw)
		if got != tc.want || esc != tc.escapes {
			t.Errorf("NormalizeTarget(%q, %q) = %q, %v; want %q, %v", tc.arg, tc.raw, got, esc, tc.want, tc.escapes)
		}
	}
}

func TestNewToolTarget(t *testing.T) {
	cases := []struct {
		name    string
		args    map[string]any
		has     bool
		target  string
		targetR string
	}{
		{"first listed wins", map[string]any{"url": "http://x", "path": "a/b"}, true, "a/b", "a/b"},
		{"non-string skipped", map[string]any{"path": 3, "file": "./f"}, true, "f", "./f"},
		{"no target", map[string]any{"content": "x"}, false, "", ""},
		{"nil args", nil, false, "", ""},
	}
	for _, tc := range cases {
		tool := policy.NewTool("t", tc.args, policy.DefaultTargetArgs)
		if tool.HasTarget != tc.has || tool.Target != tc.target || tool.TargetRaw != tc.targetR {
			t.Errorf("%s: got %v %q %q, want %v %q %q", tc.name, tool.HasTarget, tool.Target, tool.TargetRaw, tc.has, tc.target, tc.targetR)
		}
	}
}

// TestFoldWindows: with target_fold windows the target is case-folded and
// each segment loses its trailing dots and spaces; NewTool is unchanged.
func TestFoldWindows(t *testing.T) {
	cases := []struct {
		arg, raw, want string
		escapes        bool
	}{
		{"path", `NOTES\Today.TXT. `, "notes/today.txt", false},
		{"path", "Notes. /Today.txt", "notes/today.txt", false},
		{"path", "SECRETS.TXT...", "secrets.txt", false},
		{"path", "./A//B. . /c", "a/b/c", false},
		{"path", "ſecret.txt", "secret.txt", false}, // Windows upper-cases ſ to S
		{"path", "notes/../SECRET.txt ", "secret.txt", false},
		{"path", "../X. ", "../x", true},
		{"path", "a/.. /b", "a/b", true}, // ".. " may be the parent on Windows
		{"path", "a/.../b", "a/b", true},
		{"path", "a/ /b", "a/b", true},
		{"path", "..x.", "..x", false},
		{"path", "/", "/", false},
		// Drive-relative, UNC and device paths: where they lead depends on
		// state the policy cannot see.
		{"path", `C:..\outside`, "c:/outside", true},
		{"path", `C:secrets\key`, "c:secrets/key", true},
		{"path", `C:\root\a.txt`, "c:/root/a.txt", false},
		{"path", `C:\..\secrets\key`, "c:/secrets/key", false}, // no ".." climbs above a drive's root
		{"path", "C:", "c:", true},
		{"path", `\??\C:\x`, "/??/c:/x", true},
		{"path", `\\server\share\x`, "/server/share/x", true},
		{"path", `\\?\C:\root\..\..\x`, "/?/x", true},
		{"url", "HTTPS://Example.COM/A. /b", "https://example.com/A.%20/b", false}, // URLs are not folded
		{"command", "DIR C:. ", "DIR C:. ", false},
	}
	for _, tc := range cases {
		got, esc := policy.NormalizeTargetFold(tc.arg, tc.raw, policy.FoldWindows)
		if got != tc.want || esc != tc.escapes {
			t.Errorf("NormalizeTargetFold(%q, %q, windows) = %q, %v; want %q, %v", tc.arg, tc.raw, got, esc, tc.want, tc.escapes)
		}
	}
	args := map[string]any{"PATH": `NOTES\Today.TXT. `}
	if tool := policy.NewToolWith("w", args, policy.DefaultTargetArgs, policy.FoldWindows); tool.Target != "notes/today.txt" || tool.TargetRaw != `NOTES\Today.TXT. ` {
		t.Errorf("NewToolWith windows: target %q raw %q", tool.Target, tool.TargetRaw)
	}
	for _, tool := range []*policy.Tool{
		policy.NewTool("w", args, policy.DefaultTargetArgs),
		policy.NewToolWith("w", args, policy.DefaultTargetArgs, policy.FoldNone),
	} {
		if tool.Target != "NOTES/Today.TXT. " {
			t.Errorf("without folding: target %q, want NOTES/Today.TXT. ", tool.Target)
		}
	}
	for s, want := range map[string]policy.Fold{"": policy.FoldNone, "none": policy.FoldNone, "windows": policy.FoldWindows} {
		if got, err := policy.ParseFold(s); got != want || err != nil {
			t.Errorf("ParseFold(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := policy.ParseFold("Windows"); err == nil {
		t.Error("ParseFold accepted Windows")
	}
}

// TestTargetsBounded: a target argument holding a huge array makes at most
// MaxTargetEntries targets and one opaque target for the rest.
func TestTargetsBounded(t *testing.T) {
	paths := make([]any, 10*policy.MaxTargetEntries)
	for i := range paths {
		paths[i] = "docs/" + strconv.Itoa(i)
	}
	tool := policy.NewTool("read_file", map[string]any{"path": paths, "file": "docs/x"}, policy.DefaultTargetArgs)
	if n := len(tool.Targets); n != policy.MaxTargetEntries+1 {
		t.Fatalf("%d targets, want %d", n, policy.MaxTargetEntries+1)
	}
	if last := tool.Targets[policy.MaxTargetEntries]; !last.Opaque || last.Arg != "path" || last.Escapes {
		t.Fatalf("last target %+v, want an opaque one for path", last)
	}
	// An escaping path among the rest makes the stand-in escape.
	escaping := append(append([]any(nil), paths...), "../etc/passwd")
	tool = policy.NewTool("read_file", map[string]any{"path": escaping}, policy.DefaultTargetArgs)
	if last := tool.Targets[policy.MaxTargetEntries]; !last.Escapes || last.Raw != "../etc/passwd" {
		t.Fatalf("last target %+v, want it to escape with ../etc/passwd", last)
	}
	small := policy.NewTool("read_file", map[string]any{"path": paths[:2], "file": "docs/x"}, policy.DefaultTargetArgs)
	if n := len(small.Targets); n != 3 || small.Targets[2].Target != "docs/x" || small.Targets[2].Opaque {
		t.Fatalf("targets %+v, want docs/0, docs/1 and docs/x", small.Targets)
	}
}

// TestURLWrittenSpelling: a URL whose query follows its host gets a "/"
// there, and keeps the spelling without it for deny and ask rows.
func TestURLWrittenSpelling(t *testing.T) {
	tool := policy.NewTool("fetch", map[string]any{"url": "HTTPS://X.com?q=1"}, policy.DefaultTargetArgs)
	if a := tool.Targets[0]; a.Target != "https://x.com/?q=1" || a.Relative != "https://x.com?q=1" {
		t.Fatalf("target %+v, want https://x.com/?q=1 also spelt https://x.com?q=1", a)
	}
}

// TestTargetArgNamesInAnyCase: target_args names are looked up in any
// case, so "URL" or "Command" in them reads the url or command argument,
// and as a URL or a command, not as a file path: a url written without
// "//" (https:evil.com/x) stayed a path, which a row on https://evil.com/**
// did not see, and a command was cleaned as a path.
func TestTargetArgNamesInAnyCase(t *testing.T) {
	for _, tc := range []struct {
		targetArgs []string
		args       map[string]any
		want       string
	}{
		{[]string{"URI"}, map[string]any{"uri": "file:/srv/secrets/key"}, "file:///srv/secrets/key"},
		{[]string{"Url"}, map[string]any{"url": "HTTPS://Example.com/a/../b"}, "https://example.com/b"},
		// A WHATWG parser (a fetch tool) reads https:evil.com/x as https://evil.com/x.
		{[]string{"URL"}, map[string]any{"url": "https:evil.com/x"}, "https://evil.com/x"},
		{[]string{"COMMAND"}, map[string]any{"command": "cat ./a/../b"}, "cat ./a/../b"},
	} {
		if tool := policy.NewTool("t", tc.args, tc.targetArgs); tool.Target != tc.want {
			t.Errorf("target_args %v, args %v: target %q, want %q", tc.targetArgs, tc.args, tool.Target, tc.want)
		}
	}
}

// TestDecomposedSpellingComposed: a target spelt decomposed (NFD, as macOS
// hands out names) is the same text as its composed spelling, which rows
// are written in: tool.target is composed (tool.target_raw as sent), so a
// deny row sees it and an allow row covers it, with OPA evaluating the
// table as with the native library; a row written decomposed is composed
// when the table is read.
func TestDecomposedSpellingComposed(t *testing.T) {
	const nfc = "Verträge/2026/acme.pdf"
	nfd := norm.NFD.String(nfc)
	if nfd == nfc {
		t.Fatal("no decomposed spelling")
	}
	for _, fold := range []policy.Fold{policy.FoldNone, policy.FoldWindows} {
		tool := policy.NewToolWith("read_file", map[string]any{"path": nfd}, policy.DefaultTargetArgs, fold)
		want := policy.NewToolWith("read_file", map[string]any{"path": nfc}, policy.DefaultTargetArgs, fold).Target
		if tool.Target != want || tool.TargetRaw != nfd {
			t.Errorf("fold %v: target %q (raw %q), want %q (raw as sent)", fold, tool.Target, tool.TargetRaw, want)
		}
	}
	u := policy.NewToolWith("fetch", map[string]any{"url": "https://example.com/" + nfd}, policy.DefaultTargetArgs, policy.FoldNone)
	if want := policy.NewToolWith("fetch", map[string]any{"url": "https://example.com/" + nfc}, policy.DefaultTargetArgs, policy.FoldNone); u.Target != want.Target {
		t.Errorf("URL target %q, want %q", u.Target, want.Target)
	}
	rules := writeRules(t, t.TempDir(), []string{
		`{id: no-contracts, effect: deny, tool: read_file, target: "Verträge/**"}`,
		`{id: no-secret, effect: deny, tool: read_file, target: "` + norm.NFD.String("비밀") + `/**"}`,
		`{id: notes, effect: allow, tool: read_file, target: "Notizen/**"}`,
		`{id: everyone, effect: allow, tool: "*", target: "*"}`,
	})
	for _, native := range []bool{true, false} {
		e := newEngine(t, policy.Options{Library: shipped.Library(), NativeLibrary: native, RulesFile: rules})
		for _, tc := range []struct {
			target string
			want   policy.Action
			rule   string
		}{
			{nfd, policy.Deny, "no-contracts"},
			{nfc, policy.Deny, "no-contracts"},
			{"비밀/key.txt", policy.Deny, "no-secret"}, // the row, written decomposed, is composed
			{norm.NFD.String("비밀/key.txt"), policy.Deny, "no-secret"},
			{norm.NFD.String("Notizen/Übersicht.md"), policy.Allow, "notes"}, // the allow row covers it
		} {
			d, err := e.Decide(context.Background(), call("read_file", tc.target))
			if err != nil || d.Action != tc.want || !slices.Contains(d.RuleIDs(), tc.rule) {
				t.Errorf("native %v, %q: %s %v %v, want %s by %s", native, tc.target, d.Action, d.RuleIDs(), err, tc.want, tc.rule)
			}
		}
	}
}

// TestDataTableRowsComposed: a rules table served from a data file
// (data.toolgate.rules) has its rows' targets composed as a rules file's
// are: a deny row written decomposed matches both spellings.
func TestDataTableRowsComposed(t *testing.T) {
	data := `{"rules": [{"id": "no-contracts", "effect": "deny", "tool": "read_file", "target": "` + norm.NFD.String("Verträge/**") + `"},
	  {"id": "everyone", "effect": "allow", "tool": "*", "target": "*"}]}`
	e := newEngine(t, policy.Options{Library: shipped.Library(), Policies: fstest.MapFS{"toolgate/data.json": {Data: []byte(data)}}})
	for _, target := range []string{norm.NFD.String("Verträge/x.pdf"), "Verträge/x.pdf"} {
		if got := decide(t, e, call("read_file", target)); got.Action != "deny" {
			t.Errorf("%+q: %v, want deny by the row written decomposed", target, got)
		}
	}
}

// TestGrantNotForDecomposedSpelling: a grant for one target does not stand
// in for a call whose value is that target decomposed (another file on
// Linux), while it does for the composed spelling.
func TestGrantNotForDecomposedSpelling(t *testing.T) {
	const nfc = "Verträge/a.pdf"
	for raw, sole := range map[string]bool{nfc: true, norm.NFD.String(nfc): false} {
		tool := policy.NewToolWith("read_file", map[string]any{"path": raw}, policy.DefaultTargetArgs, policy.FoldNone)
		if got := tool.SoleTarget(nfc); got != sole {
			t.Errorf("%+q: SoleTarget(%q) = %v, want %v", raw, nfc, got, sole)
		}
	}
}

// TestDataTableObjectRowsComposed: a data file's rules table written as an
// object, which the library reads as it reads an array, is composed too.
func TestDataTableObjectRowsComposed(t *testing.T) {
	row := `{"id": "no-contracts", "effect": "deny", "tool": "read_file", "target": "` + norm.NFD.String("Verträge/**") + `"}`
	all := `{"id": "everyone", "effect": "allow", "tool": "*", "target": "*"}`
	data := `{"rules": {"a": ` + row + `, "b": ` + all + `}}`
	e := newEngine(t, policy.Options{Library: shipped.Library(), Policies: fstest.MapFS{"toolgate/data.json": {Data: []byte(data)}}})
	if got := decide(t, e, call("read_file", "docs/x")); got.Action != "allow" {
		t.Fatalf("object table not read by the library at all: %v", got)
	}
	for _, target := range []string{norm.NFD.String("Verträge/x.pdf"), "Verträge/x.pdf"} {
		if got := decide(t, e, call("read_file", target)); got.Action != "deny" {
			t.Errorf("%+q: %v, want deny by the row written decomposed", target, got)
		}
	}
}

// TestGrantNotForOtherSpellings: a grant for one target stands in only for
// a call that names it, spelled one way: not for a call without a target
// (or with an empty one), whatever its arguments, nor for a spelling that
// normalises to the target but that a tool may read as another resource.
func TestGrantNotForOtherSpellings(t *testing.T) {
	for _, tc := range []struct {
		args   map[string]any
		target string
		sole   bool
	}{
		{map[string]any{"path": "notes/today.txt"}, "notes/today.txt", true},
		{map[string]any{"query": "DROP TABLE users"}, "", false},
		{map[string]any{"path": ""}, "", false},
		{map[string]any{"path": `notes\today.txt`}, "notes/today.txt", false},
		{map[string]any{"path": "notes/x/../today.txt"}, "notes/today.txt", false},
		{map[string]any{"url": "https://api.example.com/users/alice/profile"}, "https://api.example.com/users/alice/profile", true},
		{map[string]any{"url": "https://api.example.com/users%2Falice%2Fprofile"}, "https://api.example.com/users/alice/profile", false},
		{map[string]any{"url": "https://api.example.com/users/alice%5Cprofile"}, "https://api.example.com/users/alice/profile", false},
		{map[string]any{"url": "https://api.example.com/users/mallory/%2e%2e/alice/profile"}, "https://api.example.com/users/alice/profile", false},
		{map[string]any{"url": "https://api.example.com/users/mallory/.%2E/alice/profile"}, "https://api.example.com/users/alice/profile", false},
		{map[string]any{"url": "https://api.example.com/users//alice/profile"}, "https://api.example.com/users/alice/profile", false},
		// One slash after the scheme, or none, is read as two (WHATWG).
		{map[string]any{"url": "https:/api.example.com/users/mallory/%2e%2e/alice/profile"}, "https://api.example.com/users/alice/profile", false},
		{map[string]any{"url": "https:/api.example.com/users//alice/profile"}, "https://api.example.com/users/alice/profile", false},
		{map[string]any{"url": "https:api.example.com/users/mallory/%2e%2e/alice/profile"}, "https://api.example.com/users/alice/profile", false},
		{map[string]any{"url": "file:/srv/docs/link/%2e%2e/secrets/key"}, "file:///srv/docs/secrets/key", false},
		{map[string]any{"path": "file:/srv/docs/link/%2e%2e/secrets/key"}, "file:///srv/docs/secrets/key", false},
		// Another host spelling, other credentials.
		{map[string]any{"url": "https://api.example.com./users/alice/profile"}, "https://api.example.com/users/alice/profile", false},
		{map[string]any{"url": "https://admin:hunter2@api.example.com/users/alice/profile"}, "https://api.example.com/users/alice/profile", false},
		{map[string]any{"url": "https://[::1]:8443/x"}, "https://[::1]:8443/x", true},
		// An escaped slash in a query, a command's backslash: one spelling.
		{map[string]any{"url": "https://app.example.com/login?next=%2Fdashboard"}, "https://app.example.com/login?next=%2Fdashboard", true},
		{map[string]any{"command": `printf 'a\n'`}, `printf 'a\n'`, true},
	} {
		tool := policy.NewToolWith("t", tc.args, policy.DefaultTargetArgs, policy.FoldNone)
		if got := tool.SoleTarget(tc.target); got != tc.sole {
			t.Errorf("%v: target %q, SoleTarget(%q) = %v, want %v", tc.args, tool.Target, tc.target, got, tc.sole)
		}
	}
}

// TestSchemeRelativeURLOpaque: a url argument that is a network-path
// reference ("//169.254.169.254/…", "\\host\…") reaches that host once a
// tool resolves it against its base, as urljoin, new URL(u, base) and
// ResolveReference do. It was read as the path "/169.254.169.254/…", past
// a deny row written for the host's URLs, and an allow row then let it
// through. It is now opaque: deny and ask rows match it, allow rows do not.
func TestSchemeRelativeURLOpaque(t *testing.T) {
	data := `{"rules": [{"id": "metadata", "effect": "deny", "tool": "fetch", "target": "http*://169.254.169.254*/**"},
	  {"id": "fetch-ok", "effect": "allow", "tool": "fetch", "target": "*"}]}`
	e := newEngine(t, policy.Options{Library: shipped.Library(), Policies: fstest.MapFS{"toolgate/data.json": {Data: []byte(data)}}})
	for _, u := range []string{"//169.254.169.254/latest/meta-data/", `\\169.254.169.254\latest`, `/\169.254.169.254/latest`, "http://169.254.169.254/latest"} {
		in := call("fetch", "")
		in.Tool = policy.NewTool("fetch", map[string]any{"url": u}, policy.DefaultTargetArgs)
		if got := decide(t, e, in); got.Action != "deny" {
			t.Errorf("fetch %q (target %q): %v, want deny", u, in.Tool.Target, got)
		}
	}
	in := call("fetch", "")
	in.Tool = policy.NewTool("fetch", map[string]any{"url": "/docs/a.md"}, policy.DefaultTargetArgs)
	if got := decide(t, e, in); got.Action != "allow" {
		t.Errorf("fetch of a relative path: %v, want allow", got)
	}
}
