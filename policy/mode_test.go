package policy

import "testing"

// TestConfiguredMode: a subject's mode beats its upstream's, which beats
// policy.mode; a subject without one falls through.
func TestConfiguredMode(t *testing.T) {
	subjects := map[string]string{"nightly": ModeDontAsk}
	for _, tc := range []struct{ subject, upstream, fallback, want string }{
		{"nightly", ModePlan, ModeBypass, ModeDontAsk},
		{"alice", ModePlan, ModeBypass, ModePlan},
		{"alice", "", ModeBypass, ModeBypass},
		{"alice", "", "", ""},
	} {
		if got := ConfiguredMode(subjects, tc.subject, tc.upstream, tc.fallback); got != tc.want {
			t.Errorf("ConfiguredMode(%q, %q, %q) = %q, want %q", tc.subject, tc.upstream, tc.fallback, got, tc.want)
		}
	}
}
