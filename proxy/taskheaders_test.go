package proxy

import (
	"net/http"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestTaskAnswersSayTheDecision: toolgate's own answers to task methods
// carry X-Toolgate-Decision, as every answer of toolgate's does: the
// CreateTaskResult and tasks/get of a waiting call "ask", of an approved
// one "approved", in both eras.
func TestTaskAnswersSayTheDecision(t *testing.T) {
	decision := func(res *http.Response) string { return res.Header.Get("X-Toolgate-Decision") }
	t.Run("2025-11-25", func(t *testing.T) {
		env := newMCPEnv(t, taskEras[0])
		tc, _ := connectTasks(t, env, true)
		res, _, raw := tc.post(`"tools/call"`, `{"name":"write_note","arguments":{"path":"notes/h","content":"hi"},"task":{"ttl":60000}}`)
		if got := decision(res); got != outcomeAsk {
			t.Errorf("CreateTaskResult: X-Toolgate-Decision %q, want ask (%s)", got, raw)
		}
		pc, ok := env.nextParked(time.Second)
		if !ok {
			t.Fatal("nothing was parked")
		}
		get := func() *http.Response {
			res, _, _ := tc.post(`"tasks/get"`, `{"taskId":"`+pc.ID+`"}`)
			return res
		}
		if got := decision(get()); got != outcomeAsk {
			t.Errorf("tasks/get of a waiting call: %q, want ask", got)
		}
		if _, err := env.store.Decide(mcpCtx(t), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
			t.Fatal(err)
		}
		res = get()
		if got := decision(res); got != outcomeApproved {
			t.Errorf("tasks/get of an approved call: %q, want approved", got)
		}
		if got := res.Header.Get("X-Toolgate-Call-Id"); got != pc.ID {
			t.Errorf("tasks/get names call %q, want the task's call %s", got, pc.ID)
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		env := newMCPEnv(t, extEra)
		ec := &extClient{t: t, env: env, auth: true, caps: capsTasks}
		res, _, raw := ec.post("tools/call", "write_note", `{"name":"write_note","arguments":{"path":"notes/h","content":"hi"}}`)
		if got := decision(res); got != outcomeAsk {
			t.Errorf("CreateTaskResult: X-Toolgate-Decision %q, want ask (%s)", got, raw)
		}
		pc, ok := env.nextParked(time.Second)
		if !ok {
			t.Fatal("nothing was parked")
		}
		if _, err := env.store.Decide(mcpCtx(t), pc.ID, pending.Decision{To: pending.Rejected, By: "alice"}); err != nil {
			t.Fatal(err)
		}
		res, _, _ = ec.post("tasks/get", pc.ID, `{"taskId":"`+pc.ID+`"}`)
		if got := decision(res); got != outcomeRejected {
			t.Errorf("tasks/get of a rejected call: %q, want rejected", got)
		}
	})
}
