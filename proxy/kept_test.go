package proxy

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/internal/callinfo/callinfotest"
)

// TestMain fails the tests when any of them wrote to an Info that
// callinfo.Decode shares (callinfotest.RunCheckingKept).
func TestMain(m *testing.M) { os.Exit(callinfotest.RunCheckingKept(m)) }
