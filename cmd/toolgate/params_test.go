package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestApproverSeesOtherParams: an agent asks for a harmless write_note
// whose params also carry _meta, inputResponses and requestState, which
// the tool server (the official Go SDK) hands its tool. The approvals API,
// the approval page and the notification show them; approved, the tool
// server gets the message as it was parked, and its tool those members.
func TestApproverSeesOtherParams(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []*mcp.CallToolParamsRaw // what the tool was handed
	)
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_note", Description: "write a note"},
		func(_ context.Context, req *mcp.CallToolRequest, in struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		},
		) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			seen = append(seen, req.Params)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + in.Path}}}, nil, nil
		})
	up := testkit.NewUpstream(t, testkit.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})))
	ev := newEvents(t)
	slack := testkit.NewUpstream(t, nil)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
public_url: http://approvals.invalid
upstreams:
  - {name: notes, url: ` + up.URL + `, protocol: mcp, prefix: /, mcp_path: /mcp}
identity:
  api_keys: [{key: agent-key-0123456789, subject: agent-42}]
policy:
  rules_file: ./rules.yaml
pending:
  hold: 1s
approvals:
  secret: ` + testSecret + `
  approvers: [{name: alice, key: alice-key-0123456789}, {name: bot, key: bot-key-0123456789}]
  notify: [{url: ` + ev.URL + `, format: cloudevents}, {url: ` + slack.URL + `, format: slack}]
shutdown_grace: 2s
`,
		"rules.yaml": "rules:\n  - {id: notes, effect: ask, tool: write_note, target: \"notes/*\"}\n",
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_note","arguments":{"path":"notes/a.txt","content":"harmless"},` +
		`"_meta":{"acme/overwrite_path":"/etc/passwd","progressToken":"p-1"},` +
		`"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"rs-1"}}`
	post := func(body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", a.proxy+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer agent-key-0123456789")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Prefer", "respond-async")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var msg struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(raw, &msg); err != nil || res.StatusCode != 200 {
			t.Fatalf("tools/call: %d %s (%v)", res.StatusCode, raw, err)
		}
		return msg.Result
	}
	meta, _ := post(body)["_meta"].(map[string]any)
	id, _ := meta["toolgate/call_id"].(string)
	if id == "" {
		t.Fatalf("the ask answered %v, want a pending call", meta)
	}

	// The approvals API shows them in the call's info.
	req, _ := http.NewRequest("GET", a.approvals+"/api/approvals/"+id, nil)
	req.Header.Set("Authorization", "Bearer alice-key-0123456789")
	code, raw := send(t, http.DefaultClient, req)
	var d struct {
		Info struct {
			OtherParams struct {
				List []struct {
					Name  string          `json:"name"`
					Value json.RawMessage `json:"value"`
				} `json:"list"`
			} `json:"other_params"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil || code != 200 {
		t.Fatalf("API detail: %d %v %s", code, err, raw)
	}
	got := map[string]string{}
	for _, p := range d.Info.OtherParams.List {
		got[p.Name] = string(p.Value)
	}
	if diff := cmp.Diff(map[string]string{
		"_meta":          `{"acme/overwrite_path":"/etc/passwd"}`,
		"inputResponses": `{"confirm":{"action":"accept","content":{"ok":true}}}`,
		"requestState":   `"rs-1"`,
	}, got); diff != "" {
		t.Errorf("API other_params (-want +got):\n%s", diff)
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
		`<h2 id="params">Other parameters sent</h2>`,
		`&#34;acme/overwrite_path&#34;: <span class="str">&#34;/etc/passwd&#34;</span>`,
		`&#34;requestState&#34;: <span class="str">&#34;rs-1&#34;</span>`,
		"Approving forwards the request above, as stored: its arguments, other parameters and headers, once.",
	} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("approval page lacks %q", want)
		}
	}
	for _, data := range ev.requested(t) {
		if data["call_id"] == id {
			if diff := cmp.Diff([]any{"_meta", "inputResponses", "requestState"}, data["param_names"]); diff != "" {
				t.Errorf("the event's param_names (-want +got):\n%s", diff)
			}
		}
	}

	// The Slack message shows them with their values, as the record
	// holds them.
	testkit.WaitFor(t, "the Slack message", func() bool { return len(slack.Requests()) > 0 })
	var msg struct {
		Blocks []struct {
			Text *struct{ Text string } `json:"text"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(slack.Requests()[0].Body, &msg); err != nil {
		t.Fatalf("Slack message: %v", err)
	}
	wantSlack := "*Other parameters sent (3)*\n```\n" +
		`_meta: {"acme/overwrite_path":"/etc/passwd"}` + "\n" +
		`inputResponses: {"confirm":{"action":"accept","content":{"ok":true}}}` + "\n" +
		`requestState: "rs-1"` + "\n```"
	found := false
	for _, b := range msg.Blocks {
		found = found || b.Text != nil && b.Text.Text == wantSlack
	}
	if !found {
		t.Errorf("the Slack message lacks %q:\n%s", wantSlack, slack.Requests()[0].Body)
	}

	// Approved, the call sends the message as parked.
	if status := approveAPI(t, a.approvals, id, "alice-key-0123456789"); status != 200 {
		t.Fatalf("approve: %d", status)
	}
	testkit.WaitFor(t, "the approved write", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 1
	})
	var sent []string
	for _, r := range up.Requests() {
		if bytes.Contains(r.Body, []byte(`"tools/call"`)) {
			sent = append(sent, string(r.Body))
		}
	}
	if len(sent) != 1 || sent[0] != body {
		t.Errorf("the tool server got %q, want the parked message %q", sent, body)
	}
	mu.Lock()
	p := seen[0]
	mu.Unlock()
	if p.Meta["acme/overwrite_path"] != "/etc/passwd" || p.RequestState != "rs-1" || p.InputResponses["confirm"] == nil {
		t.Errorf("the tool was handed _meta %v, requestState %q, inputResponses %v", p.Meta, p.RequestState, p.InputResponses)
	}
}
