package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestValidateWarnsUnreadRules: a module in policy.dir whose package is
// not toolgate (package toolgate.deploy, as OPA authors split policies by
// tool) defines deny rules serve never reads. config validate warns, as it
// does for a misshapen rule, naming the file and line, and --strict fails.
func TestValidateWarnsUnreadRules(t *testing.T) {
	up := testkit.NewUpstream(t, nil)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": testConfig(up.URL),
		"rules.yaml":    "rules: []\n",
		"policy/p.rego": "package toolgate\n\nallow if input.tool.name == \"deploy\"\n",
		"policy/deploy.rego": "package toolgate.deploy\n\ndeny contains \"no forced deploys\" if {\n" +
			"\tinput.tool.name == \"deploy\"\n\tinput.tool.arguments.force == true\n}\n",
	})
	environ := []string{"AGENT_KEY=agent-key-1-0123456789", "TOOLGATE_APPROVALS_SECRET=" + testSecret}
	var vout, verr bytes.Buffer
	code := run(t.Context(), []string{"config", "validate", "--strict", "--config", filepath.Join(dir, "toolgate.yaml")}, environ, &vout, &verr)
	if code == exitOK || !strings.Contains(verr.String(), "warning: deploy.rego:3: data.toolgate.deploy.deny decides nothing") {
		t.Fatalf("config validate --strict with deny rules serve never reads (package toolgate.deploy): exit %d, stderr:\n%s", code, verr.String())
	}
}

// TestValidateStrictReadHelper: the design docs/policy.md recommends
// (package toolgate's deny reads data.toolgate.deploy.deny) passes config
// validate --strict: nothing is unread.
func TestValidateStrictReadHelper(t *testing.T) {
	up := testkit.NewUpstream(t, nil)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml":      testConfig(up.URL),
		"rules.yaml":         "rules: []\n",
		"policy/p.rego":      "package toolgate\n\ndeny contains r if some r in data.toolgate.deploy.deny\n",
		"policy/deploy.rego": "package toolgate.deploy\n\ndeny contains \"no forced deploys\" if input.tool.arguments.force == true\n",
	})
	environ := []string{"AGENT_KEY=agent-key-1-0123456789", "TOOLGATE_APPROVALS_SECRET=" + testSecret}
	var vout, verr bytes.Buffer
	if code := run(t.Context(), []string{"config", "validate", "--strict", "--config", filepath.Join(dir, "toolgate.yaml")}, environ, &vout, &verr); code != exitOK {
		t.Fatalf("config validate --strict of the documented design: exit %d, stderr:\n%s", code, verr.String())
	}
}
