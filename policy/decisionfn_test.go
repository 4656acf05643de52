package policy_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestHelperUnderDecisionPath: a helper function in a package under a
// decision rule's path (package toolgate.allow, is_safe(x)) is not taken
// for the decision rule written as a function.
func TestHelperUnderDecisionPath(t *testing.T) {
	src := "package toolgate.allow\n\nis_safe(x) if x == \"ls\"\n"
	_, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}}})
	if err != nil && strings.Contains(err.Error(), "allow is a function") {
		t.Errorf("refused as %q: is_safe, in package toolgate.allow, is the function; allow is no rule of this policy", err)
	}
}
