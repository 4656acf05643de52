package policy_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

func testRulesFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte("rules:\n  - {id: all, effect: allow, tool: read_file, target: \"*\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const testCall = `{"kind": "rest", "tool": {"name": "read_file", "target": "a.md", "arguments": {}}}`

// TestRulesFileBesideRegoTable: policy test -rules refuses a table the
// trees' Rego defines beside it, as serve refuses one beside
// policy.rules_file.
func TestRulesFileBesideRegoTable(t *testing.T) {
	tree := fstest.MapFS{
		"p.rego":      {Data: []byte("package toolgate\n\nrules := []\n")},
		"p_test.rego": {Data: []byte("package toolgate_test\n\nimport data.toolgate.lib\n\ntest_allowed if {\n\t{r.id | some r in lib.allow} == {\"all\"} with input as " + testCall + "\n}\n")},
	}
	var out bytes.Buffer
	sum, err := policy.RunTests(t.Context(), &out, map[string]fs.FS{"p": tree}, policy.TestOptions{Library: shipped.Library(), RulesFile: testRulesFile(t)})
	if err == nil || !strings.Contains(err.Error(), "data.toolgate.rules is served by -rules, and p.rego:3 defines it too") {
		t.Errorf("a Rego table beside -rules: %+v, %v (serve refuses this policy)\n%s", sum, err, out.String())
	}
}

// TestRulesFileWithOverride: under -rules, a test that gives its own
// rows (with data.toolgate.rules as …) is decided by them, not by the
// file's index.
func TestRulesFileWithOverride(t *testing.T) {
	tree := fstest.MapFS{
		"p_test.rego": {Data: []byte("package toolgate_test\n\nimport data.toolgate.lib\n\ntest_no_rows_no_allow if {\n\tcount(lib.allow) == 0 with data.toolgate.rules as [] with input as " + testCall + "\n}\n")},
	}
	var out bytes.Buffer
	sum, err := policy.RunTests(t.Context(), &out, map[string]fs.FS{"p": tree}, policy.TestOptions{Library: shipped.Library(), RulesFile: testRulesFile(t)})
	if err != nil || !sum.OK() {
		t.Errorf("with data.toolgate.rules as [] under -rules: %+v %v: the file's index still decides\n%s", sum, err, out.String())
	}
}
