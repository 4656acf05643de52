package policy_test

import (
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
)

// TestPrint: what a policy's print() writes reaches Options.Print, with
// where it was called; without a Print the call is dropped, as OPA drops
// it, and the decision is the same.
func TestPrint(t *testing.T) {
	src := fstest.MapFS{"p.rego": {Data: []byte("package toolgate\n\nallow if {\n\tprint(\"deciding\", input.tool.name)\n\tinput.tool.name == \"read_file\"\n}\n")}}
	var got []string
	e := newEngine(t, policy.Options{Policies: src, Print: func(loc, msg string) { got = append(got, loc+" "+msg) }})
	if d, err := e.Decide(t.Context(), call("read_file", "a")); err != nil || d.Action != policy.Allow {
		t.Fatalf("read_file: %v (%v)", d.Action, err)
	}
	if len(got) != 1 || got[0] != "p.rego:4 deciding read_file" {
		t.Errorf("printed %q, want the one line, with where", got)
	}
	quiet := newEngine(t, policy.Options{Policies: src})
	if d, err := quiet.Decide(t.Context(), call("read_file", "a")); err != nil || d.Action != policy.Allow {
		t.Fatalf("read_file without a Print: %v (%v)", d.Action, err)
	}
}
