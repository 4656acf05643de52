package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// The stateless revision's client, against a stateless upstream.
var extEra = mcpEras[2] // stateless/json, 2026-07-28

// extClient speaks raw JSON-RPC of MCP 2026-07-28 to toolgate (the go-sdk
// client has no tasks): every request carries its own client capabilities.
type extClient struct {
	t    *testing.T
	env  *mcpEnv
	auth bool
	// caps is the request's clientCapabilities (JSON).
	caps string
	next int
}

const (
	capsTasks        = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	capsTasksElicit  = `{"extensions":{"io.modelcontextprotocol/tasks":{}},"elicitation":{"url":{}}}`
	capsElicit       = `{"elicitation":{"form":{},"url":{}}}`
	capsNone         = `{}`
	extVersionHeader = "2026-07-28"
)

// post sends method with params (an object without _meta; the client's
// _meta is added) and the routing headers; name is Mcp-Name ("" for none).
func (ec *extClient) post(method, name, params string) (*http.Response, mcpRPC, []byte) {
	ec.t.Helper()
	ec.next++
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + ec.caps + `}`
	params = strings.TrimSpace(params)
	if params == "{}" {
		params = "{" + meta + "}"
	} else {
		params = "{" + meta + "," + strings.TrimPrefix(params, "{")
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, ec.next, method, params)
	h := []string{"Mcp-Protocol-Version", extVersionHeader, "Mcp-Method", method}
	if name != "" {
		h = append(h, "Mcp-Name", name)
	}
	if ec.auth {
		h = append(h, "Authorization", "Bearer agent-key")
	}
	return postMCP(ec.t, ec.env, body, h...)
}

func (ec *extClient) call(method, name, params string) map[string]any {
	ec.t.Helper()
	res, msg, raw := ec.post(method, name, params)
	if res.StatusCode != http.StatusOK || msg.Result == nil || msg.Error != nil {
		ec.t.Fatalf("%s %s: status %d body %s, want a result", method, params, res.StatusCode, raw)
	}
	wantCallHeaders(ec.t, res, method)
	return msg.Result
}

func (ec *extClient) fails(method, name, params string, code int) {
	ec.t.Helper()
	res, msg, raw := ec.post(method, name, params)
	if msg.Error == nil || msg.Error.Code != code {
		ec.t.Fatalf("%s %s: status %d body %s, want JSON-RPC error %d", method, params, res.StatusCode, raw, code)
	}
	wantCallHeaders(ec.t, res, method)
}

func (ec *extClient) get(id string) map[string]any {
	ec.t.Helper()
	return ec.call("tasks/get", id, `{"taskId":"`+id+`"}`)
}

func (ec *extClient) writeNote(path string) map[string]any {
	ec.t.Helper()
	return ec.call("tools/call", "write_note", `{"name":"write_note","arguments":{"path":"`+path+`","content":"hi"}}`)
}

// wantExtTask checks a task of the extension: its ID, status, result type
// and fields.
func wantExtTask(t *testing.T, task map[string]any, resultType, id, status string) {
	t.Helper()
	if task["resultType"] != resultType || task["taskId"] != id || task["status"] != status {
		t.Errorf("task %v, want resultType %s, id %s, status %s", task, resultType, id, status)
	}
	for _, k := range []string{"createdAt", "lastUpdatedAt", "ttlMs", "statusMessage"} {
		if _, has := task[k]; !has {
			t.Errorf("task %v has no %s", task, k)
		}
	}
	if _, has := task["ttl"]; has {
		t.Errorf("task %v has the 2025-11-25 ttl", task)
	}
}

// TestMCPTaskExtension: a 2026-07-28 tools/call that declares the Tasks
// extension and is decided ask becomes a task whose ID is the call ID;
// tasks/get follows it through approval (the tool runs once), rejection
// (completed, isError, with the comment) and cancellation; the extension's
// own errors; tasks that are not toolgate's go to the upstream.
func TestMCPTaskExtension(t *testing.T) {
	env := newMCPEnv(t, extEra)
	ec := &extClient{t: t, env: env, auth: true, caps: capsTasks}

	disc := ec.call("server/discover", "", `{}`)
	caps, _ := disc["capabilities"].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	if _, ok := ext[tasksExtension]; !ok || caps["tools"] == nil {
		t.Errorf("server/discover capabilities %v, want the upstream's with the Tasks extension", caps)
	}

	task := ec.writeNote("notes/a")
	pc, ok := env.nextParked(time.Second)
	if !ok {
		t.Fatal("nothing was parked")
	}
	wantExtTask(t, task, "task", pc.ID, "working")
	if task["pollIntervalMs"] == nil {
		t.Errorf("task %v has no pollIntervalMs", task)
	}
	wantExtTask(t, ec.get(pc.ID), "complete", pc.ID, "working")

	// The extension's errors: no capability on the request, a routing
	// header that is not the task, another principal.
	bare := &extClient{t: t, env: env, auth: true, caps: capsNone}
	bare.fails("tasks/get", pc.ID, `{"taskId":"`+pc.ID+`"}`, rpcMissingCapability)
	bare.fails("tasks/cancel", pc.ID, `{"taskId":"`+pc.ID+`"}`, rpcMissingCapability)
	if got, _ := env.store.Get(mcpCtx(t), pc.ID); got.State != pending.Waiting {
		t.Fatalf("tasks/cancel without the capability left the call %s, want waiting", got.State)
	}
	res, msg, raw := ec.post("tasks/get", "other", `{"taskId":"`+pc.ID+`"}`)
	if res.StatusCode != http.StatusBadRequest || msg.Error == nil || msg.Error.Code != rpcHeaderMismatch {
		t.Errorf("tasks/get with another Mcp-Name: status %d body %s, want 400 and %d", res.StatusCode, raw, rpcHeaderMismatch)
	}
	// Another principal, with the extension declared or not: answered as
	// a task ID nobody was given.
	for _, caps := range []string{capsTasks, capsNone} {
		other := &extClient{t: t, env: env, caps: caps}
		for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
			wantAsUnknown(t, func(id string) (*http.Response, mcpRPC, []byte) {
				return other.post(method, id, `{"taskId":"`+id+`"}`)
			}, method, pc.ID)
		}
	}
	if got, _ := env.store.Get(mcpCtx(t), pc.ID); got.State != pending.Waiting {
		t.Fatalf("another principal's tasks/cancel left the call %s, want waiting", got.State)
	}
	if env.up.sawToolCall("write_note") {
		t.Fatal("the parked call reached the upstream before approval")
	}

	// Approved: the next tasks/get runs it (no sweeper), once; one
	// without the capability is refused before it runs anything.
	if _, err := env.store.Decide(mcpCtx(t), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	bare.fails("tasks/get", pc.ID, `{"taskId":"`+pc.ID+`"}`, rpcMissingCapability)
	if n := env.up.invoked("write_note"); n != 0 {
		t.Fatalf("tasks/get without the capability ran the call (%d)", n)
	}
	for range 2 {
		done := ec.get(pc.ID)
		wantExtTask(t, done, "complete", pc.ID, "completed")
		r, _ := done["result"].(map[string]any)
		if resultText(r) != "wrote notes/a: hi" || r["isError"] == true {
			t.Errorf("completed task's result %v, want the upstream's", r)
		}
	}
	if n := env.up.invoked("write_note"); n != 1 {
		t.Errorf("write_note ran %d times, want 1", n)
	}
	// toolgate holds the task: the upstream was asked to run the call,
	// without the extension declared (its other capabilities kept);
	// approvers were shown the params as sent, the declaration included.
	if body := forwardedCall(t, env, "write_note"); bytes.Contains(body, []byte(tasksExtension)) ||
		!bytes.Contains(body, []byte(`"io.modelcontextprotocol/clientCapabilities":{"extensions":{}}},"name":"write_note","arguments":{"path":"notes/a","content":"hi"}}`)) {
		t.Errorf("the approved call reached the upstream as %s, want it without the Tasks extension and otherwise as sent", body)
	}
	if shown, _ := json.Marshal(infoOf(pc).OtherParams); !bytes.Contains(shown, []byte(tasksExtension)) {
		t.Errorf("approvers were shown the params %s, want them as sent, the Tasks extension included", shown)
	}
	if ack := ec.call("tasks/cancel", pc.ID, `{"taskId":"`+pc.ID+`"}`); ack["resultType"] != "complete" || len(ack) != 1 {
		t.Errorf("tasks/cancel of a completed task answered %v, want the empty acknowledgement", ack)
	}

	// Rejected: completed, with the isError result a deny gets.
	rej := ec.writeNote("notes/b")
	rpc, _ := env.nextParked(time.Second)
	if _, err := env.store.Decide(mcpCtx(t), rpc.ID, pending.Decision{To: pending.Rejected, By: "bob", Comment: "not on a Friday"}); err != nil {
		t.Fatal(err)
	}
	got := ec.get(fmt.Sprint(rej["taskId"]))
	wantExtTask(t, got, "complete", rpc.ID, "completed")
	if r, _ := got["result"].(map[string]any); r["isError"] != true || !strings.Contains(resultText(r), "rejected by bob: not on a Friday") {
		t.Errorf("rejected task's result %v, want isError with the comment", got["result"])
	}

	// Cancelled while waiting; the acknowledgement is empty.
	ec.writeNote("notes/c")
	can, _ := env.nextParked(time.Second)
	if ack := ec.call("tasks/cancel", can.ID, `{"taskId":"`+can.ID+`"}`); ack["resultType"] != "complete" {
		t.Errorf("tasks/cancel answered %v", ack)
	}
	wantExtTask(t, ec.get(can.ID), "complete", can.ID, "cancelled")
	// tasks/update is acknowledged; its answers change nothing.
	if ack := ec.call("tasks/update", can.ID, `{"taskId":"`+can.ID+`","inputResponses":{}}`); ack["resultType"] != "complete" {
		t.Errorf("tasks/update answered %v", ack)
	}
	env.server.life.SweepOnce(mcpCtx(t), 0)
	if n := env.up.invoked("write_note"); n != 1 {
		t.Errorf("write_note ran %d times, want 1 (only the approved call)", n)
	}

	// A task ID toolgate never gave out is the upstream's.
	ec.post("tasks/get", "upstream-task-1", `{"taskId":"upstream-task-1"}`)
	seen := false
	for _, req := range env.up.got() {
		seen = seen || (req.RPCMethod == "tasks/get" && strings.Contains(string(req.Body), "upstream-task-1"))
	}
	if !seen {
		t.Error("tasks/get of the upstream's task did not reach the upstream")
	}
}

// TestMCPTaskExtensionNotDeclared: a 2026-07-28 tools/call that does not
// declare the extension is held as any ask, never answered with a task.
func TestMCPTaskExtensionNotDeclared(t *testing.T) {
	env := newMCPEnv(t, extEra, func(c *Config) { c.Hold = 100 * time.Millisecond })
	ec := &extClient{t: t, env: env, auth: true, caps: capsNone}
	r := ec.writeNote("notes/n")
	if r["resultType"] == "task" || r["isError"] != true || !strings.Contains(resultText(r), "pending") {
		t.Errorf("tools/call without the extension answered %v, want the pending isError result", r)
	}
}

// confirmEngine asks for write_note: under confirm/ its requester may
// confirm it; under team/ the requester and group sre are named, so only
// sre may approve.
func confirmEngine(t *testing.T) *policy.Engine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	err := os.WriteFile(path, []byte(`rules:
  - {id: c1, effect: ask, tool: write_note, target: "confirm/*", approvers: {requester: true}}
  - {id: c2, effect: ask, tool: write_note, target: "team/*", approvers: {requester: true, groups: [sre]}}
  - {id: c3, effect: ask, tool: write_note, target: "notes/*"}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, RulesFile: path})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func confirmEnv(t *testing.T) *mcpEnv {
	return newMCPEnv(t, extEra, func(c *Config) {
		c.Decider = confirmEngine(t)
		c.Hold = 100 * time.Millisecond
		c.ConfirmURL = func(pc pending.Call) string { return "https://approvals.example/confirm/" + pc.ID + "?token=t" }
	})
}

// wantConfirmRequest checks toolgate's input request: a URL elicitation
// of the call's confirmation page.
func wantConfirmRequest(t *testing.T, requests any, id string) {
	t.Helper()
	reqs, _ := requests.(map[string]any)
	req, _ := reqs[confirmKey].(map[string]any)
	params, _ := req["params"].(map[string]any)
	if req["method"] != "elicitation/create" || params["mode"] != "url" || params["elicitationId"] != id ||
		params["url"] != "https://approvals.example/confirm/"+id+"?token=t" || params["message"] == "" {
		t.Errorf("inputRequests %v, want the URL elicitation of call %s's confirmation page", requests, id)
	}
}

// TestMCPRequesterConfirm: a call its requester may confirm is answered,
// for a client that declares URL elicitation, with an input_required
// result whose elicitation is the confirmation page; the client's answer
// decides nothing; clients without URL elicitation, and calls that name
// other approvers, are held as any ask.
func TestMCPRequesterConfirm(t *testing.T) {
	env := confirmEnv(t)
	ec := &extClient{t: t, env: env, auth: true, caps: capsElicit}

	r := ec.writeNote("confirm/a")
	pc, ok := env.nextParked(time.Second)
	if !ok {
		t.Fatal("nothing was parked")
	}
	if r["resultType"] != "input_required" || r["requestState"] != pc.ID {
		t.Fatalf("tools/call answered %v, want input_required", r)
	}
	wantConfirmRequest(t, r["inputRequests"], pc.ID)

	// The client answers by itself: nothing is decided, and it is not
	// asked again (no loop); the retry attaches and is held.
	retry := ec.call("tools/call", "write_note", `{"name":"write_note","arguments":{"path":"confirm/a","content":"hi"},"inputResponses":{"toolgate.confirm":{"action":"accept"}},"requestState":"`+pc.ID+`"}`)
	if retry["isError"] != true || !strings.Contains(resultText(retry), pc.ID) {
		t.Errorf("retry answered %v, want the pending result of the same call", retry)
	}
	if _, again := env.nextParked(50 * time.Millisecond); again {
		t.Error("the retry parked a second call")
	}
	if got, _ := env.store.Get(mcpCtx(t), pc.ID); got.State != pending.Waiting {
		t.Errorf("after the client's answer the call is %s, want waiting", got.State)
	}

	// Confirmed on the page (as the approvals listener records it): the
	// next retry runs it.
	if _, err := env.store.Decide(mcpCtx(t), pc.ID, pending.Decision{To: pending.Approved, By: "requester:agent-42", Counts: []int{0}}); err != nil {
		t.Fatal(err)
	}
	done := ec.call("tools/call", "write_note", `{"name":"write_note","arguments":{"path":"confirm/a","content":"hi"},"inputResponses":{"toolgate.confirm":{"action":"accept"}}}`)
	if resultText(done) != "wrote confirm/a: hi" {
		t.Errorf("retry after confirmation answered %v, want the upstream's result", done)
	}

	// No URL elicitation declared: today's behaviour.
	plain := &extClient{t: t, env: env, auth: true, caps: capsNone}
	if r := plain.writeNote("confirm/b"); r["resultType"] == "input_required" || r["isError"] != true {
		t.Errorf("a client without URL elicitation got %v, want the pending result", r)
	}
	// Other approvers named: never offered to the requester.
	if r := ec.writeNote("team/a"); r["resultType"] == "input_required" {
		t.Errorf("a call naming group sre was offered to its requester: %v", r)
	}
	// A plain ask: no confirmation either.
	if r := ec.writeNote("notes/p"); r["resultType"] == "input_required" {
		t.Errorf("a plain ask was offered to its requester: %v", r)
	}
	if n := env.up.invoked("write_note"); n != 1 {
		t.Errorf("write_note ran %d times, want 1", n)
	}
}

// TestMCPRequesterConfirmTask: with the Tasks extension, a call its
// requester may confirm is a task that tasks/get shows input_required,
// with the confirmation page as its input request, to a client that
// declares URL elicitation; tasks/update answers decide nothing.
func TestMCPRequesterConfirmTask(t *testing.T) {
	env := confirmEnv(t)
	ec := &extClient{t: t, env: env, auth: true, caps: capsTasksElicit}
	task := ec.writeNote("confirm/t")
	pc, _ := env.nextParked(time.Second)
	wantExtTask(t, task, "task", pc.ID, "working")
	if m, _ := task["statusMessage"].(string); task["pollIntervalMs"] != float64(confirmPollInterval) || !strings.Contains(m, "requester") {
		t.Errorf("created task %v, want it to say its requester may confirm it and to be polled soon", task)
	}
	got := ec.get(pc.ID)
	wantExtTask(t, got, "complete", pc.ID, "input_required")
	wantConfirmRequest(t, got["inputRequests"], pc.ID)
	ack := ec.call("tasks/update", pc.ID, `{"taskId":"`+pc.ID+`","inputResponses":{"toolgate.confirm":{"action":"accept"}}}`)
	if ack["resultType"] != "complete" {
		t.Errorf("tasks/update answered %v", ack)
	}
	if c, _ := env.store.Get(mcpCtx(t), pc.ID); c.State != pending.Waiting {
		t.Errorf("after tasks/update the call is %s, want waiting", c.State)
	}
	// Without URL elicitation on the request: working.
	noElicit := &extClient{t: t, env: env, auth: true, caps: capsTasks}
	wantExtTask(t, noElicit.get(pc.ID), "complete", pc.ID, "working")
	if _, err := env.store.Decide(mcpCtx(t), pc.ID, pending.Decision{To: pending.Approved, By: "requester:agent-42", Counts: []int{0}}); err != nil {
		t.Fatal(err)
	}
	done := ec.get(pc.ID)
	wantExtTask(t, done, "complete", pc.ID, "completed")
	if b, _ := json.Marshal(done["result"]); !strings.Contains(string(b), "wrote confirm/t: hi") {
		t.Errorf("completed task %v, want the upstream's result", done)
	}
}

// TestMCPRequesterConfirmSDK: the official Go SDK as the agent's client,
// declaring URL elicitation, in both eras. The session era gets an
// elicitation/create on the held call's stream, the stateless revision an
// input_required result that the SDK answers and retries by itself. An
// elicitation answered by the client alone leaves the call waiting; the
// page's confirmation (here: the store decision the page records) lets
// the held retry run it, once; the client's answer never reaches the
// upstream.
func TestMCPRequesterConfirmSDK(t *testing.T) {
	for _, era := range mcpEras[:4] {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era, func(c *Config) {
				c.Decider = confirmEngine(t)
				c.Hold = 300 * time.Millisecond
				c.ConfirmURL = func(pc pending.Call) string { return "https://approvals.example/confirm/" + pc.ID + "?token=t" }
			})
			var (
				mu       sync.Mutex
				urls     []string
				confirms bool // the handler confirms on the page before answering
			)
			cs := env.connectWith(t, era, &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
				ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					urls = append(urls, req.Params.URL)
					confirm := confirms
					mu.Unlock()
					if req.Params.Mode != "url" || req.Params.ElicitationID == "" {
						return nil, fmt.Errorf("elicitation %+v is not a URL elicitation", req.Params)
					}
					if confirm {
						if _, err := env.store.Decide(ctx, req.Params.ElicitationID, pending.Decision{To: pending.Approved, By: "requester:agent-42", Counts: []int{0}}); err != nil {
							return nil, err
						}
					}
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
			})

			// Answered by the client alone: nothing is decided.
			res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"path": "confirm/a", "content": "hi"}})
			if err != nil {
				t.Fatal(err)
			}
			pc, ok := env.nextParked(time.Second)
			if !ok {
				t.Fatal("nothing was parked")
			}
			mu.Lock()
			gotURLs := slices.Clone(urls)
			mu.Unlock()
			if len(gotURLs) != 1 || gotURLs[0] != "https://approvals.example/confirm/"+pc.ID+"?token=t" {
				t.Errorf("the client was asked %q, want one elicitation of call %s's page", gotURLs, pc.ID)
			}
			if !res.IsError || !strings.Contains(mcpDescribe(res), pc.ID) {
				t.Errorf("tools/call answered %s, want the pending result of %s", mcpDescribe(res), pc.ID)
			}
			if c, _ := env.store.Get(mcpCtx(t), pc.ID); c.State != pending.Waiting {
				t.Errorf("after the client's own answer the call is %s, want waiting", c.State)
			}

			// Confirmed on the page while the client asks its human.
			mu.Lock()
			confirms = true
			mu.Unlock()
			res, err = cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"path": "confirm/b", "content": "hi"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || !strings.Contains(mcpDescribe(res), "wrote confirm/b: hi") {
				t.Errorf("confirmed call answered %s, want the upstream's result", mcpDescribe(res))
			}
			if n := env.up.invoked("write_note"); n != 1 {
				t.Errorf("write_note ran %d times, want 1", n)
			}
			for _, req := range env.up.got() {
				if strings.Contains(string(req.Body), confirmRPCPrefix) || strings.Contains(string(req.Body), confirmKey) {
					t.Errorf("the client's answer to toolgate's elicitation reached the upstream: %s", req.Body)
				}
			}
		})
	}
}

// TestMCPTaskExtensionOtherReplica: a task of the extension created
// through one toolgate is answered, and run once, by another on the same
// store (a MemoryStore, and Redis when TOOLGATE_TEST_REDIS_ADDR names one).
func TestMCPTaskExtensionOtherReplica(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testExtTaskOtherReplica(t, pending.NewMemory(pending.Options{})) })
	t.Run("redis", func(t *testing.T) { testExtTaskOtherReplica(t, testRedisStore(t)) })
}

func testExtTaskOtherReplica(t *testing.T, store pending.Store) {
	shared := func(c *Config) { c.Pending = store }
	env := newMCPEnv(t, extEra, shared)
	env.store = store
	env2 := newMCPEnv(t, extEra, shared)
	ec := &extClient{t: t, env: env, auth: true, caps: capsTasks}
	ec2 := &extClient{t: t, env: env2, auth: true, caps: capsTasks}
	task := ec.writeNote("notes/r")
	id := fmt.Sprint(task["taskId"])
	wantExtTask(t, ec2.get(id), "complete", id, "working")
	if _, err := store.Decide(mcpCtx(t), id, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	done := ec2.get(id)
	wantExtTask(t, done, "complete", id, "completed")
	if r, _ := done["result"].(map[string]any); resultText(r) != "wrote notes/r: hi" {
		t.Errorf("the other replica's completed task: %v", done)
	}
	wantExtTask(t, ec.get(id), "complete", id, "completed")
	if n := env.up.invoked("write_note") + env2.up.invoked("write_note"); n != 1 {
		t.Errorf("write_note ran %d times, want 1", n)
	}
}
