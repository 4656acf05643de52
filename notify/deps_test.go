package notify_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps notify on the standard library: it announces calls and
// knows nothing of policy, proxying, the store or any third-party module.
// Its toolgate imports are the webhook signer it shares with hooks, the
// JSON string encoder it shares with the rest, and the display document
// of a parked call, for the one list of usual headers it shares with
// remembered grants, and the plain-HTTP transport it shares with proxy;
// all standard library only.
func TestDeps(t *testing.T) {
	testkit.CheckStdlibOnly(t, ".", "github.com/toolgate/toolgate/internal/webhooksig", "github.com/toolgate/toolgate/internal/strictjson", "github.com/toolgate/toolgate/internal/callinfo", "github.com/toolgate/toolgate/internal/logurl", "github.com/toolgate/toolgate/internal/reveal", "github.com/toolgate/toolgate/internal/direct")
}
