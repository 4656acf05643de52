package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyEvalPrints: policy eval writes what the policy's print()
// calls write to stderr, with where, as opa eval does; the decision
// stays on stdout.
func TestPolicyEvalPrints(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": testConfig("http://127.0.0.1:1"),
		"rules.yaml":    "rules: []\n",
		"policy/p.rego": "package toolgate\n\nallow if {\n\tprint(\"deciding\", input.tool.name)\n\tinput.tool.name == \"Read\"\n}\n",
		"input.json":    `{"kind":"rest","tool":{"name":"Read","arguments":{"path":"a"},"target":"a"}}`,
	})
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"policy", "eval", "--config", filepath.Join(dir, "toolgate.yaml"), "--input", filepath.Join(dir, "input.json")}, nil, &out, &errb)
	if code != exitOK || !strings.Contains(out.String(), `"action": "allow"`) {
		t.Fatalf("policy eval: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "p.rego:4: deciding Read") {
		t.Errorf("stderr %q: want the print, with where", errb.String())
	}
}
