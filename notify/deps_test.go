package notify_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps notify on the standard library: it announces calls and
// knows nothing of policy, proxying, the store or any third-party module.
// Its toolgate imports are the webhook signer it shares with hooks and
// the JSON string encoder it shares with the rest, both standard library
// only.
func TestDeps(t *testing.T) {
	testkit.CheckStdlibOnly(t, ".", "github.com/toolgate/toolgate/internal/webhooksig", "github.com/toolgate/toolgate/internal/strictjson")
}
