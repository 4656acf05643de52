package proxy

import (
	"net/http"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestTaskMethodLeavesANonTaskCall: a 2026-07-28 tasks/get naming one of
// the caller's own parked calls that is not a task of this endpoint (here
// a resources/read; a REST call or another upstream's is the same) is
// "Task not found", and the call is left as it is: not run, its outcome
// not taken (that belongs to the held request or its retry).
func TestTaskMethodLeavesANonTaskCall(t *testing.T) {
	env := newMCPEnv(t, extEra, func(c *Config) {
		c.Decider = mcpEngineRules(t, `{id: r1, effect: ask, tool: "mcp:resources/read", target: "*"}`)
		c.Hold = 100 * time.Millisecond
	})
	ec := &extClient{t: t, env: env, auth: true, caps: capsTasks}
	res, _, raw := ec.post("resources/read", "file:///x", `{"uri":"file:///x"}`)
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusAccepted {
		t.Fatalf("resources/read: %d %s", res.StatusCode, raw)
	}
	pc, ok := env.nextParked(time.Second)
	if !ok {
		t.Fatal("nothing parked")
	}
	if _, err := env.store.Decide(mcpCtx(t), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	// tasks/get of the caller's own resources/read call: not a task here.
	ec.fails("tasks/get", pc.ID, `{"taskId":"`+pc.ID+`"}`, rpcInvalidParams)

	got, err := env.store.Get(mcpCtx(t), pc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != pending.Approved {
		t.Errorf("after a tasks/get answered 'Task not found' the call is %s (delivered %v), want it left approved", got.State, got.Delivered)
	}
	for _, req := range env.up.got() {
		if req.RPCMethod == "resources/read" {
			t.Errorf("a tasks/get answered 'Task not found' sent the approved resources/read upstream: %s", req.Body)
		}
	}
}
