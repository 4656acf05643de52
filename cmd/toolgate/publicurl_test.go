package main

import (
	"bytes"
	"io"
	"net"
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

// TestBrokenPolicyBeforePorts: a policy that does not compile is reported
// as such (exit 2, naming it) even when a listen address is taken: the
// listeners are bound once the app is built, but for an approvals
// listener on a free port, which is bound first (and can be).
func TestBrokenPolicyBeforePorts(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := strings.Replace(testConfig("http://127.0.0.1:1"), "proxy: 127.0.0.1:0", "proxy: "+busy.Addr().String(), 1)
	if !strings.Contains(cfg, busy.Addr().String()) || !strings.Contains(cfg, "approvals: 127.0.0.1:0") {
		t.Fatalf("config:\n%s", cfg)
	}
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": cfg,
		"rules.yaml":    "rules: []\n",
		"policy/p.rego": "package toolgate\nallow if {",
	})
	var stderr bytes.Buffer
	environ := []string{"AGENT_KEY=agent-key-1-0123456789", "TOOLGATE_APPROVALS_SECRET=" + testSecret}
	code := run(t.Context(), []string{"serve", "--config", filepath.Join(dir, "toolgate.yaml")}, environ, io.Discard, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "p.rego") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 naming the broken policy p.rego", code, stderr.String())
	}
}
