package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// The session-era eras (MCP 2025-11-25) in which clients ask for tasks.
var taskEras = []mcpEra{
	{"session/json", mcp.StreamableHTTPOptions{JSONResponse: true}, "2025-11-25", "2025-11-25"},
	{"session/sse", mcp.StreamableHTTPOptions{}, "2025-11-25", "2025-11-25"},
	{"stateless/json/client-2025-11-25", mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}, "2025-11-25", "2025-11-25"},
}

// taskClient speaks raw JSON-RPC to toolgate as one principal (the go-sdk
// client has no tasks).
type taskClient struct {
	t       *testing.T
	env     *mcpEnv
	auth    bool   // send the agent's API key; otherwise anonymous
	session string // Mcp-Session-Id, once initialised
	next    int
}

// connectTasks initialises a session of the 2025-11-25 revision and
// returns the initialize result.
func connectTasks(t *testing.T, env *mcpEnv, auth bool) (*taskClient, mcpRPC) {
	t.Helper()
	return connectTasksWith(t, env, auth, `{}`)
}

// connectTasksWith is connectTasks with the client's capabilities (JSON).
func connectTasksWith(t *testing.T, env *mcpEnv, auth bool, caps string) (*taskClient, mcpRPC) {
	t.Helper()
	tc := &taskClient{t: t, env: env, auth: auth}
	res, msg, raw := tc.post(`"initialize"`, `{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}`)
	if res.StatusCode != http.StatusOK || msg.Result == nil {
		t.Fatalf("initialize: status %d body %s", res.StatusCode, raw)
	}
	tc.session = res.Header.Get(headerSessionID)
	nres, _, nraw := postMCP(t, env, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, tc.headers()...)
	if nres.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: status %d body %s", nres.StatusCode, nraw)
	}
	return tc, msg
}

func (tc *taskClient) headers() []string {
	h := []string{"Mcp-Protocol-Version", "2025-11-25"}
	if tc.auth {
		h = append(h, "Authorization", "Bearer agent-key")
	}
	if tc.session != "" {
		h = append(h, headerSessionID, tc.session)
	}
	return h
}

// post sends one request (method is JSON, params an object) and returns
// the answer.
func (tc *taskClient) post(method, params string) (*http.Response, mcpRPC, []byte) {
	tc.t.Helper()
	tc.next++
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%s,"params":%s}`, tc.next, method, params)
	return postMCP(tc.t, tc.env, body, tc.headers()...)
}

// call posts and wants a JSON-RPC result.
func (tc *taskClient) call(method, params string) map[string]any {
	tc.t.Helper()
	res, msg, raw := tc.post(`"`+method+`"`, params)
	if res.StatusCode != http.StatusOK || msg.Result == nil || msg.Error != nil {
		tc.t.Fatalf("%s %s: status %d body %s, want a result", method, params, res.StatusCode, raw)
	}
	wantCallHeaders(tc.t, res, method)
	if string(msg.ID) != fmt.Sprint(tc.next) {
		tc.t.Errorf("%s: id %s, want %d", method, msg.ID, tc.next)
	}
	return msg.Result
}

// fails posts and wants a JSON-RPC error with code.
func (tc *taskClient) fails(method, params string, code int) string {
	tc.t.Helper()
	res, msg, raw := tc.post(`"`+method+`"`, params)
	if res.StatusCode != http.StatusOK || msg.Error == nil || msg.Error.Code != code {
		tc.t.Fatalf("%s %s: status %d body %s, want JSON-RPC error %d", method, params, res.StatusCode, raw, code)
	}
	wantCallHeaders(tc.t, res, method)
	return msg.Error.Message
}

// wantCallHeaders: every answer, toolgate's own (a task method's) as well
// as an upstream's, names its call and what was decided.
func wantCallHeaders(t *testing.T, res *http.Response, method string) {
	t.Helper()
	if res.Header.Get("X-Toolgate-Call-Id") == "" || res.Header.Get("X-Toolgate-Decision") == "" {
		t.Errorf("%s: answer headers %v, want X-Toolgate-Call-Id and X-Toolgate-Decision", method, res.Header)
	}
}

// createTask calls write_note (decided ask) as a task and returns the
// task.
func (tc *taskClient) createTask(path string) map[string]any {
	tc.t.Helper()
	r := tc.call("tools/call", `{"name":"write_note","arguments":{"path":"`+path+`","content":"hi"},"task":{"ttl":60000}}`)
	task, ok := r["task"].(map[string]any)
	if !ok {
		tc.t.Fatalf("tools/call with params.task answered %v, want a CreateTaskResult", r)
	}
	return task
}

func (tc *taskClient) get(id string) map[string]any {
	tc.t.Helper()
	return tc.call("tasks/get", `{"taskId":"`+id+`"}`)
}

func wantTask(t *testing.T, task map[string]any, id, status, msgPart string) {
	t.Helper()
	if task["taskId"] != id || task["status"] != status {
		t.Errorf("task %v, want id %s status %s", task, id, status)
	}
	if m, _ := task["statusMessage"].(string); !strings.Contains(m, msgPart) {
		t.Errorf("statusMessage %q, want it to mention %q", m, msgPart)
	}
	for _, k := range []string{"createdAt", "lastUpdatedAt", "ttl"} {
		if _, has := task[k]; !has {
			t.Errorf("task %v has no %s", task, k)
		}
	}
	if _, err := time.Parse(time.RFC3339, fmt.Sprint(task["createdAt"])); err != nil {
		t.Errorf("createdAt: %v", err)
	}
}

// wantAsUnknown checks that post answers a task method naming id exactly
// as it answers one naming a task ID nobody was given: the same status and
// JSON-RPC message, but for its id.
func wantAsUnknown(t *testing.T, post func(id string) (*http.Response, mcpRPC, []byte), method, id string) {
	t.Helper()
	res, msg, raw := post(id)
	unknown := "tg-" + strings.ToLower(rand.Text())
	ures, umsg, uraw := post(unknown)
	msg.ID, umsg.ID = nil, nil
	if res.StatusCode != ures.StatusCode || !reflect.DeepEqual(msg, umsg) {
		t.Errorf("%s of another principal's task: status %d %s\nof an unknown one: status %d %s", method, res.StatusCode, raw, ures.StatusCode, uraw)
	}
}

func resultText(r map[string]any) string {
	content, _ := r["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

// TestMCPTasks: a task-augmented tools/call decided ask becomes a task
// whose ID is the call ID; tasks/get follows it, tasks/result returns the
// upstream's result once approved (the tool ran once, and the result stays
// readable); rejection, cancellation and other principals; tasks that are
// not toolgate's go to the upstream.
func TestMCPTasks(t *testing.T) {
	for _, era := range taskEras {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era)
			tc, init := connectTasks(t, env, true)
			caps, _ := init.Result["capabilities"].(map[string]any)
			tasks, _ := caps["tasks"].(map[string]any)
			requests, _ := tasks["requests"].(map[string]any)
			tools, _ := requests["tools"].(map[string]any)
			if _, ok := tools["call"]; !ok || tasks["list"] == nil || tasks["cancel"] == nil || caps["tools"] == nil {
				t.Errorf("initialize capabilities %v, want the upstream's with tasks (requests.tools.call, list, cancel)", caps)
			}

			listed := tc.call("tools/list", `{}`)
			for _, raw := range listed["tools"].([]any) {
				tool := raw.(map[string]any)
				exec, _ := tool["execution"].(map[string]any)
				want := tool["name"] == "write_note"
				if got := exec["taskSupport"] == "optional"; got != want {
					t.Errorf("tool %v: taskSupport optional is %v, want %v", tool["name"], got, want)
				}
			}

			// An ask becomes a task, answered at once.
			task := tc.createTask("notes/a")
			pc, ok := env.nextParked(time.Second)
			if !ok {
				t.Fatal("nothing was parked")
			}
			wantTask(t, task, pc.ID, "working", "waiting for approval")
			if task["pollInterval"] == nil {
				t.Errorf("task %v has no pollInterval", task)
			}
			wantTask(t, tc.get(pc.ID), pc.ID, "working", "waiting for approval")
			if env.up.sawToolCall("write_note") {
				t.Fatal("the parked call reached the upstream before approval")
			}

			// Another principal: answered as a task ID nobody was given,
			// and not listed.
			other, _ := connectTasks(t, env, false)
			for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/result"} {
				wantAsUnknown(t, func(id string) (*http.Response, mcpRPC, []byte) {
					return other.post(`"`+method+`"`, `{"taskId":"`+id+`"}`)
				}, method, pc.ID)
			}
			if got, _ := env.store.Get(mcpCtx(t), pc.ID); got.State != pending.Waiting {
				t.Fatalf("another principal's tasks/cancel left the call %s, want waiting", got.State)
			}
			// Those went to the upstream, as unknown IDs do; from here
			// on, none of the caller's own task methods may.
			env.up.Reset()
			if l := other.call("tasks/list", `{}`); len(l["tasks"].([]any)) != 0 {
				t.Errorf("another principal lists %v", l)
			}
			if l := tc.call("tasks/list", `{}`); len(l["tasks"].([]any)) != 1 {
				t.Errorf("tasks/list %v, want the one task", l)
			}

			// Approved, then run once (the sweeper: nobody holds it).
			if _, err := env.store.Decide(mcpCtx(t), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
				t.Fatal(err)
			}
			wantTask(t, tc.get(pc.ID), pc.ID, "working", "approved by alice")
			if era.name == "session/json" {
				// tasks/result runs an approved task at once, without the sweeper.
				if r := tc.call("tasks/result", `{"taskId":"`+pc.ID+`"}`); resultText(r) != "wrote notes/a: hi" {
					t.Fatalf("tasks/result of an approved task: %v", r)
				}
			} else {
				env.server.life.SweepOnce(mcpCtx(t), 0)
			}
			wantTask(t, tc.get(pc.ID), pc.ID, "completed", "executed")
			// toolgate holds the task: the upstream was asked to run the
			// call, not to make a task of its own; approvers were shown
			// the params as sent, the request for a task included.
			if body := forwardedCall(t, env, "write_note"); bytes.Contains(body, []byte(`"task"`)) ||
				!bytes.Contains(body, []byte(`"params":{"name":"write_note","arguments":{"path":"notes/a","content":"hi"}}`)) {
				t.Errorf("the approved call reached the upstream as %s, want it without params.task and otherwise as sent", body)
			}
			if p := infoOf(pc).OtherParams; p.Count() != 1 || p.List[0].Name != "task" {
				t.Errorf("approvers were shown the params %+v, want the task request as sent", p)
			}
			for range 2 {
				r := tc.call("tasks/result", `{"taskId":"`+pc.ID+`"}`)
				if got := resultText(r); got != "wrote notes/a: hi" || r["isError"] == true {
					t.Errorf("tasks/result %v, want the upstream's result", r)
				}
				meta, _ := r["_meta"].(map[string]any)
				if rel, _ := meta[relatedTaskKey].(map[string]any); rel["taskId"] != pc.ID {
					t.Errorf("tasks/result _meta %v, want the related task", meta)
				}
			}
			if n := env.up.invoked("write_note"); n != 1 {
				t.Errorf("write_note ran %d times, want 1", n)
			}
			tc.fails("tasks/cancel", `{"taskId":"`+pc.ID+`"}`, rpcInvalidParams)

			// Rejected: failed (2025-11-25: an isError result is failed),
			// with the approver's comment.
			task = tc.createTask("notes/b")
			rej, _ := env.nextParked(time.Second)
			if _, err := env.store.Decide(mcpCtx(t), rej.ID, pending.Decision{To: pending.Rejected, By: "bob", Comment: "not on a Friday"}); err != nil {
				t.Fatal(err)
			}
			wantTask(t, tc.get(fmt.Sprint(task["taskId"])), rej.ID, "failed", "not on a Friday")
			r := tc.call("tasks/result", `{"taskId":"`+rej.ID+`"}`)
			if r["isError"] != true || !strings.Contains(resultText(r), "rejected by bob: not on a Friday") {
				t.Errorf("tasks/result of a rejected task: %v", r)
			}

			// Cancelled while waiting.
			tc.createTask("notes/c")
			can, _ := env.nextParked(time.Second)
			wantTask(t, tc.call("tasks/cancel", `{"taskId":"`+can.ID+`"}`), can.ID, "cancelled", "cancelled")
			wantTask(t, tc.get(can.ID), can.ID, "cancelled", "cancelled")
			tc.fails("tasks/cancel", `{"taskId":"`+can.ID+`"}`, rpcInvalidParams)
			env.server.life.SweepOnce(mcpCtx(t), 0)
			if n := env.up.invoked("write_note"); n != 1 {
				t.Errorf("write_note ran %d times, want 1 (only the approved call)", n)
			}
			if l := tc.call("tasks/list", `{}`); len(l["tasks"].([]any)) < 2 {
				t.Errorf("tasks/list %v, want at least the waiting-time tasks still listed", l)
			}

			// A task ID toolgate never gave out is the upstream's.
			tc.post(`"tasks/get"`, `{"taskId":"upstream-task-1"}`)
			seen := false
			for _, req := range env.up.got() {
				seen = seen || (req.RPCMethod == "tasks/get" && strings.Contains(string(req.Body), "upstream-task-1"))
				if strings.Contains(string(req.Body), pc.ID) && req.RPCMethod != "tools/call" {
					t.Errorf("a task method about toolgate's call reached the upstream: %s", req.Body)
				}
			}
			if !seen {
				t.Error("tasks/get of the upstream's task did not reach the upstream")
			}
		})
	}
}

// forwardedCall is the body of the one tools/call of tool that the
// upstream received.
func forwardedCall(t *testing.T, env *mcpEnv, tool string) []byte {
	t.Helper()
	var bodies [][]byte
	for _, r := range env.up.got() {
		if r.RPCMethod == "tools/call" && r.ToolName == tool {
			bodies = append(bodies, r.Body)
		}
	}
	if len(bodies) != 1 {
		t.Fatalf("the upstream received %d tools/call of %s, want 1", len(bodies), tool)
	}
	return bodies[0]
}

// TestMCPTaskOtherReplica: a task parked through one toolgate is answered
// by another on the same store: one MemoryStore, and one Redis when
// TOOLGATE_TEST_REDIS_ADDR names one.
func TestMCPTaskOtherReplica(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testTaskOtherReplica(t, pending.NewMemory(pending.Options{})) })
	t.Run("redis", func(t *testing.T) { testTaskOtherReplica(t, testRedisStore(t)) })
}

// testRedisStore is a Redis store of its own key prefix on the Redis that
// TOOLGATE_TEST_REDIS_ADDR names; without one the test is skipped, and
// under CI=true it fails.
func testRedisStore(t *testing.T) pending.Store {
	t.Helper()
	addr := os.Getenv("TOOLGATE_TEST_REDIS_ADDR")
	if addr == "" {
		testkit.Unavailable(t, "no TOOLGATE_TEST_REDIS_ADDR: the Redis tests need a Redis")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	store, err := pending.NewRedis(rdb, pending.Options{Prefix: "toolgate-test:" + rand.Text() + ":", ResultTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func testTaskOtherReplica(t *testing.T, store pending.Store) {
	era := taskEras[2]
	shared := func(c *Config) { c.Pending = store }
	env := newMCPEnv(t, era, shared)
	env.store = store
	env2 := newMCPEnv(t, era, shared)
	tc, _ := connectTasks(t, env, true)
	task := tc.createTask("notes/r")
	id := fmt.Sprint(task["taskId"])
	tc2, _ := connectTasks(t, env2, true)
	wantTask(t, tc2.get(id), id, "working", "waiting for approval")
	if _, err := env.store.Decide(mcpCtx(t), id, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	env.server.life.SweepOnce(mcpCtx(t), 0)
	r := tc2.call("tasks/result", `{"taskId":"`+id+`"}`)
	if resultText(r) != "wrote notes/r: hi" {
		t.Errorf("tasks/result on the other replica: %v", r)
	}
}

// TestMCPTaskResultWaits: tasks/result blocks until the task ends.
func TestMCPTaskResultWaits(t *testing.T) {
	env := newMCPEnv(t, taskEras[2])
	tc, _ := connectTasks(t, env, true)
	task := tc.createTask("notes/w")
	id := fmt.Sprint(task["taskId"])
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = env.store.Decide(mcpCtx(t), id, pending.Decision{To: pending.Rejected, By: "bob", Comment: "no"})
	}()
	r := tc.call("tasks/result", `{"taskId":"`+id+`"}`)
	if r["isError"] != true || !strings.Contains(resultText(r), "rejected by bob: no") {
		t.Errorf("tasks/result: %v", r)
	}
}

func TestMarkTaskSupport(t *testing.T) {
	for in, want := range map[string]string{
		`{"name":"a"}`: `{"name":"a","execution":{"taskSupport":"optional"}}`,
		`{"name":"a","execution":{"taskSupport":"forbidden"}}`: `{"name":"a","execution":{"taskSupport":"forbidden"}}`,
		`[1]`: `[1]`,
	} {
		if got := string(markTaskSupport(json.RawMessage(in))); got != want {
			t.Errorf("markTaskSupport(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestMCPTaskResultHold: tasks/result of a task still working when the
// hold runs out is an error that says so; the task goes on.
func TestMCPTaskResultHold(t *testing.T) {
	env := newMCPEnv(t, taskEras[2], func(c *Config) { c.Hold = 100 * time.Millisecond })
	tc, _ := connectTasks(t, env, true)
	id := fmt.Sprint(tc.createTask("notes/h")["taskId"])
	if msg := tc.fails("tasks/result", `{"taskId":"`+id+`"}`, rpcInternal); !strings.Contains(msg, "still working") {
		t.Errorf("tasks/result after the hold: %q", msg)
	}
	wantTask(t, tc.get(id), id, "working", "waiting for approval")
}

// TestWithOwnTasks: the caller's parked calls go first in the upstream's
// tasks/list answer, which keeps its own tasks and fields; an upstream
// without tasks/list leaves toolgate's alone; a store failure is an error.
func TestWithOwnTasks(t *testing.T) {
	own := []any{map[string]any{"taskId": "OURS"}}
	for _, tc := range []struct{ name, in, want string }{
		{
			"merged", `{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"theirs"}],"nextCursor":"c2"}}`,
			`{"id":1,"jsonrpc":"2.0","result":{"nextCursor":"c2","tasks":[{"taskId":"OURS"},{"taskId":"theirs"}]}}`,
		},
		{
			"no tasks/list upstream", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found"}}`,
			`{"id":1,"jsonrpc":"2.0","result":{"tasks":[{"taskId":"OURS"}]}}`,
		},
		{
			"a notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`,
			`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`,
		},
	} {
		if got := string(withOwnTasks([]byte(tc.in), own, nil)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	got := string(withOwnTasks([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tasks":[]}}`), nil, errors.New("down")))
	if !strings.Contains(got, `"error":{"code":-32603`) || strings.Contains(got, `"result"`) {
		t.Errorf("store failure: %s, want an internal error and no result", got)
	}
}

// TestMCPTaskRequesterConfirm: in a session whose client declared URL
// elicitation, a task its requester may confirm shows input_required, and
// tasks/result carries the elicitation/create of its confirmation page
// (tied to the task) before the result, on one SSE stream.
func TestMCPTaskRequesterConfirm(t *testing.T) {
	env := newMCPEnv(t, taskEras[0], func(c *Config) {
		c.Decider = confirmEngine(t)
		c.ConfirmURL = func(pc pending.Call) string { return "https://approvals.example/confirm/" + pc.ID + "?token=t" }
	})
	tc, _ := connectTasksWith(t, env, true, `{"elicitation":{"url":{}}}`)
	r := tc.call("tools/call", `{"name":"write_note","arguments":{"path":"confirm/s","content":"hi"},"task":{"ttl":60000}}`)
	task, _ := r["task"].(map[string]any)
	id := fmt.Sprint(task["taskId"])
	wantTask(t, tc.get(id), id, "input_required", "confirm")

	// Without URL elicitation in the session: working, and no elicitation.
	plain, _ := connectTasks(t, env, true)
	wantTask(t, plain.get(id), id, "working", "waiting for approval")

	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = env.store.Decide(context.Background(), id, pending.Decision{To: pending.Approved, By: "requester:agent-42", Counts: []int{0}})
	}()
	res, msg, raw := tc.post(`"tasks/result"`, `{"taskId":"`+id+`"}`)
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("tasks/result answered %s %s, want an SSE stream", res.Header.Get("Content-Type"), raw)
	}
	events := strings.Split(strings.TrimSpace(string(raw)), "\n\n")
	if len(events) != 2 || !strings.Contains(events[0], `"method":"elicitation/create"`) ||
		!strings.Contains(events[0], `"url":"https://approvals.example/confirm/`+id+`?token=t"`) ||
		!strings.Contains(events[0], `"id":"`+confirmRPCPrefix+id+`"`) || !strings.Contains(events[0], relatedTaskKey) {
		t.Errorf("tasks/result stream %s, want the elicitation, then the result", raw)
	}
	if resultText(msg.Result) != "wrote confirm/s: hi" {
		t.Errorf("tasks/result's result %v, want the upstream's", msg.Result)
	}
	// The client's answer to the elicitation reaches no upstream.
	ack, _, _ := postMCP(t, env, `{"jsonrpc":"2.0","id":"`+confirmRPCPrefix+id+`","result":{"action":"accept"}}`, tc.headers()...)
	if ack.StatusCode != http.StatusAccepted {
		t.Errorf("the client's answer: %d, want 202", ack.StatusCode)
	}
	for _, req := range env.up.got() {
		if strings.Contains(string(req.Body), confirmRPCPrefix) {
			t.Errorf("the client's answer reached the upstream: %s", req.Body)
		}
	}
}

// TestMCPTaskEdges: task methods reach toolgate's calls only one per
// request, as requests, and only for calls that are tasks here. A task
// method sent as a notification is acknowledged and goes nowhere; a batch
// holding a task method, or an answer to toolgate's own request, is
// refused whole; tasks/cancel and tasks/result of the caller's call that
// is not a task on this upstream (here: another upstream's) find nothing
// and leave it as it was.
func TestMCPTaskEdges(t *testing.T) {
	env := newMCPEnv(t, taskEras[0])
	tc, _ := connectTasks(t, env, true)
	tc.createTask("notes/a")
	pc, ok := env.nextParked(time.Second)
	if !ok {
		t.Fatal("nothing was parked")
	}
	sent := len(env.up.got())

	res, _, raw := postMCP(t, env, `{"jsonrpc":"2.0","method":"tasks/cancel","params":{"taskId":"`+pc.ID+`"}}`, tc.headers()...)
	if res.StatusCode != http.StatusAccepted || len(bytes.TrimSpace(raw)) != 0 {
		t.Errorf("tasks/cancel as a notification: status %d body %s, want 202 and nothing", res.StatusCode, raw)
	}
	for _, batch := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + pc.ID + `"}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		`[{"jsonrpc":"2.0","method":"tasks/cancel","params":{"taskId":"` + pc.ID + `"}}]`,
		`[{"jsonrpc":"2.0","id":"` + confirmRPCPrefix + pc.ID + `","result":{"action":"accept"}},{"jsonrpc":"2.0","id":3,"method":"ping"}]`,
	} {
		if res, _, raw := postMCP(t, env, batch, tc.headers()...); res.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "Batch refused") {
			t.Errorf("batch %s: status %d body %s, want 400 Batch refused", batch, res.StatusCode, raw)
		}
	}
	if got := env.up.got(); len(got) != sent {
		t.Errorf("the upstream received %d more requests: %+v", len(got)-sent, got[sent:])
	}
	if got, _ := env.store.Get(t.Context(), pc.ID); got.State != pending.Waiting {
		t.Errorf("the task is %s, want waiting", got.State)
	}

	// A call of the same principal parked for another upstream.
	other := pc
	other.ID, other.Upstream, other.AttachKey, other.ArgsKey = pc.ID[:len(pc.ID)-1]+"Z", "elsewhere", "", ""
	if other.ID == pc.ID {
		other.ID = pc.ID[:len(pc.ID)-1] + "Y"
	}
	if _, _, err := env.store.Park(t.Context(), other, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := env.store.Decide(t.Context(), other.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	tc.fails("tasks/cancel", `{"taskId":"`+other.ID+`"}`, rpcInvalidParams)
	tc.fails("tasks/result", `{"taskId":"`+other.ID+`"}`, rpcInvalidParams)
	if got, _ := env.store.Get(t.Context(), other.ID); got.State != pending.Approved {
		t.Errorf("the other upstream's call is %s after tasks/cancel and tasks/result, want approved (untouched)", got.State)
	}
}

// TestUpstreamProblemIsNotToolgates: an upstream (or a gateway in front of
// it) that answers an approved tools/call with a 403
// application/problem+json is not read as toolgate's own result, a
// re-check's deny: tasks/result must not report "Denied by policy" for a
// call the policy let run and the upstream refused. Told apart by the
// Content-Type alone, the upstream spoke for toolgate.
func TestUpstreamProblemIsNotToolgates(t *testing.T) {
	h := func(_ int, w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		switch msg.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"u","version":"1"}}}`)
		case "tools/call":
			// The upstream's own refusal, in RFC 9457 form.
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"type":"about:blank","title":"Forbidden","status":403,"detail":"upstream token lacks scope notes:write"}`)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}
	up := &mcpUpstream{calls: map[string]int{}}
	up.Upstream = testkit.NewUpstream(t, h)
	up.url, _ = url.Parse(up.URL)
	env := newMCPEnvWith(t, up)
	tc, _ := connectTasks(t, env, true)
	task := tc.createTask("notes/a")
	pc, ok := env.nextParked(time.Second)
	if !ok || task["taskId"] != pc.ID {
		t.Fatalf("no task parked: %v", task)
	}
	if _, err := env.store.Decide(mcpCtx(t), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	r := tc.call("tasks/result", `{"taskId":"`+pc.ID+`"}`)
	if !up.sawToolCall("write_note") {
		t.Fatal("the approved call did not reach the upstream")
	}
	meta, _ := r["_meta"].(map[string]any)
	text := resultText(r)
	if strings.HasPrefix(text, "Denied by policy") || meta["toolgate/decision"] == outcomeDeny {
		t.Errorf("the upstream's own 403 problem answer was reported as toolgate's policy deny: %q (decision %v)", text, meta["toolgate/decision"])
	}
}
