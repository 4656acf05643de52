package rego_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/format"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestRego runs the shipped Rego tests inside `go test`, as
// `toolgate policy test` runs them for users.
func TestRego(t *testing.T) {
	for name, tree := range map[string]map[string]fs.FS{
		"library": {"lib": shipped.Library()},
		"example": {"lib": shipped.Library(), "example": shipped.Example()},
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			sum, err := policy.RunTests(t.Context(), &out, tree, policy.TestOptions{Verbose: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(out.String())
			if !sum.OK() || sum.Failed+sum.Errored > 0 {
				t.Fatalf("Rego tests: %+v\n%s", sum, out.String())
			}
		})
	}
}

// TestFormatted keeps the shipped Rego in `opa fmt` form.
func TestFormatted(t *testing.T) {
	for name, tree := range map[string]fs.FS{"lib": shipped.Library(), "example": shipped.Example()} {
		err := fs.WalkDir(tree, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") {
				return err
			}
			src, err := fs.ReadFile(tree, path)
			if err != nil {
				return err
			}
			out, err := format.Source(path, src)
			if err != nil {
				return err
			}
			if string(out) != string(src) {
				t.Errorf("%s/%s is not formatted: run toolgate opa fmt -w rego/", name, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
