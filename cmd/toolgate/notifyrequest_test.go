package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestNotificationsNameTheRequest: approving sends a call's method, path and
// query; Slack, Teams and CloudEvents say them, as the approval page does. A
// plain HTTP call has no tool, and a REST tool call's query is sent beside
// its arguments: without the request line, an approver clicking Approve in
// Slack would approve a DELETE they never saw.
func TestNotificationsNameTheRequest(t *testing.T) {
	up := testkit.NewUpstream(t, nil)
	ev := newEvents(t)
	slack := testkit.NewUpstream(t, nil)
	teams := testkit.NewUpstream(t, nil)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
public_url: http://approvals.invalid
upstreams:
  - {name: notes, url: ` + up.URL + `, tool_query: true}
identity:
  api_keys: [{key: agent-key-0123456789, subject: agent-42}]
policy:
  rules_file: ./rules.yaml
  default: ask
pending:
  hold: 1s
approvals:
  secret: ` + testSecret + `
  approvers: [{name: alice, key: alice-key-0123456789}]
  notify:
    - {url: ` + ev.URL + `, format: cloudevents}
    - {url: ` + slack.URL + `, format: slack}
    - {url: ` + teams.URL + `, format: teams}
shutdown_grace: 2s
`,
		"rules.yaml": "rules:\n  - {id: r1, effect: allow, tool: read_file, target: \"*\"}\n",
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	for _, tc := range []struct{ method, path, body, line string }{
		{"DELETE", "/admin/users/42?cascade=all", "", "DELETE /admin/users/42?cascade=all"},
		{"POST", "/tools/write_note?mode=overwrite_all", `{"path":"notes/a.txt","content":"hi"}`, "POST /tools/write_note?mode=overwrite_all"},
	} {
		req, _ := http.NewRequest(tc.method, a.proxy+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer agent-key-0123456789")
		req.Header.Set("Prefer", "respond-async")
		if tc.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		id := res.Header.Get("X-Toolgate-Call-Id")
		if res.StatusCode != http.StatusAccepted || id == "" {
			t.Fatalf("%s %s: %d %s, want 202 and a parked call", tc.method, tc.path, res.StatusCode, raw)
		}
		testkit.WaitFor(t, "the CloudEvent of "+id, func() bool {
			for _, d := range ev.requested(t) {
				if d["call_id"] == id {
					method, path, _ := strings.Cut(tc.line, " ")
					if d["method"] != method || d["path"] != path {
						t.Errorf("CloudEvent of %s: method %v path %v, want %s", tc.line, d["method"], d["path"], tc.line)
					}
					return true
				}
			}
			return false
		})
		for name, target := range map[string]*testkit.Upstream{"Slack": slack, "Teams": teams} {
			testkit.WaitFor(t, name+" message of "+id, func() bool {
				for _, r := range target.Requests() {
					if strings.Contains(string(r.Body), id) {
						if line := strings.ReplaceAll(tc.line, "_", `\\_`); !strings.Contains(string(r.Body), tc.line) && !strings.Contains(string(r.Body), line) {
							t.Errorf("%s message of %s does not say %q: %s", name, id, tc.line, r.Body)
						}
						return true
					}
				}
				return false
			})
		}
	}
}
