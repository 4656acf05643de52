package rego_test

import (
	"io/fs"
	"strings"
	"testing"

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
