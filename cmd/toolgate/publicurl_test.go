package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestFreeApprovalsPortLinks: with listen.approvals on port 0 and no
// public_url, the links sent to approvers name the port the listener took,
// and open the call's page.
func TestFreeApprovalsPortLinks(t *testing.T) {
	ev := events{testkit.NewUpstream(t, nil)}
	up := testkit.NewUpstream(t, nil)
	cfg := announceConfig(up.URL, ev.URL)
	if !strings.Contains(cfg, "public_url:") {
		t.Fatal("the config names no public_url to take out")
	}
	cfg = strings.Replace(cfg, "public_url: http://approvals.invalid\n", "", 1)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": cfg,
		"rules.yaml":    "rules:\n  - {id: r1, effect: ask, tool: write_note, target: \"*\"}\n",
	})
	tg := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	if tg.approvals == "" || strings.HasSuffix(tg.approvals, ":0") {
		t.Fatalf("approvals listener at %q", tg.approvals)
	}
	res, body := agentCall(t, tg.proxy, "write_note", `{"path":"a.txt","content":"x"}`, "Prefer", "respond-async")
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("ask: %d %s, want 202", res.StatusCode, body)
	}
	link := ev.approvalURL(t, res.Header.Get("X-Toolgate-Call-Id"))
	if !strings.HasPrefix(link, tg.approvals+"/") {
		t.Fatalf("approval link %s, want it on the approvals listener %s", link, tg.approvals)
	}
	page, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, want the call's page", link, page.StatusCode)
	}
}
