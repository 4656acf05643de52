package policy_test

import (
	"bytes"
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestFailureNamesExpression: a failing test's report names the
// expression that failed, and the values it read, as opa test
// --var-values does, not the test's name alone.
func TestFailureNamesExpression(t *testing.T) {
	trees := map[string]fs.FS{"p": fstest.MapFS{
		"p.rego":      {Data: []byte("package toolgate\nallow if input.tool.name == \"read_file\"\n")},
		"p_test.rego": {Data: []byte("package toolgate_test\nimport data.toolgate\ntest_read if {\n\ttoolgate.allow with input as {\"tool\": {\"name\": \"write_file\"}}\n}\n")},
	}}
	var out bytes.Buffer
	sum, err := policy.RunTests(context.Background(), &out, trees, policy.TestOptions{Library: shipped.Library()})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 1 {
		t.Fatalf("want one failure, got %+v\n%s", sum, out.String())
	}
	if !strings.Contains(out.String(), "FAILURES") || !strings.Contains(out.String(), "toolgate.allow with input") {
		t.Fatalf("FAILURES section names no failing expression:\n%s", out.String())
	}
}
