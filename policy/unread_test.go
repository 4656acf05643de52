package policy_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
)

// TestUnreadDecisionRules: a deny in package toolgate.deploy (an author
// splitting a policy by package, as OPA's docs do) decides nothing, since
// toolgate reads package toolgate's alone: the engine names it, once per
// rule name and file, and names nothing in package toolgate, toolgate.lib
// or a package outside toolgate.
func TestUnreadDecisionRules(t *testing.T) {
	e := newEngine(t, policy.Options{Policies: fstest.MapFS{
		"p.rego": {Data: []byte("package toolgate\n\nallow if input.tool.name == \"deploy\"\n")},
		"deploy.rego": {Data: []byte("package toolgate.deploy\n\ndeny contains \"no forced deploys\" if input.tool.arguments.force == true\n\n" +
			"deny contains \"not on Fridays\" if input.time == \"friday\"\n\nallowed_envs := {\"staging\"}\n")},
		"helpers.rego": {Data: []byte("package myorg.helpers\n\ndeny if false\n")},
	}})
	got := e.Unread()
	if len(got) != 1 || !strings.HasPrefix(got[0], "deploy.rego:3: deny in package toolgate.deploy decides nothing") {
		t.Fatalf("Unread = %q, want the one deny of toolgate.deploy named at deploy.rego:3", got)
	}
	if d, err := e.Decide(t.Context(), call("deploy", "")); err != nil || d.Action != policy.Allow {
		t.Errorf("deploy: %v (%v): the unread deny is still not read, as the warning says", d.Action, err)
	}
}
