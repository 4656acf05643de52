package proxy

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/policy"
)

// TestResourceSubscriptionsDenied: subscriptions/listen (2026-07-28) with
// params.notifications.resourceSubscriptions is resources/subscribe by
// another name: the policy sees its params, the shipped library denies it
// as it denies resources/subscribe, and the upstream subscribes to
// nothing. Case variants of the members a Go server would read as those
// are refused.
func TestResourceSubscriptionsDenied(t *testing.T) {
	var mu sync.Mutex
	var subscribed []string
	up := &mcpUpstream{calls: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v0.0.1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			mu.Lock()
			subscribed = append(subscribed, r.Params.URI)
			mu.Unlock()
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "files", URITemplate: "file:///{+path}"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "secret"}}}, nil
		})
	up.serve(t, srv, mcp.StreamableHTTPOptions{Stateless: true})

	var inputs []*policy.Input
	var imu sync.Mutex
	eng := mcpEngine(t)
	env := newMCPEnvWith(t, up, func(c *Config) {
		c.Decider = deciderFunc(func(ctx context.Context, in *policy.Input) (policy.Decision, error) {
			imu.Lock()
			inputs = append(inputs, in)
			imu.Unlock()
			return eng.Decide(ctx, in)
		})
	})
	h2026 := []string{"Mcp-Protocol-Version", "2026-07-28"}

	// 1. resources/read of the URI: denied (no rule allows the pseudo-tool).
	res, _, raw := postMCP(t, env, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{`+mcpMeta2026+`,"uri":"file:///secrets/key"}}`,
		append(h2026, "Mcp-Method", "resources/read", "Mcp-Name", "file:///secrets/key")...)
	if res.Header.Get(headerDecision) != "deny" {
		t.Fatalf("resources/read: status %d %s, want a deny", res.StatusCode, raw)
	}
	// 2. resources/subscribe: denied by the library.
	res, _, raw = postMCP(t, env, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{`+mcpMeta2026+`,"uri":"file:///secrets/key"}}`,
		append(h2026, "Mcp-Method", "resources/subscribe")...)
	if res.Header.Get(headerDecision) != "deny" {
		t.Fatalf("resources/subscribe: status %d %s, want a deny", res.StatusCode, raw)
	}
	up.Reset()

	// 3. subscriptions/listen with the same URI: denied too.
	body := `{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{` + mcpMeta2026 +
		`,"notifications":{"resourceSubscriptions":["file:///secrets/key"]}}}`
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if d := resp.Header.Get(headerDecision); d != "deny" {
		t.Errorf("subscriptions/listen with a resource subscription: status %d, decision %q, want a deny", resp.StatusCode, d)
	}
	sc := bufio.NewScanner(resp.Body)
	acked := ""
	for sc.Scan() {
		if strings.Contains(sc.Text(), "subscriptions/acknowledged") {
			acked = sc.Text()
			break
		}
	}
	cancel()
	if acked != "" {
		t.Errorf("the agent got the server's acknowledgement: %s", acked)
	}
	mu.Lock()
	got := append([]string(nil), subscribed...)
	mu.Unlock()
	imu.Lock()
	last := inputs[len(inputs)-1]
	imu.Unlock()
	if n, _ := last.MCP.Params["notifications"].(map[string]any); n == nil || n["resourceSubscriptions"] == nil {
		t.Errorf("the policy input of subscriptions/listen holds no subscriptions: params %v", last.MCP.Params)
	}
	if len(got) > 0 {
		t.Errorf("the upstream's SubscribeHandler ran for %q", got)
	}
	for _, bad := range []string{
		`"Notifications":{"resourceSubscriptions":["file:///secrets/key"]}`,
		`"notifications":{"ResourceSubscriptions":["file:///secrets/key"]}`,
		`"notifications":{"resourceſubscriptions":["file:///secrets/key"]}`,
	} {
		res, msg, raw := postMCP(t, env, `{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{`+mcpMeta2026+`,`+bad+`}}`,
			append(h2026, "Mcp-Method", "subscriptions/listen")...)
		if res.StatusCode != http.StatusBadRequest || msg.Error == nil || msg.Error.Code != rpcInvalidParams {
			t.Errorf("%s: status %d %s, want 400 invalid params", bad, res.StatusCode, raw)
		}
	}
	// A batch member is decided on its method alone: a batch holding
	// subscriptions/listen is refused whole, as one holding a tool call is.
	batch := `[{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["file:///secrets/key"]}}},{"jsonrpc":"2.0","id":6,"method":"ping"}]`
	res, msg, raw := postMCP(t, env, batch, "Mcp-Protocol-Version", "2025-03-26")
	if res.StatusCode != http.StatusBadRequest || msg.Error == nil || msg.Error.Code != rpcInvalidRequest {
		t.Errorf("a batch holding subscriptions/listen: status %d %s, want 400 invalid request", res.StatusCode, raw)
	}
	if n := len(up.Requests()); n != 0 {
		t.Errorf("the upstream received %d messages, want none", n)
	}
}

// TestCompletionDecidedAsPseudoTool: completion/complete tells what a
// server holds under a resource template or a prompt, so it is a call of
// the pseudo-tool mcp:completion/resource (or mcp:completion/prompt) on
// what it completes: nothing
// allows it until a rule does, and a deny row on the template's URIs
// keeps the server's completion handler from running.
func TestCompletionDecidedAsPseudoTool(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	up := &mcpUpstream{calls: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v0.0.1"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, r *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			mu.Lock()
			asked = append(asked, r.Params.Ref.URI)
			mu.Unlock()
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"prod-db-password.txt", "aws-root-key.txt"}}}, nil
		},
	})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "secrets", URITemplate: "file:///secrets/{name}"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "secret"}}}, nil
		})
	up.serve(t, srv, mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	eng := mcpEngineRules(t, `{id: c, effect: allow, tool: "mcp:completion/resource", target: "file:///docs/**"}`, `{id: p, effect: allow, tool: "mcp:completion/prompt", target: "*"}`)
	env := newMCPEnvWith(t, up, func(c *Config) { c.Decider = eng })
	res, _, raw := postMCP(t, env, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{`+mcpMeta2026+`,"uri":"file:///secrets/prod-db-password.txt"}}`,
		"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "resources/read", "Mcp-Name", "file:///secrets/prod-db-password.txt")
	if res.Header.Get(headerDecision) != "deny" {
		t.Fatalf("resources/read: %s, want a deny", raw)
	}
	res, _, raw = postMCP(t, env, `{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{`+mcpMeta2026+
		`,"ref":{"type":"ref/resource","uri":"file:///secrets/{name}"},"argument":{"name":"name","value":""}}}`,
		"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "completion/complete")
	if res.Header.Get(headerDecision) != "deny" || strings.Contains(string(raw), "prod-db-password") {
		t.Errorf("completion/complete on file:///secrets/{name}: decision %q, answer %s, want a deny", res.Header.Get(headerDecision), raw)
	}
	res, _, raw = postMCP(t, env, `{"jsonrpc":"2.0","id":3,"method":"completion/complete","params":{`+mcpMeta2026+
		`,"ref":{"type":"ref/resource","uri":"file:///docs/{name}"},"argument":{"name":"name","value":""}}}`,
		"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "completion/complete")
	if res.Header.Get(headerDecision) != "allow" || !strings.Contains(string(raw), "aws-root-key.txt") {
		t.Errorf("completion/complete on file:///docs/{name}, allowed by a rule: decision %q, answer %s", res.Header.Get(headerDecision), raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != "file:///docs/{name}" {
		t.Errorf("the upstream's completion handler ran for %q, want only the allowed template", asked)
	}
}
