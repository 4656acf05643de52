package policy_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rego"
)

// TestLibraryCopyAmongPolicies: a policy directory holding a verbatim copy
// of the shipped library (as the repository's rego/ does, whose lib/ is the
// library) loads in serve's engine and passes policy test alike: the copy
// is read once, as the library. A copy that differs fails both alike.
func TestLibraryCopyAmongPolicies(t *testing.T) {
	lib, err := os.ReadFile("../rego/lib/toolgate.rego")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		copy []byte
		ok   bool
	}{
		{"verbatim", lib, true},
		{"changed", append(append([]byte{}, lib...), "\nextra := 1\n"...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range map[string][]byte{
				"toolgate.rego":  tc.copy,
				"mine.rego":      []byte("package toolgate\nallow contains \"x\" if input.tool.name == \"Read\"\n"),
				"mine_test.rego": []byte("package toolgate_test\ntest_one if true\n"),
			} {
				if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			sum, terr := policy.RunTests(t.Context(), &out, map[string]fs.FS{dir: os.DirFS(dir)}, policy.TestOptions{Library: rego.Library()})
			_, serr := policy.New(t.Context(), policy.Options{Library: rego.Library(), NativeLibrary: true, Policies: os.DirFS(dir)})
			if tested := terr == nil && sum.OK(); tested != tc.ok || (serr == nil) != tc.ok {
				t.Errorf("policy test passed %v (%v), serve's engine loaded %v (%v); want both %v\n%s", tested, terr, serr == nil, serr, tc.ok, out.String())
			}
		})
	}
}

// TestTreeNamedLikeTheLibrary: a tree whatever its name keeps its own
// modules and never replaces the library's.
func TestTreeNamedLikeTheLibrary(t *testing.T) {
	var out bytes.Buffer
	trees := map[string]fs.FS{"toolgate-library": fstest.MapFS{
		"toolgate.rego":      {Data: []byte("package mine\nx := 1\n")},
		"toolgate_test.rego": {Data: []byte("package mine_test\nimport data.mine\nimport data.toolgate.lib\ntest_both if { mine.x == 1; lib.rules == [] }\n")},
	}}
	sum, err := policy.RunTests(t.Context(), &out, trees, policy.TestOptions{Library: rego.Library()})
	if err != nil || !sum.OK() {
		t.Errorf("a tree named toolgate-library: %+v, %v\n%s", sum, err, out.String())
	}
}
