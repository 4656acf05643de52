package policy_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// testPolicy: n deny rules in package pkg, each reading a shared chain of
// n helper rules (a helper library every rule uses).
func testPolicy(pkg string, n int) fstest.MapFS {
	var sb strings.Builder
	fmt.Fprintf(&sb, "package %s\n\n", pkg)
	for i := range n {
		fmt.Fprintf(&sb, "deny contains \"m%d\" if { data.toolgate.h0; input.tool.name == \"t%d\" }\n", i, i)
	}
	var hb strings.Builder
	hb.WriteString("package toolgate\n\n")
	for i := range n {
		fmt.Fprintf(&hb, "h%d if { h%d; input.tool.name != \"x%d\" }\n", i, i+1, i)
	}
	fmt.Fprintf(&hb, "h%d if input.tool.name != \"\"\n", n)
	return fstest.MapFS{"p.rego": {Data: []byte(sb.String())}, "h.rego": {Data: []byte(hb.String())}}
}

// TestUnreadRulesLoadCost: naming the unread decision rules walks what
// package toolgate's rules read once, not once per rule: 400 deny rules
// over a 400-rule helper chain load about as fast as the same rules in a
// package toolgate does not read (before: 1.5-2.2 s against 0.11 s).
func TestUnreadRulesLoadCost(t *testing.T) {
	const n = 400
	load := func(pkg string) time.Duration {
		t0 := time.Now()
		if _, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: testPolicy(pkg, n)}); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	load("toolgate")
	read, other := load("toolgate"), load("other")
	t.Logf("package toolgate: %v; package other: %v", read, other)
	if read > 3*other {
		t.Errorf("%d decision rules over a %d-rule helper chain load in %v, against %v unread", n, n, read, other)
	}
}
