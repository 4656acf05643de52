package identity_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps identity a leaf: it says who is calling and knows nothing
// of policy, proxying, parked calls or Redis. Of toolgate's own packages it
// uses only internal/strictjson, a leaf itself, to read JWT claims, and
// internal/logurl, another, to write the JWKS URL.
func TestDeps(t *testing.T) {
	forbidden := []string{
		"github.com/open-policy-agent/opa/...",
		"github.com/redis/go-redis/...",
		"github.com/go-chi/chi/...",
	}
	// Every package of the module, listed now so that one added later is
	// forbidden too.
	out, err := exec.Command("go", "list", "github.com/toolgate/toolgate/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for p := range strings.FieldsSeq(string(out)) {
		switch p {
		case "github.com/toolgate/toolgate/identity", "github.com/toolgate/toolgate/internal/strictjson",
			"github.com/toolgate/toolgate/internal/logurl", "github.com/toolgate/toolgate/internal/rebind":
		default:
			forbidden = append(forbidden, p)
		}
	}
	testkit.CheckDeps(t, ".", forbidden...)
}
