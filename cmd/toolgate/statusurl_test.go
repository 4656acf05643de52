package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/pending"
)

// TestEventStatusURL: notifications give the parked call's status URL as
// the agent gets it: absolute under proxy_public_url (its path prefix
// kept), relative without it.
func TestEventStatusURL(t *testing.T) {
	for base, want := range map[string]string{
		"":                           "/_toolgate/calls/ID",
		"https://gw.example.com":     "https://gw.example.com/_toolgate/calls/ID",
		"https://gw.example.com/tg/": "https://gw.example.com/tg/_toolgate/calls/ID",
	} {
		p := &parking{proxyPublic: base}
		for _, typ := range []string{notify.TypeRequested, notify.TypeResolved} {
			if got := p.event(typ, pending.Call{ID: "ID"}, "").StatusURL; got != want {
				t.Errorf("proxy_public_url %q: %s event status_url %q, want %q", base, typ, got, want)
			}
		}
	}
}

// TestServeProxyPublicURL: with proxy_public_url set, a call still
// waiting answers 202 with the absolute status URL, and its notification
// gives the same one.
func TestServeProxyPublicURL(t *testing.T) {
	_, up := newNotes(t)
	ev := newEvents(t)
	cfg := testConfig(up.URL) + `proxy_public_url: https://gw.example.com/tg
pending: {hold: 1s}
`
	cfg = strings.Replace(cfg, "approvals:\n", "approvals:\n  notify: [{url: "+ev.URL+", format: cloudevents}]\n", 1)
	dir := writeFiles(t, t.TempDir(), map[string]string{"toolgate.yaml": cfg, "rules.yaml": seedRulesYAML, "policy/.keep": ""})
	r := startServe(t, []string{"serve", "--config", filepath.Join(dir, "toolgate.yaml")},
		[]string{"AGENT_KEY=agent-key-0123456789", "TOOLGATE_APPROVALS_SECRET=" + testSecret})

	res, body := agentCall(t, r.proxy, "write_note", `{"path":"notes/today.txt","content":"x"}`, "Prefer", "respond-async")
	id := res.Header.Get("X-Toolgate-Call-Id")
	want := "https://gw.example.com/tg/_toolgate/calls/" + id
	if res.StatusCode != http.StatusAccepted || res.Header.Get("Location") != want || !strings.Contains(body, `"status_url":"`+want+`"`) {
		t.Fatalf("%d Location %q body %s; want 202 with status URL %s", res.StatusCode, res.Header.Get("Location"), body, want)
	}
	testkit.WaitFor(t, "an approval.requested event for "+id, func() bool {
		for _, d := range ev.requested(t) {
			if d["call_id"] == id {
				if d["status_url"] != want {
					t.Errorf("event status_url %v, want %s", d["status_url"], want)
				}
				return true
			}
		}
		return false
	})
}
