package policy_test

import (
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

func TestSameArgName(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"file_path", "file_path", true},
		{"file_path", "filePath", true},
		{"file_path", "file-path", true},
		{"file_path", "f_i_l_e_p_a_t_h", true},
		{"file_path", "FILEPATH", true},
		{"path", "\u212aath", false}, // the Kelvin sign folds to k, not p
		{"kind", "\u212aind", true},
		{"dry_run", "dryRun", true},
		{"file_path", "file", false},
		{"file_path", "file_paths", false},
		{"filename", "file_name", true},
		{"$ref", "ref", true},
		{"_", "-", false}, // no letter or digit: only itself
		{"_", "_", true},
		{"", "", true},
		{"é_x", "ÉX", true},
	} {
		if got := policy.SameArgName(tc.a, tc.b); got != tc.want {
			t.Errorf("SameArgName(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := policy.SameArgName(tc.b, tc.a); got != tc.want {
			t.Errorf("SameArgName(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

// TestTargetUnderALooseSpelling: a target argument sent as a binder that
// ignores case, '_' and '-' reads it (filePath for file_path) is a target
// the rules see, and two arguments that bind to one parameter are refused,
// with few and with many arguments.
func TestTargetUnderALooseSpelling(t *testing.T) {
	tool := policy.NewTool("read_file", map[string]any{"path": "docs/a", "filePath": "secrets/key"}, policy.DefaultTargetArgs)
	var got []string
	for _, a := range tool.AllTargets() {
		got = append(got, a.Target)
	}
	if len(got) != 2 || !(got[0] == "secrets/key" || got[1] == "secrets/key") {
		t.Errorf("targets %q, want docs/a and secrets/key", got)
	}
	if err := policy.CheckArgNames(map[string]any{"path": "a", "dry_run": true, "dryRun": false}); err == nil {
		t.Error("dry_run and dryRun were taken together")
	}
	many := map[string]any{"dry_run": true, "dry-run": false}
	for i := range 20 {
		many["a"+strconv.Itoa(i)] = i
	}
	if err := policy.CheckArgNames(many); err == nil {
		t.Error("dry_run and dry-run were taken together among many")
	}
	delete(many, "dry-run")
	many["_"], many["-"] = 1, 2
	if err := policy.CheckArgNames(many); err != nil {
		t.Errorf("distinct names refused: %v", err)
	}
	nested := map[string]any{"path": "a", "options": []any{map[string]any{"dry_run": true, "dryRun": false}}}
	if err := policy.CheckArgNames(nested); err == nil {
		t.Error("dry_run and dryRun were taken together in a nested object")
	}
	if err := policy.CheckArgNames(map[string]any{"_": 1, "-": 2, "path": "x"}); err != nil {
		t.Errorf("names without letters refused: %v", err)
	}
}

// TestTargetHoldingJSON: a target string that a tool may read as the JSON
// it holds (an array or an object, as FastMCP reads a string argument
// whose parameter is not a str) is opaque: deny and ask rows match it,
// allow rows but "*" do not.
func TestTargetHoldingJSON(t *testing.T) {
	for s, opaque := range map[string]bool{
		`["secrets/key"]`:        true,
		" \n{\"a\":\"secrets\"}": true,
		`[1, NaN]`:               true,
		`notes/[draft].md`:       false,
		`docs/a`:                 false,
	} {
		tool := policy.NewTool("read_file", map[string]any{"path": s}, policy.DefaultTargetArgs)
		all := tool.AllTargets()
		if len(all) == 0 || all[0].Opaque != opaque {
			t.Errorf("%q: targets %+v, want opaque %v", s, all, opaque)
		}
	}
}
