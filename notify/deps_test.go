package notify_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDeps keeps notify on the standard library: it announces calls and
// knows nothing of policy, proxying, the store or any third-party module.
func TestDeps(t *testing.T) {
	testkit.CheckStdlibOnly(t, ".")
}
