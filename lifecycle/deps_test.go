package lifecycle

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps lifecycle the parked calls' state machine and nothing
// else: no HTTP (the proxy answers requests, approvals decide), no Rego
// (the executor re-checks through what proxy gives it), no store driver
// (pending is its only store).
func TestDeps(t *testing.T) {
	testkit.CheckDeps(t, ".",
		"github.com/toolgate/toolgate/proxy/...",
		"github.com/toolgate/toolgate/policy/...",
		"github.com/toolgate/toolgate/approvals/...",
		"github.com/toolgate/toolgate/identity/...",
		"github.com/go-chi/chi/v5/...",
		"github.com/open-policy-agent/opa/...",
		"net/http/...",
	)
	testkit.CheckImports(t, ".", "github.com/redis/go-redis/...")
}
