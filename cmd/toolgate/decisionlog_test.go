package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestDecisionLogStream runs toolgate serve with a mask policy and a log
// service: a parked call's decision event and its approval's audit event
// share a decision_id, on the console and at the service, and the masked
// argument reaches neither.
func TestDecisionLogStream(t *testing.T) {
	up := testkit.NewUpstream(t, nil)
	svc := testkit.NewUpstream(t, nil)

	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
upstreams:
  - {name: notes, url: ` + up.URL + `}
identity:
  api_keys: [{key: agent-key-0123456789, subject: agent-42}]
policy:
  dir: ./policy
  rules_file: ./rules.yaml
pending:
  hold: 1s
approvals:
  secret: ` + testSecret + `
  approvers: [{name: alice, key: alice-key-0123456789}]
log:
  arguments: true
  decisions:
    service: {url: ` + svc.URL + `, min_delay: 1s, max_delay: 1s}
shutdown_grace: 2s
`,
		"rules.yaml":       seedRulesYAML,
		"policy/mask.rego": "package system.log\n\nmask contains \"/input/tool/arguments/content\"\n",
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

	res, _ := agentCall(t, a.proxy, "write_note", `{"path":"notes/x.md","content":"the-secret-content"}`)
	id := res.Header.Get("X-Toolgate-Call-Id")
	if res.StatusCode != http.StatusAccepted || id == "" {
		t.Fatalf("write_note: %d, call %q", res.StatusCode, id)
	}
	if code := approveAPI(t, a.approvals, id, "alice-key-0123456789"); code != 200 {
		t.Fatalf("approve: %d", code)
	}

	// The console: both events, correlated by decision_id.
	deadline := time.Now().Add(5 * time.Second)
	var decision, audit map[string]any
	for decision == nil || audit == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no decision and audit events for %s:\n%s", id, a.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
		decision, audit = eventsOf(a.stderr.String(), id)
	}
	if decision["result"].(map[string]any)["action"] != "ask" {
		t.Errorf("decision event %v", decision)
	}
	if r := audit["result"].(map[string]any); r["outcome"] != "approved" || r["decided_by"] != "alice" || r["via"] != "api" {
		t.Errorf("audit event %v", audit)
	}
	if erased, _ := decision["erased"].([]any); len(erased) != 1 || erased[0] != "/input/tool/arguments/content" {
		t.Errorf("erased = %v", decision["erased"])
	}
	if strings.Contains(a.stderr.String(), "the-secret-content") {
		t.Error("the masked argument is in the log")
	}
	if strings.Contains(a.stderr.String(), `"msg":"approval"`) {
		t.Error("the audit record is also outside the decision log")
	}

	// The service: the same two events, uploaded by the end of the shutdown.
	a.cancel()
	select {
	case code := <-a.done:
		a.done <- code // for startServe's cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	var uploaded []map[string]any
	for _, req := range svc.Requests() {
		zr, err := gzip.NewReader(bytes.NewReader(req.Body))
		if err != nil || req.Path != "/logs" {
			t.Errorf("upload to %s: %v", req.Path, err)
			continue
		}
		var evs []map[string]any
		if err := json.NewDecoder(zr).Decode(&evs); err != nil {
			t.Errorf("upload: %v", err)
		}
		uploaded = append(uploaded, evs...)
	}
	var paths []string
	for _, ev := range uploaded {
		if ev["decision_id"] == id {
			paths = append(paths, ev["path"].(string))
		}
		if b, _ := json.Marshal(ev); strings.Contains(string(b), "the-secret-content") {
			t.Error("the masked argument was uploaded")
		}
	}
	if strings.Join(paths, ",") != "toolgate/decision,toolgate/approval" {
		t.Errorf("uploaded events for %s: %v", id, paths)
	}
}

// eventsOf finds the decision and audit events of call id in a log.
func eventsOf(log, id string) (decision, audit map[string]any) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev["msg"] != "Decision Log" || ev["decision_id"] != id {
			continue
		}
		switch ev["path"] {
		case "toolgate/decision":
			decision = ev
		case "toolgate/approval":
			audit = ev
		}
	}
	return decision, audit
}
