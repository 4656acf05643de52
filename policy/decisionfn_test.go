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
// for the decision rule written as a function (it is refused for where it
// sits: TestRuleUnderDecisionPathRefused).
func TestHelperUnderDecisionPath(t *testing.T) {
	src := "package toolgate.allow\n\nis_safe(x) if x == \"ls\"\n"
	_, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}}})
	if err != nil && strings.Contains(err.Error(), "allow is a function") {
		t.Errorf("refused as %q: is_safe, in package toolgate.allow, is the function; allow is no rule of this policy", err)
	}
}

// TestRuleUnderDecisionPathRefused: a rule below a decision rule's path
// (a helper in package toolgate.allow, or deny.foo in package toolgate)
// makes the decision rule an object, which no call can be decided by:
// refused as the policy loads, naming where, rather than loaded to fail
// every call.
func TestRuleUnderDecisionPathRefused(t *testing.T) {
	for name, src := range map[string]string{
		"pkg":     "package toolgate.allow\n\nis_safe(x) if x == \"ls\"\n",
		"refhead": "package toolgate\n\ndeny.foo(x) if x == 1\n",
		"a rule":  "package toolgate.deny\n\nx := 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}}})
			if err == nil || !strings.Contains(err.Error(), "p.rego:3:") || !strings.Contains(err.Error(), "sits where toolgate reads the") {
				t.Errorf("loaded with %v; want it refused naming p.rego:3", err)
			}
		})
	}
}
