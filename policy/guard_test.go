package policy_test

import (
	"context"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestEveryNondeterministicBuiltinReviewed: every OPA built-in that reads
// something from outside its arguments is either refused or reviewed here
// as safe, so a built-in a new OPA version adds is not let in unseen.
func TestEveryNondeterministicBuiltinReviewed(t *testing.T) {
	reviewed := map[string]bool{ // the clock, randomness, or keys passed as arguments
		"time.now_ns": true, "rand.intn": true, "uuid.rfc4122": true,
		"io.jwt.decode_verify": true, "io.jwt.encode_sign": true, "io.jwt.encode_sign_raw": true,
	}
	refused := policy.RefusedBuiltins()
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		if !b.Nondeterministic || refused[b.Name] != "" || reviewed[b.Name] {
			continue
		}
		t.Errorf("built-in %s reads from outside its arguments and is neither refused nor reviewed as safe", b.Name)
	}
}

// TestMCPMethodsMatchRego: the Go list of MCP methods the native library
// lets through is the Rego library's mcp_methods, exactly.
func TestMCPMethodsMatchRego(t *testing.T) {
	var mods []func(*rego.Rego)
	lib := shipped.Library()
	files, err := fsGlob(lib)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range files {
		mods = append(mods, rego.Module(name, src))
	}
	rs, err := rego.New(append(mods, rego.Query("data.toolgate.lib.mcp_methods"))...).Eval(context.Background())
	if err != nil || len(rs) != 1 || len(rs[0].Expressions) != 1 {
		t.Fatalf("eval: %v %v", rs, err)
	}
	var inRego []string
	for _, v := range rs[0].Expressions[0].Value.([]any) {
		inRego = append(inRego, v.(string))
	}
	slices.Sort(inRego)
	inGo := slices.Sorted(maps.Keys(policy.MCPMethods()))
	if !slices.Equal(inGo, inRego) {
		t.Fatalf("MCP methods:\n Go   %v\n Rego %v", inGo, inRego)
	}
}

// fsGlob reads the library's modules, tests left out.
func fsGlob(fsys fs.FS) (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") || strings.HasSuffix(p, "_test.rego") {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		out[p] = string(b)
		return err
	})
	return out, err
}
