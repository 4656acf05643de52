package policy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the import graph a DAG: policy knows nothing of HTTP
// routing, parked calls or Redis.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"github.com/toolgate/toolgate/proxy", "github.com/toolgate/toolgate/pending",
		"github.com/toolgate/toolgate/internal/config", "github.com/toolgate/toolgate/identity",
		"github.com/go-chi/chi/v5", "github.com/redis/go-redis/v9",
	}
	for dep := range strings.FieldsSeq(string(out)) {
		for _, b := range bad {
			if dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("policy must not depend on %s", dep)
			}
		}
	}
}
