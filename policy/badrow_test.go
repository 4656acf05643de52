package policy_test

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestNullApproversRow: a data file's table written by yaml.Marshal of
// []policy.Rule carries "approvers: null" on every row without
// approvers, which the load reads as none: the library does too, and the
// call is decided by the table, not denied as toolgate.bad_row.
func TestNullApproversRow(t *testing.T) {
	rows := []policy.Rule{
		{ID: "docs", Effect: "allow", Tool: "read_file", Target: "docs/**"},
		{ID: "env", Effect: "deny", Tool: "*", Target: "**/.env"},
	}
	table, err := yaml.Marshal(map[string]any{"toolgate": map[string]any{"rules": rows}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.New(t.Context(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true,
		Policies: fstest.MapFS{"data.yaml": {Data: table}},
	})
	if err != nil {
		t.Fatalf("refused at load: %v", err)
	}
	d, err := e.Decide(t.Context(), call("read_file", "docs/a.md"))
	if err != nil || d.Action != policy.Allow {
		t.Errorf("read_file docs/a.md is %v %v (%v): the table loaded clean and allows it", d.Action, d.RuleIDs(), err)
	}
	if slices.Contains(d.RuleIDs(), "toolgate.bad_row") {
		t.Errorf("a row the load check accepted is denied as toolgate.bad_row: %v", d.Messages())
	}
}

// libWithoutBadRow is the shipped library less its toolgate.bad_row
// deny rule.
func libWithoutBadRow(t testing.TB) fs.FS {
	src, err := fs.ReadFile(shipped.Library(), "toolgate.rego")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	before, _, ok := strings.Cut(s, "deny contains {\n\t\"id\": \"toolgate.bad_row\"")
	j := strings.Index(s, "well_formed_row(r) if {")
	if !ok || j < 0 {
		t.Fatal("the library has no toolgate.bad_row rule to remove")
	}
	return fstest.MapFS{"toolgate.rego": {Data: []byte(before + s[j:])}}
}

// TestCheckedTableRowsNotRecheckedCost: a 100-row table served from a
// data file (no index: every row is a candidate of every call) was checked
// whole as the policy loaded, and the library does not check each row
// again at every call: with the rows checked, a call cost 3x the
// allocations of the whole decision (17502 against 5856, 3.8 ms against
// 1.5 ms). At most half as much again as without the check.
func TestCheckedTableRowsNotRecheckedCost(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("toolgate:\n  rules:\n")
	for i := range 100 {
		fmt.Fprintf(&sb, "    - {id: r%d, effect: %s, tool: tool%d, target: \"dir%d/**\"}\n", i, []string{"allow", "deny", "ask"}[i%3], i%10, i)
	}
	allocs := func(lib fs.FS) float64 {
		e, err := policy.New(t.Context(), policy.Options{
			Library: lib, NativeLibrary: true,
			Policies: fstest.MapFS{"data.yaml": {Data: []byte(sb.String())}},
		})
		if err != nil {
			t.Fatal(err)
		}
		in := call("tool3", "dir3/a")
		return testing.AllocsPerRun(20, func() {
			if _, err := e.Decide(t.Context(), in); err != nil {
				t.Fatal(err)
			}
		})
	}
	with, without := allocs(shipped.Library()), allocs(libWithoutBadRow(t))
	if with > 1.5*without {
		t.Errorf("a call allocates %.0f times with toolgate.bad_row, %.0f without (x%.1f)", with, without, with/without)
	}
}
