package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// processLog is a replica's log without its decision-log events
// ("Decision Log" records): what the operator's masks do not reach.
func processLog(stderr string) []string {
	var out []string
	for line := range strings.SplitSeq(stderr, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] == "Decision Log" {
			continue
		}
		out = append(out, line)
	}
	return out
}

// TestGrantTargetNotInProcessLog: a target (a command, a URL with a token)
// may hold a secret, which the README has operators mask in the decision
// log. "Approve and remember" must not write it to the process log, where
// the masks do not reach.
func TestGrantTargetNotInProcessLog(t *testing.T) {
	const secret = "sk-live-GRANTSECRET"
	mask := `package system.log

mask contains concat("/", ["/input/tool", k]) if {
	input.input.tool.name == "deploy"
	some k in {"target", "target_raw", "targets"}
}
`
	e := startMech(t, mechSetup{rules: grantRules, policy: "  dir: ./policy\n", files: map[string]string{"policy/mask.rego": mask}})
	p := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", `{"command":"deploy --token=`+secret+`"}`, async...).want(t, "deploy", 202, "ask")
	code, g, resp := remember(t, e.approvals, p.id, "alice-key-0123456789", "subject+tool+target", "1h")
	if code != 200 || g == nil {
		t.Fatalf("approve and remember: %d %s", code, resp)
	}
	if b, _ := json.Marshal(decisionEvent(t, e.replica, p.id)); strings.Contains(string(b), secret) {
		t.Fatalf("the masked decision event holds the secret: %s", b)
	}
	time.Sleep(200 * time.Millisecond) // the grant's log line is written after the answer
	for _, line := range processLog(e.stderr.String()) {
		if strings.Contains(line, secret) {
			t.Errorf("the process log holds the masked target:\n%s", line)
		}
	}
}
