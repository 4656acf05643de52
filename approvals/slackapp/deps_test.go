package slackapp

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps slackapp to Slack's side of a click: deciding belongs to
// the Decider it is given, so it knows nothing of the approvals handler,
// the store, policies or identities.
func TestDeps(t *testing.T) {
	testkit.CheckDeps(t, ".",
		"github.com/toolgate/toolgate/approvals",
		"github.com/toolgate/toolgate/pending/...",
		"github.com/toolgate/toolgate/policy/...",
		"github.com/toolgate/toolgate/proxy/...",
		"github.com/toolgate/toolgate/identity/...",
		"github.com/redis/go-redis/v9/...",
		"github.com/open-policy-agent/opa/...",
	)
}
