package policy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// FuzzNativeRow: one rules-table row with a fuzzed tool and target
// glob, and a call with a fuzzed tool name and target argument: the
// library in Rego and in Go decide alike. Row IDs are fixed ("r"), so the
// library's own reason IDs (toolgate.*, which a row may not take) stay
// out.
func FuzzNativeRow(f *testing.F) {
	for _, s := range [][5]string{
		{"read", "docs/**", "read", "docs/a", "path"},
		{"fs.*", "**/.env", "fs.read", ".env", "file"},
		{"*", "https://evil.com*/**", "x", "https://evil.com:8443/a", "url"},
		{"{a,b}**c", "a/**/b/**/c", "ac", "a/x/b/c", "path"},
		{"[!a]*", "[a-c]*/*.txt", "b", "b/x.txt", "target"},
		{"r?ad", "Vertra\u0308ge/**", "read", "Verträge/x", "path"},
		{"*ä**", "**ä**", "xä", "ä", "path"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], uint8(0))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, rowTool, rowTarget, tool, target, arg string, flags uint8) {
		effect := []string{"allow", "deny", "ask"}[flags%3]
		row := map[string]any{"id": "r", "effect": effect, "tool": rowTool, "target": rowTarget, "read_only": flags&4 != 0}
		src, err := yaml.Marshal(map[string]any{"rules": []any{row}})
		if err != nil {
			return
		}
		if _, err := policy.ParseRules(src); err != nil {
			return
		}
		path := filepath.Join(dir, "rules.yaml")
		if err := os.WriteFile(path, src, 0o600); err != nil {
			t.Fatal(err)
		}
		opts := policy.Options{Library: shipped.Library(), RulesFile: path}
		inRego, err := policy.New(t.Context(), opts)
		if err != nil {
			t.Fatalf("Rego engine refused a table ParseRules took: %v", err)
		}
		opts.NativeLibrary = true
		native, err := policy.New(t.Context(), opts)
		if err != nil {
			t.Fatalf("native engine refused what Rego loaded: %v", err)
		}
		fold := policy.FoldNone
		if flags&8 != 0 {
			fold = policy.FoldWindows
		}
		kind := policy.KindREST
		if flags&16 != 0 {
			kind = policy.KindMCP
		}
		phase := ""
		if flags&32 != 0 {
			phase = policy.PhaseList
		}
		mode := ""
		if flags&64 != 0 {
			mode = policy.ModeDontAsk
		}
		args := map[string]any{arg: target}
		if flags&128 != 0 {
			args["path"] = []any{target, "docs/a"}
		}
		in := &policy.Input{Kind: kind, Phase: phase, Mode: mode, Tool: policy.NewToolWith(tool, args, policy.DefaultTargetArgs, fold)}
		want, wantErr := inRego.Decide(t.Context(), in)
		got, gotErr := native.Decide(t.Context(), in)
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || !cmp.Equal(want, got, cmpopts.EquateEmpty()) {
			t.Fatalf("decisions differ\ntable:\n%s\ninput tool %+v\nRego:   %+v %v\nnative: %+v %v", src, in.Tool, want, wantErr, got, gotErr)
		}
	})
}
