package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// wantGrantedWithoutTask sends the same write as shown (send(false)) and
// with a request for a task (send(true)) under a grant remembered from a
// task call: the grant covers both, as its approver was shown the call
// without the request, and neither reaches the upstream with one.
func wantGrantedWithoutTask(t *testing.T, env *mcpEnv, send func(task bool, content string), taskMember []byte) {
	t.Helper()
	env.up.Reset()
	for i, task := range []bool{false, true} {
		before := env.up.invoked("write_note")
		send(task, "c"+strconv.Itoa(i))
		if env.up.invoked("write_note") != before+1 {
			t.Errorf("with a task request %v: the grant did not let the call through", task)
		}
	}
	for _, r := range env.up.got() {
		if r.RPCMethod == "tools/call" && bytes.Contains(r.Body, taskMember) {
			t.Errorf("the upstream received, under a grant, a request for a task its approver was not shown: %s", r.Body)
		}
	}
}

// TestGrantFromTaskCall: a grant remembered from a call that asked for a
// task binds the params as its approver was shown them, without the
// request for a task; the calls it lets through go without one.
func TestGrantFromTaskCall(t *testing.T) {
	env, store := newGrantsMCPEnv(t)
	auth := []string{"Authorization", "Bearer agent-key"}
	task := `,"task":{"ttl":60000}`
	res, msg, raw := postMCP(t, env, paramsCall("1", `{"path":"notes/a.txt","content":"c"}`, task), auth...)
	if res.StatusCode != 200 || msg.Result["task"] == nil {
		t.Fatalf("the task call answered %d %s, want toolgate's task", res.StatusCode, raw)
	}
	pc, ok := env.nextParked(time.Second)
	if !ok {
		t.Fatal("nothing parked")
	}
	rememberParked(t, store, pc)
	id := 1
	wantGrantedWithoutTask(t, env, func(withTask bool, content string) {
		id++
		others := ""
		if withTask {
			others = task
		}
		postMCP(t, env, paramsCall(strconv.Itoa(id), `{"path":"notes/a.txt","content":"`+content+`"}`, others), auth...)
	}, []byte(`"task"`))
}

// TestGrantFromTaskExtensionCall is TestGrantFromTaskCall in 2026-07-28,
// where the client asks for a task by declaring the Tasks extension.
func TestGrantFromTaskExtensionCall(t *testing.T) {
	env := newMCPEnv(t, extEra, func(c *Config) {
		auth, err := identity.New(identity.Config{APIKeys: []identity.APIKey{{Key: "agent-key", Subject: "agent-42"}}})
		if err != nil {
			t.Fatal(err)
		}
		c.Auth, c.Grants, c.Hold = auth, c.Pending.(pending.Grants), 20*time.Millisecond
	})
	withTasks := &extClient{t: t, env: env, auth: true, caps: capsTasks}
	asShown := &extClient{t: t, env: env, auth: true, caps: `{"extensions":{}}`}
	if r := withTasks.call("tools/call", "write_note", `{"name":"write_note","arguments":{"path":"notes/a","content":"c"}}`); r["resultType"] != "task" {
		t.Fatalf("answered %v, want toolgate's task", r)
	}
	pc, ok := env.nextParked(time.Second)
	if !ok {
		t.Fatal("nothing parked")
	}
	rememberParked(t, env.store.(pending.Grants), pc)
	wantGrantedWithoutTask(t, env, func(withTask bool, content string) {
		ec := asShown
		if withTask {
			ec = withTasks
		}
		ec.post("tools/call", "write_note", `{"name":"write_note","arguments":{"path":"notes/a","content":"`+content+`"}}`)
	}, []byte(tasksExtension))
}

// TestTaskCallLength: the policy input an approved task call is decided
// on again says the Content-Length it is sent with, without the request
// for a task.
func TestTaskCallLength(t *testing.T) {
	env := newMCPEnv(t, mcpRawEra)
	res, msg, raw := postMCP(t, env, paramsCall("1", `{"path":"notes/a","content":"hi"}`, `,"task":{"ttl":60000}`))
	if res.StatusCode != 200 || msg.Result["task"] == nil {
		t.Fatalf("answered %d %s, want toolgate's task", res.StatusCode, raw)
	}
	pc, ok := env.nextParked(time.Second)
	if !ok {
		t.Fatal("nothing parked")
	}
	var in struct {
		HTTP struct {
			Headers map[string][]string `json:"headers"`
		} `json:"http"`
	}
	if err := json.Unmarshal(callinfo.Decode(pc.Info).PolicyInput, &in); err != nil {
		t.Fatal(err)
	}
	if _, err := env.store.Decide(mcpCtx(t), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	env.server.life.SweepOnce(mcpCtx(t), 0)
	body := forwardedCall(t, env, "write_note")
	if decided := in.HTTP.Headers["content-length"]; len(decided) != 1 || decided[0] != strconv.Itoa(len(body)) {
		t.Errorf("the policy input says content-length %v, the upstream got %d bytes: %s", decided, len(body), body)
	}
}
