package pending

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps pending a leaf: it knows nothing of the proxy, policies,
// identities, HTTP routing or OPA, and does not even link net/http. Test-only
// dependencies (testcontainers) are not in `go list -deps` and must stay
// out of the binary.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"github.com/toolgate/toolgate/proxy",
		"github.com/toolgate/toolgate/policy",
		"github.com/toolgate/toolgate/identity",
		"github.com/go-chi/chi/v5",
		"github.com/open-policy-agent/opa",
		"github.com/testcontainers/testcontainers-go",
		"net/http",
	}
	n := 0
	for dep := range strings.FieldsSeq(string(out)) {
		n++
		for _, b := range bad {
			if dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("pending must not depend on %s", dep)
			}
		}
	}
	if n == 0 {
		t.Fatal("go list -deps printed nothing")
	}
}
