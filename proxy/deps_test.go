package proxy

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps the choices of cmd out of proxy: which policy files
// (rego), which store (go-redis), the approval handlers (approvals) and
// OPA itself are wired in by cmd/toolgate; proxy imports none of them.
// What it links through pending and policy is not its own import.
func TestDeps(t *testing.T) {
	testkit.CheckImports(t, ".",
		"github.com/toolgate/toolgate/rego",
		"github.com/toolgate/toolgate/approvals",
		"github.com/redis/go-redis/...",
		"github.com/open-policy-agent/opa/v1/rego",
		"github.com/open-policy-agent/opa/v1/ast",
		"github.com/open-policy-agent/opa/rego",
		"github.com/open-policy-agent/opa/ast",
	)
}
