// Package callinfotest helps tests of packages that read call information.
package callinfotest

import (
	"fmt"
	"os"
	"testing"

	"github.com/toolgate/toolgate/internal/callinfo"
)

// RunCheckingKept runs m's tests and then fails them when any wrote to an
// Info that callinfo.Decode shares with every reader of the same call
// (callinfo.CheckKept): the code under test reads Infos, never writes
// them. It returns the exit code, for os.Exit in a TestMain.
func RunCheckingKept(m *testing.M) int {
	code := m.Run()
	if err := callinfo.CheckKept(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	return code
}
