package hooks_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps hooks a leaf: it asks hooks and knows nothing of
// policies, proxying, parked calls, approvals or notifications.
func TestDeps(t *testing.T) {
	testkit.CheckDeps(t, ".",
		"github.com/toolgate/toolgate/policy/...",
		"github.com/toolgate/toolgate/proxy/...",
		"github.com/toolgate/toolgate/pending/...",
		"github.com/toolgate/toolgate/approvals/...",
		"github.com/toolgate/toolgate/notify/...",
		"github.com/open-policy-agent/opa/...",
		"github.com/redis/go-redis/v9/...",
	)
}
