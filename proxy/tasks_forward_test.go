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

// TestGrantFromTaskCall: a grant remembered from a call that asked for a
// task binds its params as its approver was shown them, the request for a
// task included. A later call that sends the same is an allowed call, sent
// untouched (the upstream may hold its task: toolgate holds none); the
// call without the request asks, and does not run beside the approved one.
func TestGrantFromTaskCall(t *testing.T) {
	for _, era := range []struct {
		name       string
		env        func(t *testing.T) *mcpEnv
		send       func(t *testing.T, env *mcpEnv, task bool, content string) int
		taskMember []byte
	}{
		{
			"2025-11-25", func(t *testing.T) *mcpEnv { env, _ := newGrantsMCPEnv(t); return env },
			func(t *testing.T, env *mcpEnv, task bool, content string) int {
				others := ""
				if task {
					others = `,"task":{"ttl":60000}`
				}
				res, _, _ := postMCP(t, env, paramsCall("1", `{"path":"notes/a","content":"`+content+`"}`, others), "Authorization", "Bearer agent-key")
				return res.StatusCode
			}, []byte(`"task"`),
		},
		{"2026-07-28", func(t *testing.T) *mcpEnv {
			return newMCPEnv(t, extEra, func(c *Config) {
				auth, err := identity.New(identity.Config{APIKeys: []identity.APIKey{{Key: "agent-key", Subject: "agent-42"}}})
				if err != nil {
					t.Fatal(err)
				}
				c.Auth, c.Grants, c.Hold = auth, c.Pending.(pending.Grants), 20*time.Millisecond
			})
		}, func(t *testing.T, env *mcpEnv, task bool, content string) int {
			ec := &extClient{t: t, env: env, auth: true, caps: `{"extensions":{}}`}
			if task {
				ec.caps = capsTasks
			}
			res, _, _ := ec.post("tools/call", "write_note", `{"name":"write_note","arguments":{"path":"notes/a","content":"`+content+`"}}`)
			return res.StatusCode
		}, []byte(tasksExtension)},
	} {
		t.Run(era.name, func(t *testing.T) {
			env := era.env(t)
			era.send(t, env, true, "c0")
			pc, ok := env.nextParked(time.Second)
			if !ok {
				t.Fatal("nothing parked")
			}
			if _, err := env.store.Decide(mcpCtx(t), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
				t.Fatal(err)
			}
			rememberParked(t, env.store.(pending.Grants), pc) // approved with "remember"
			env.up.Reset()

			// As shown, the request for a task included: covered, sent
			// untouched.
			before := env.up.invoked("write_note")
			era.send(t, env, true, "c1")
			if n := env.up.invoked("write_note") - before; n != 1 {
				t.Fatalf("the call as its approver saw it ran %d times under the grant, want once", n)
			}
			if body := forwardedCall(t, env, "write_note"); !bytes.Contains(body, era.taskMember) || !bytes.Contains(body, []byte(`"c1"`)) {
				t.Errorf("the granted call reached the upstream as %s, want it untouched", body)
			}
			// Without it: not what the approver saw; it asks, and the
			// approved call runs once, by the sweeper.
			before = env.up.invoked("write_note")
			era.send(t, env, false, "c0")
			env.server.life.SweepOnce(mcpCtx(t), 0)
			if n := env.up.invoked("write_note") - before; n != 1 {
				t.Errorf("after the call without the task request and a sweep, write_note ran %d times, want once (the approved call)", n)
			}
		})
	}
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
