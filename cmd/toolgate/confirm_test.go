package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testkit"
)

// confirmRules: write_note under confirm/ may be confirmed by its
// requester; under team/ the requester and group sre are named, so only
// an sre approver can approve it.
const confirmRules = `rules:
  - {id: self, effect: ask, tool: write_note, target: "confirm/*", approvers: {requester: true}}
  - {id: team, effect: ask, tool: write_note, target: "team/*", approvers: {requester: true, groups: [sre]}}
`

// confirmUpstream is an MCP tool server (the official Go SDK) whose
// write_note counts its runs.
func confirmUpstream(t *testing.T, stateless bool) (string, *atomic.Int32) {
	t.Helper()
	var runs atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	type args struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "write_note", Description: "write a note"},
		func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
			runs.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote " + in.Path}}}, nil, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(up.Close)
	t.Cleanup(up.CloseClientConnections)
	return up.URL, &runs
}

// TestRequesterConfirmation: the agent's MCP client (the Go SDK,
// declaring URL elicitation) is handed the call's confirmation page; its
// human opens it and confirms, and the call runs once, recorded as
// decided by requester:<subject>. An elicitation answered by the client
// without the page decides nothing; a call that names other approvers is
// not offered, and its page refuses the requester. Both protocol eras.
func TestRequesterConfirmation(t *testing.T) {
	for _, era := range []struct {
		name      string
		stateless bool
	}{{"session", false}, {"stateless", true}} {
		t.Run(era.name, func(t *testing.T) {
			upURL, runs := confirmUpstream(t, era.stateless)
			dir := writeFiles(t, t.TempDir(), map[string]string{
				"toolgate.yaml": `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
upstreams:
  - {name: notes, url: ` + upURL + `, protocol: mcp, prefix: /, mcp_path: /mcp}
identity:
  api_keys:
    - {key: agent-key-0123456789, subject: agent-42}
policy:
  rules_file: ./rules.yaml
pending:
  hold: 1s
approvals:
  secret: ` + testSecret + `
  approvers:
    - {name: bot, key: bot-key-0123456789}
shutdown_grace: 2s
`,
				"rules.yaml": confirmRules,
			})
			r := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

			var (
				mu    sync.Mutex
				asked []string // the URLs the client was handed
				open  bool     // the human opens the page and confirms
				pages []string // what the page answered
			)
			handler := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, req.Params.URL)
				confirm := open
				mu.Unlock()
				if confirm {
					page := confirmOnPage(t, req.Params.URL, r.approvals)
					mu.Lock()
					pages = append(pages, page)
					mu.Unlock()
				}
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, &mcp.ClientOptions{
				Capabilities:       &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
				ElicitationHandler: handler,
			})
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
				Endpoint:   r.proxy + "/mcp",
				HTTPClient: &http.Client{Transport: bearer{"agent-key-0123456789"}},
				MaxRetries: -1,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			write := func(path string) *mcp.CallToolResult {
				t.Helper()
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"path": path, "content": "hi"}})
				if err != nil {
					t.Fatalf("write_note %s: %v", path, err)
				}
				return res
			}

			// The client answers without its human: the call still waits.
			res := write("confirm/a")
			id := callIDOf(t, res)
			mu.Lock()
			if len(asked) != 1 || !strings.Contains(asked[0], "/confirm/"+id+"?token=") {
				t.Errorf("the client was handed %q, want call %s's confirmation page", asked, id)
			}
			mu.Unlock()
			if !res.IsError || callState(t, r.approvals, id) != "waiting" {
				t.Errorf("after the client's own answer: %s, call %s; want the pending result and waiting", textOf(res), callState(t, r.approvals, id))
			}

			// The human opens the page and confirms: the call runs once.
			mu.Lock()
			open = true
			mu.Unlock()
			res = write("confirm/b")
			if res.IsError || textOf(res) != "wrote confirm/b" {
				t.Errorf("confirmed call answered %s, want the tool's result", textOf(res))
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("write_note ran %d times, want 1", n)
			}
			// The call can run (the page's POST approved it) before the
			// handler has read the page's answer: wait for the handler.
			testkit.WaitFor(t, "the human to read the page's answer", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(pages) == 1
			})
			mu.Lock()
			if !strings.Contains(pages[0], "Confirmed") {
				t.Errorf("the page answered %q, want Confirmed", pages)
			}
			mu.Unlock()
			mu.Lock()
			confirmed := idInLink(t, asked[len(asked)-1])
			mu.Unlock()
			c := getAPICall(t, r.approvals, confirmed)
			if c.DecidedBy != "requester:agent-42" || c.Status != "executed" {
				t.Errorf("the confirmed call is %s, decided by %q; want executed by requester:agent-42", c.Status, c.DecidedBy)
			}

			// Other approvers named: not offered; the page refuses the requester.
			mu.Lock()
			before := len(asked)
			mu.Unlock()
			res = write("team/a")
			id = callIDOf(t, res)
			mu.Lock()
			if len(asked) != before {
				t.Errorf("a call naming group sre was offered to its requester: %q", asked[before:])
			}
			mu.Unlock()
			if n := runs.Load(); n != 1 {
				t.Errorf("write_note ran %d times, want 1", n)
			}
			if callState(t, r.approvals, id) != "waiting" {
				t.Errorf("the team call is %s, want waiting", callState(t, r.approvals, id))
			}
		})
	}
}

// bearer adds an agent's API key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

var (
	formTokenRE = regexp.MustCompile(`name="token" value="([^"]+)"`)
	callIDRE    = regexp.MustCompile(`call ([A-Z0-9]{26})`)
)

// confirmOnPage is the human: it opens the confirmation link (on this
// replica's approvals listener), reads the form and confirms; it returns
// the page that answered.
func confirmOnPage(t *testing.T, link, approvalsBase string) string {
	u, err := url.Parse(link)
	if err != nil {
		t.Error(err)
		return ""
	}
	page := approvalsBase + u.Path + "?" + u.RawQuery
	res, err := http.Get(page)
	if err != nil {
		t.Error(err)
		return ""
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := formTokenRE.FindSubmatch(body)
	if res.StatusCode != http.StatusOK || m == nil || !strings.Contains(string(body), `value="approve"`) {
		t.Errorf("GET %s: %d, want the confirmation form\n%s", page, res.StatusCode, body)
		return ""
	}
	form := url.Values{"token": {string(m[1])}, "decision": {"approve"}}
	res, err = http.PostForm(approvalsBase+u.Path, form)
	if err != nil {
		t.Error(err)
		return ""
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("POST the confirmation: %d\n%s", res.StatusCode, body)
	}
	return string(body)
}

// idInLink is the call ID of a confirmation link.
func idInLink(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/confirm/")
}

// callIDOf reads toolgate's call ID from a tool result's _meta, or from
// its text.
func callIDOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if id, ok := res.Meta["toolgate/call_id"].(string); ok {
		return id
	}
	if m := callIDRE.FindStringSubmatch(textOf(res)); m != nil {
		return m[1]
	}
	t.Fatalf("no call ID in %s", textOf(res))
	return ""
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// callState is the call's status as the approvals API shows it.
func callState(t *testing.T, approvalsBase, id string) string {
	t.Helper()
	return getAPICall(t, approvalsBase, id).Status
}
