package pending

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps pending a leaf: it knows nothing of the proxy, policies,
// identities, HTTP routing or OPA, and does not even link net/http. Test-only
// dependencies (testcontainers) are not in `go list -deps` and must stay
// out of the binary.
func TestDeps(t *testing.T) {
	testkit.CheckDeps(t, ".",
		"github.com/toolgate/toolgate/proxy/...",
		"github.com/toolgate/toolgate/policy/...",
		"github.com/toolgate/toolgate/identity/...",
		"github.com/go-chi/chi/v5/...",
		"github.com/open-policy-agent/opa/...",
		"github.com/testcontainers/testcontainers-go/...",
		"net/http/...",
	)
}
