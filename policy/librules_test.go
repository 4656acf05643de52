package policy_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestLibraryTableRefused: a table the user's Rego writes where the
// shipped library reads the table (data.toolgate.lib.rules), which no
// check would see, is refused as the policy loads.
func TestLibraryTableRefused(t *testing.T) {
	src := fmt.Sprintf("package toolgate.lib\n\nrules := [%s, %s]\n", testAllow, testBad)
	e, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}}})
	if err == nil {
		testCheck(t, testDecideWith(t, e))
		t.Fatal("loaded a table written at data.toolgate.lib.rules")
	}
	if !strings.Contains(err.Error(), "data.toolgate.lib.rules is the shipped library's") {
		t.Fatalf("refused with %v; want the library's path named", err)
	}
}
