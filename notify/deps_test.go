package notify_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps notify on the standard library: it announces calls and
// knows nothing of policy, proxying, the store or any third-party module.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for dep := range strings.FieldsSeq(string(out)) {
		if dep != "github.com/toolgate/toolgate/notify" {
			t.Errorf("notify must depend on the standard library only, not %s", dep)
		}
	}
}
