package identity_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps identity a leaf: it says who is calling and knows nothing
// of policy, proxying, parked calls or Redis.
func TestDeps(t *testing.T) {
	testkit.CheckDeps(t, ".",
		"github.com/toolgate/toolgate/...",
		"github.com/open-policy-agent/opa/...",
		"github.com/redis/go-redis/...",
		"github.com/go-chi/chi/...",
	)
}
