package policy_test

import (
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
)

// TestHookOpinion checks how a hook's opinion weighs against the rules and
// the mode: a hook ask is forced past every mode but not past a rules deny;
// a hook allow stands only where the rules raise no objection.
func TestHookOpinion(t *testing.T) {
	e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), seedRules)})
	ask := &policy.HookOpinion{Action: policy.Ask, Reasons: []policy.Reason{{ID: "hook.freeze", Message: "change freeze"}}}
	allow := &policy.HookOpinion{Action: policy.Allow, Reasons: []policy.Reason{{ID: "hook.ticket", Message: "ticket approved"}}}
	cases := []struct {
		name, tool, target, mode string
		hook                     *policy.HookOpinion
		want                     policy.Action
	}{
		{"no hook", "Write", "x", "default", nil, policy.Ask},
		{"hook ask on a rules allow", "Read", "x", "default", ask, policy.Ask},
		{"hook ask never beats a rules deny", "Read", "secrets.txt", "default", ask, policy.Deny},
		{"hook ask under bypass still asks", "Read", "x", "bypass", ask, policy.Ask},
		{"hook ask under dont_ask still asks", "Write", "x", "dont_ask", ask, policy.Ask},
		{"hook ask under plan still asks", "Write", "x", "plan", ask, policy.Ask},
		{"hook allow with a rules ask asks", "Write", "x", "default", allow, policy.Ask},
		{"hook allow never beats a rules deny", "Read", "secrets.txt", "default", allow, policy.Deny},
		{"hook allow where no rule fired", "Unknown", "x", "default", allow, policy.Allow},
		{"no rule fired, no hook: the default", "Unknown", "x", "default", nil, policy.Deny},
		{"hook allow with a rules ask under dont_ask: deny", "Write", "x", "dont_ask", allow, policy.Deny},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := call(tc.tool, tc.target)
			in.Mode, in.Hook = tc.mode, tc.hook
			d, err := e.Decide(t.Context(), in)
			if err != nil || d.Action != tc.want {
				t.Fatalf("%v (%v), %v; want %v", d.Action, d.Messages(), err, tc.want)
			}
			if tc.hook == ask && d.Action == policy.Ask && d.Reasons[0].ID != "hook.freeze" {
				t.Errorf("a forced ask's first reason is %q, want the hook's", d.Reasons[0].ID)
			}
		})
	}
}

// TestHookOpinionDefaultIsNotAnID: a deny the rules fired stays a deny
// under a hook's allow or ask even when its reason carries the ID the
// default's reason has (a Rego reason may give it; a rules row may not).
func TestHookOpinionDefaultIsNotAnID(t *testing.T) {
	e := newEngine(t, policy.Options{Policies: fstest.MapFS{"p.rego": {Data: []byte(
		"package toolgate\ndeny contains {\"id\": \"toolgate.default\", \"message\": \"no\"} if input.tool.name in {\"shell\", \"delete_file\"}\n")}}})
	for _, tool := range []string{"delete_file", "shell"} {
		for _, hook := range []policy.Action{policy.Allow, policy.Ask} {
			in := call(tool, "")
			in.Hook = &policy.HookOpinion{Action: hook, Reasons: []policy.Reason{{Message: "hook"}}}
			if d, err := e.Decide(t.Context(), in); err != nil || d.Action != policy.Deny {
				t.Errorf("%s under a hook %s: %v %v (%v), want deny", tool, hook, d.Action, d.Messages(), err)
			}
		}
	}
}
