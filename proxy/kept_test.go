package proxy

import (
	"fmt"
	"os"
	"testing"

	"github.com/toolgate/toolgate/internal/callinfo"
)

// TestMain fails the tests when any of them wrote to an Info that
// callinfo.Decode shares with every reader of the same call
// (callinfo.CheckKept): the code under test reads Infos, never writes them.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := callinfo.CheckKept(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	os.Exit(code)
}
