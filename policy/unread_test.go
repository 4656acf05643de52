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
	if len(got) != 1 || !strings.HasPrefix(got[0], "deploy.rego:3: data.toolgate.deploy.deny decides nothing") {
		t.Fatalf("Unread = %q, want the one deny of toolgate.deploy named at deploy.rego:3", got)
	}
	if d, err := e.Decide(t.Context(), call("deploy", "")); err != nil || d.Action != policy.Allow {
		t.Errorf("deploy: %v (%v): the unread deny is still not read, as the warning says", d.Action, err)
	}
}

// TestUnreadNotWhenRead: docs/policy.md's own advice, "Have package
// toolgate's rules read them (deny contains r if some r in
// data.toolgate.deploy.deny)", followed to the letter: the deny of
// toolgate.deploy decides (the call is denied), and Unread names nothing.
func TestUnreadNotWhenRead(t *testing.T) {
	e := newEngine(t, policy.Options{Policies: fstest.MapFS{
		"p.rego":      {Data: []byte("package toolgate\n\nallow if input.tool.name == \"deploy\"\n\ndeny contains r if some r in data.toolgate.deploy.deny\n")},
		"deploy.rego": {Data: []byte("package toolgate.deploy\n\ndeny contains \"no deploys\" if input.tool.name == \"deploy\"\n")},
	}})
	d, err := e.Decide(t.Context(), call("deploy", ""))
	if err != nil || d.Action != policy.Deny {
		t.Fatalf("deploy: %v (%v); the deny of toolgate.deploy is read by package toolgate", d.Action, err)
	}
	if got := e.Unread(); len(got) != 0 {
		t.Errorf("Unread = %q for a rule package toolgate reads (and that denied the call)", got)
	}
}

// TestUnreadRefHead: a deny defined in package toolgate with a ref
// head (deploy.deny contains …) lives at data.toolgate.deploy.deny, the
// same document a deny of package toolgate.deploy is, and is read no more
// than that one: it decides nothing, and Unread names it.
func TestUnreadRefHead(t *testing.T) {
	e := newEngine(t, policy.Options{Policies: fstest.MapFS{
		"p.rego": {Data: []byte("package toolgate\n\nallow if input.tool.name == \"deploy\"\n\ndeploy.deny contains \"no deploys\" if input.tool.name == \"deploy\"\n")},
	}})
	d, err := e.Decide(t.Context(), call("deploy", ""))
	if err != nil || d.Action != policy.Allow {
		t.Fatalf("deploy: %v (%v)", d.Action, err)
	}
	got := e.Unread()
	if len(got) != 1 || !strings.Contains(got[0], "deny") {
		t.Errorf("Unread = %q; want deploy.deny (p.rego:5), which decides nothing, named", got)
	}
}

// TestUnreadQuotedPackage: package toolgate["team-a"] is a package
// under toolgate (data.toolgate["team-a"]) whose deny decides nothing,
// named though its path prints with brackets.
func TestUnreadQuotedPackage(t *testing.T) {
	e := newEngine(t, policy.Options{Policies: fstest.MapFS{
		"p.rego":    {Data: []byte("package toolgate\n\nallow if input.tool.name == \"deploy\"\n")},
		"team.rego": {Data: []byte("package toolgate[\"team-a\"]\n\ndeny contains \"no deploys\" if input.tool.name == \"deploy\"\n")},
	}})
	if got := e.Unread(); len(got) != 1 {
		t.Errorf("Unread = %q; want the deny of package toolgate[\"team-a\"] named", got)
	}
}
