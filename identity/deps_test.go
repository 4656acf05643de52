package identity_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps identity a leaf: it says who is calling and knows nothing
// of policy, proxying, parked calls or Redis.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	bad := []string{
		"github.com/toolgate/toolgate/",
		"github.com/open-policy-agent/opa",
		"github.com/redis/go-redis",
		"github.com/go-chi/chi",
	}
	for dep := range strings.FieldsSeq(string(out)) {
		for _, b := range bad {
			if strings.HasPrefix(dep, b) && dep != "github.com/toolgate/toolgate/identity" {
				t.Errorf("identity must not depend on %s", dep)
			}
		}
	}
}
