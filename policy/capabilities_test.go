package policy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// hostPolicies call built-ins that reach the network or the host. None is
// ever evaluated here: the tests only compile them.
var hostPolicies = map[string]string{
	"http.send":          `allow if http.send({"method": "GET", "url": "http://127.0.0.1:1/"}).status_code == 200`,
	"opa.runtime":        `deny contains "env" if opa.runtime().env.SECRET`,
	"net.lookup_ip_addr": `allow if "127.0.0.1" in net.lookup_ip_addr("localhost")`,
	"json.match_schema":  `allow if json.match_schema(input.tool.arguments, {"$ref": "file:///etc/schema.json"})[0]`,
	"json.verify_schema": `allow if json.verify_schema({"$ref": "file:///etc/schema.json"})[0]`,
}

// TestHostBuiltinsRefused: a policy calling a built-in that reaches the
// network or the host is refused at load, with a message naming the
// built-in, the file and line, and the option that allows it; listed in
// Options.Capabilities, it loads.
func TestHostBuiltinsRefused(t *testing.T) {
	for name, src := range hostPolicies {
		t.Run(name, func(t *testing.T) {
			opts := policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: module(src)}
			_, err := policy.New(t.Context(), opts)
			want := "p.rego:2: rego_type_error: built-in " + name + " is not allowed in policies"
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "policy.capabilities") {
				t.Fatalf("New: err = %v, want one containing %q and naming policy.capabilities", err, want)
			}
			opts.Capabilities = []string{name}
			if _, err := policy.New(t.Context(), opts); err != nil {
				t.Fatalf("New with capability %s: %v", name, err)
			}
		})
	}
}

// TestSafeBuiltinsAllowed: pure built-ins, the clock and the like still load.
func TestSafeBuiltinsAllowed(t *testing.T) {
	src := `allow if {
	net.cidr_contains("10.0.0.0/8", "10.1.2.3")
	time.now_ns() > 0
	io.jwt.decode("a.b.c")
	crypto.sha256("x") != ""
	rego.parse_module("p.rego", "package p")
	trace("ok")
	regex.match("a", input.tool.name)
}`
	if _, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), Policies: module(src)}); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownCapabilityRefused(t *testing.T) {
	_, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), Capabilities: []string{"http.send", "http.sned"}})
	if err == nil || !strings.Contains(err.Error(), `"http.sned" is not one of OPA's built-ins`) {
		t.Fatalf("New: err = %v, want the unknown name refused", err)
	}
	_, err = policy.RunTests(t.Context(), os.Stdout, nil, policy.TestOptions{Capabilities: []string{"nope"}})
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("RunTests: err = %v, want the unknown name refused", err)
	}
}

// TestReloadRefusesHostBuiltin: a reload that brings in a refused built-in
// keeps the last good policy.
func TestReloadRefusesHostBuiltin(t *testing.T) {
	dir := t.TempDir()
	write := func(src string) {
		if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("package toolgate\nallow if true\n")
	e := newEngine(t, policy.Options{Policies: os.DirFS(dir)})
	rev := e.Revision()
	write("package toolgate\n" + hostPolicies["opa.runtime"] + "\nallow if true\n")
	if err := e.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), "built-in opa.runtime is not allowed") {
		t.Fatalf("Reload: err = %v, want opa.runtime refused", err)
	}
	if got := decide(t, e, call("Read", "x")); got.Action != "allow" || e.Revision() != rev {
		t.Fatalf("after a refused reload: %v rev %s, want the old allow and rev %s", got, e.Revision(), rev)
	}
}

// TestPolicyTestsRefuseHostBuiltins: `policy test` compiles as the engine does.
func TestPolicyTestsRefuseHostBuiltins(t *testing.T) {
	tree := fstest.MapFS{
		"p.rego":      {Data: []byte("package toolgate\n" + hostPolicies["http.send"] + "\n")},
		"p_test.rego": {Data: []byte("package toolgate_test\n\ntest_loads if true\n")},
	}
	var out strings.Builder
	_, err := policy.RunTests(t.Context(), &out, map[string]fs.FS{"p": tree}, policy.TestOptions{})
	if err == nil || !strings.Contains(err.Error(), "built-in http.send is not allowed") {
		t.Fatalf("RunTests: err = %v, want http.send refused", err)
	}
	sum, err := policy.RunTests(t.Context(), &out, map[string]fs.FS{"p": tree}, policy.TestOptions{Capabilities: []string{"http.send"}})
	if err != nil || !sum.OK() {
		t.Fatalf("RunTests with http.send allowed: %+v %v\n%s", sum, err, out.String())
	}
}
