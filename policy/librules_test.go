package policy_test

import (
	"bytes"
	"fmt"
	"io/fs"
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

// TestPolicyTestLibraryTableRefused: policy test refuses what serve
// refuses, a table at data.toolgate.lib.rules.
func TestPolicyTestLibraryTableRefused(t *testing.T) {
	src := fmt.Sprintf("package toolgate.lib\n\nrules := [%s, %s]\n", testAllow, testBad)
	if _, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}}}); err == nil {
		t.Fatal("serve loaded it")
	}
	tree := fstest.MapFS{
		"p.rego":      {Data: []byte(src)},
		"p_test.rego": {Data: []byte("package toolgate_test\n\ntest_one if { true }\n")},
	}
	var out bytes.Buffer
	sum, err := policy.RunTests(t.Context(), &out, map[string]fs.FS{"p": tree}, policy.TestOptions{Library: shipped.Library()})
	if err == nil || !strings.Contains(err.Error(), "data.toolgate.lib.rules is the shipped library's") {
		t.Errorf("policy test ran it (%+v, %v); serve refuses it", sum, err)
	}
}
