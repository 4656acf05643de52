package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestApproverSeesHeaders: an agent asks with an innocent body and headers
// that change what the tool does. The approvals API, the approval page
// and the notification show the headers approving sends, a credential's
// value hidden; once approved, the tool server gets them all, unchanged.
func TestApproverSeesHeaders(t *testing.T) {
	redisAddr := testRedis(t)
	files, up := newNotes(t)
	ev := newEvents(t)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": e2eConfig(up.URL, "redis://"+redisAddr, newPrefix(), ev.URL),
		"rules.yaml":    seedRulesYAML,
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

	res, body := agentCall(t, a.proxy, "write_note", `{"path":"notes/today.txt","content":"reviewed"}`,
		"Prefer", "respond-async", "X-Target-Override", "/etc/shadow", "X-Api-Key", "someone-elses-key")
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("write: %d %s", res.StatusCode, body)
	}
	id := res.Header.Get("X-Toolgate-Call-Id")

	// The approvals API lists them in the call's info.
	req, _ := http.NewRequest("GET", a.approvals+"/api/approvals/"+id, nil)
	req.Header.Set("Authorization", "Bearer alice-key-0123456789")
	detail, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(detail.Body)
	detail.Body.Close()
	var d struct {
		Info struct {
			Headers struct {
				List []map[string]any `json:"list"`
			} `json:"headers"`
		} `json:"info"`
	}
	if err := json.Unmarshal(raw, &d); err != nil || detail.StatusCode != 200 {
		t.Fatalf("API detail: %d %v %s", detail.StatusCode, err, raw)
	}
	var names []string
	byName := map[string]map[string]any{}
	for _, h := range d.Info.Headers.List {
		names = append(names, h["name"].(string))
		byName[h["name"].(string)] = h
	}
	if diff := cmp.Diff([]string{"Accept-Encoding", "Content-Type", "User-Agent", "X-Api-Key", "X-Target-Override"}, names); diff != "" {
		t.Errorf("API headers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"name": "X-Api-Key", "hidden": true, "size": float64(len("someone-elses-key"))}, byName["X-Api-Key"]); diff != "" {
		t.Errorf("X-Api-Key (-want +got):\n%s", diff)
	}
	if byName["X-Target-Override"]["value"] != "/etc/shadow" {
		t.Errorf("X-Target-Override listed as %v", byName["X-Target-Override"])
	}
	if strings.Contains(string(raw), "someone-elses-key") {
		t.Error("the API shows the credential's value")
	}

	// The page, opened by the notified link, shows them too.
	link, token := relink(t, ev.approvalURL(t, id), a.approvals)
	pg, err := http.Get(link + "?token=" + url.QueryEscape(token))
	if err != nil || pg.StatusCode != 200 {
		t.Fatalf("approval page: %v %v", pg, err)
	}
	html, _ := io.ReadAll(pg.Body)
	pg.Body.Close()
	for _, want := range []string{
		`<h2 id="headers">Headers sent</h2>`,
		"<b>X-Api-Key</b>: <span class=\"mark\">(hidden: 17 bytes)</span>\n",
		"<b>X-Target-Override</b>: /etc/shadow\n",
		"Approving forwards the request above, as stored: its arguments and headers, once.",
	} {
		if !strings.Contains(string(html), want) {
			t.Errorf("approval page lacks %q", want)
		}
	}
	if strings.Contains(string(html), "someone-elses-key") {
		t.Error("the page shows the credential's value")
	}
	for _, data := range ev.requested(t) {
		if data["call_id"] == id {
			names, _ := data["header_names"].([]any)
			if !slices.Contains(names, any("X-Target-Override")) || !slices.Contains(names, any("X-Api-Key")) {
				t.Errorf("the event names headers %v", data["header_names"])
			}
		}
	}

	// Approved, the call sends the agent's headers as before.
	if status := approveAPI(t, a.approvals, id, "alice-key-0123456789"); status != 200 {
		t.Fatalf("approve: %d", status)
	}
	// The upstream records a request before its handler writes the
	// file, so wait for the write itself, then look at what was sent.
	testkit.WaitFor(t, "the approved write", func() bool {
		content, _ := files.Read("notes/today.txt")
		return content == "reviewed"
	})
	if n := len(up.Requests()); n != 1 {
		t.Fatalf("the tool server got %d requests, want 1", n)
	}
	got := up.Requests()[0].Header
	if got.Get("X-Target-Override") != "/etc/shadow" || got.Get("X-Api-Key") != "someone-elses-key" {
		t.Errorf("the tool server got headers %v", got)
	}
}

// TestVendorCredentialHidden: a credential header whose name is a
// vendor's own (Cloudflare's X-Auth-Key) is neither shown by the
// approvals API nor written to the decision log, and is still sent once
// approved; Idempotency-Key, which looks like one, stays visible and
// still attaches a retry to its call.
func TestVendorCredentialHidden(t *testing.T) {
	const secret = "cf-global-key-0123"
	redisAddr := testRedis(t)
	_, up := newNotes(t)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": e2eConfig(up.URL, "redis://"+redisAddr, newPrefix(), "http://127.0.0.1:1"),
		"rules.yaml":    seedRulesYAML,
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

	call := func(key string) string {
		t.Helper()
		res, body := agentCall(t, a.proxy, "write_note", `{"path":"notes/k.txt","content":"k"}`,
			"Prefer", "respond-async", "X-Auth-Key", secret, "Idempotency-Key", key)
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("write with key %s: %d %s", key, res.StatusCode, body)
		}
		return res.Header.Get("X-Toolgate-Call-Id")
	}
	id := call("idem-1")
	if again := call("idem-1"); again != id {
		t.Errorf("a retry with the same Idempotency-Key is call %s, want %s", again, id)
	}
	if other := call("idem-2"); other == id {
		t.Error("a call with another Idempotency-Key attached to the first")
	}

	code, raw := apiRequest(t, "GET", a.approvals+"/api/approvals/"+id, "alice-key-0123456789", "")
	var d struct {
		Info struct {
			Headers struct {
				List []map[string]any `json:"list"`
			} `json:"headers"`
			PolicyInput struct {
				HTTP struct {
					Headers map[string][]string `json:"headers"`
				} `json:"http"`
			} `json:"policy_input"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil || code != 200 {
		t.Fatalf("API detail: %d %v %s", code, err, raw)
	}
	if strings.Contains(raw, secret) {
		t.Errorf("the approvals API shows X-Auth-Key's value: %s", raw)
	}
	byName := map[string]map[string]any{}
	for _, h := range d.Info.Headers.List {
		byName[h["name"].(string)] = h
	}
	if h := byName["X-Auth-Key"]; h["hidden"] != true {
		t.Errorf("X-Auth-Key listed as %v, want hidden", h)
	}
	if h := byName["Idempotency-Key"]; h["value"] != "idem-1" {
		t.Errorf("Idempotency-Key listed as %v, want shown", h)
	}
	if in := d.Info.PolicyInput.HTTP.Headers; in["idempotency-key"] == nil || len(in["x-auth-key"]) != 1 || in["x-auth-key"][0] != "[hidden]" {
		t.Errorf("policy input headers %v: want idempotency-key, and x-auth-key by name only", in)
	}

	testkit.WaitFor(t, "the decision event", func() bool { ev, _ := eventsOf(a.stderr.String(), id); return ev != nil })
	if strings.Contains(a.stderr.String(), secret) {
		t.Error("the decision log holds X-Auth-Key's value")
	}

	if status := approveAPI(t, a.approvals, id, "alice-key-0123456789"); status != 200 {
		t.Fatalf("approve: %d", status)
	}
	testkit.WaitFor(t, "the approved write", func() bool { return len(up.Requests()) == 1 })
	if h := up.Requests()[0].Header; h.Get("X-Auth-Key") != secret || h.Get("Idempotency-Key") != "idem-1" {
		t.Errorf("the tool server got headers %v", h)
	}
}
