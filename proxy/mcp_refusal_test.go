package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// mcpWantPending checks res is the isError result of a call still waiting
// for approval, about call id.
func mcpWantPending(t *testing.T, res *mcp.CallToolResult, id string) {
	t.Helper()
	low := strings.ToLower(mcpResultText(res))
	if !res.IsError || !strings.Contains(low, "approval pending") || !strings.Contains(mcpResultText(res), id) {
		t.Fatalf("result %s, want isError saying call %s waits for approval", mcpDescribe(res), id)
	}
}

// mcpNoneParked checks that OnPark was not called since the last
// nextParked.
func mcpNoneParked(t *testing.T, env *mcpEnv, what string) {
	t.Helper()
	if pc, ok := env.nextParked(0); ok {
		t.Fatalf("%s parked a new call %s (approvers asked again)", what, pc.ID)
	}
}

// TestMCPRetryLearnsRejection: the hold ran out with the call pending, then
// an approver rejected it with a comment. The same call again gets the
// rejection, with the comment, as an isError result once; the call after
// that is a new call that asks again.
func TestMCPRetryLearnsRejection(t *testing.T) {
	args := map[string]any{"path": "notes/r.txt", "content": "x"}
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			env := newMCPEnv(t, era, func(c *Config) { c.Hold = 100 * time.Millisecond })
			cs := env.connect(t, era)
			res := mcpCall(t, cs, "write_note", args)
			first, ok := env.nextParked(time.Second)
			if !ok {
				t.Fatalf("nothing parked; the call answered %s", mcpDescribe(res))
			}
			mcpWantPending(t, res, first.ID)
			if _, err := env.store.Decide(context.Background(), first.ID, pending.Decision{To: pending.Rejected, By: "carol", Comment: "not on a Friday"}); err != nil {
				t.Fatal(err)
			}

			res = mcpCall(t, cs, "write_note", args)
			text := mcpResultText(res)
			if !res.IsError || text != "Denied by policy: rejected by carol: not on a Friday" {
				t.Fatalf("retry after the rejection: %s, want isError read as a deny, with the rejection and its comment", mcpDescribe(res))
			}
			if d, id := mcpMeta(res, "toolgate/decision"), mcpMeta(res, "toolgate/call_id"); d != "rejected" || id != first.ID {
				t.Errorf("_meta decision %q call %q, want rejected on %s", d, id, first.ID)
			}
			mcpNoneParked(t, env, "the retry that learnt the rejection")

			res = mcpCall(t, cs, "write_note", args)
			again, ok := env.nextParked(time.Second)
			if !ok || again.ID == first.ID {
				t.Fatalf("second retry: parked %v (%q), result %s; want a new call", ok, again.ID, mcpDescribe(res))
			}
			mcpWantPending(t, res, again.ID)
			if got := env.up.invocations(); len(got) != 0 || env.up.sawToolCall("write_note") {
				t.Fatalf("handlers ran %v:%s", got, describeMCP(env.up.got()))
			}
		})
	}
}

// TestMCPRetryLearnsExpiry: the same for a call that expired unswept.
func TestMCPRetryLearnsExpiry(t *testing.T) {
	args := map[string]any{"path": "notes/e.txt", "content": "x"}
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			clock := testkit.NewClock(time.Now())
			store := pending.NewMemory(pending.Options{Now: clock.Now})
			env := newMCPEnv(t, era, func(c *Config) { c.Hold, c.Pending = 100*time.Millisecond, store })
			env.store = store
			cs := env.connect(t, era)
			res := mcpCall(t, cs, "write_note", args)
			first, ok := env.nextParked(time.Second)
			if !ok {
				t.Fatalf("nothing parked; the call answered %s", mcpDescribe(res))
			}
			mcpWantPending(t, res, first.ID)
			clock.Advance(2 * time.Minute) // past the ttl; no sweeper runs

			res = mcpCall(t, cs, "write_note", args)
			if !res.IsError || mcpMeta(res, "toolgate/decision") != "expired" || mcpMeta(res, "toolgate/call_id") != first.ID {
				t.Fatalf("retry after the expiry: %s, want isError expired on %s", mcpDescribe(res), first.ID)
			}
			mcpNoneParked(t, env, "the retry that learnt the expiry")

			res = mcpCall(t, cs, "write_note", args)
			again, ok := env.nextParked(time.Second)
			if !ok || again.ID == first.ID {
				t.Fatalf("second retry: parked %v (%q), result %s; want a new call", ok, again.ID, mcpDescribe(res))
			}
			mcpWantPending(t, res, again.ID)
		})
	}
}

// TestMCPKeylessRetryAttachesToKeyed: a tools/call sent with an
// Idempotency-Key, then the same call without it, its arguments in another
// order: one call, the approvers asked once.
func TestMCPKeylessRetryAttachesToKeyed(t *testing.T) {
	env := newMCPEnv(t, mcpRawEra, func(c *Config) { c.Hold = 100 * time.Millisecond })
	call := func(id, arguments string, header ...string) (string, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"write_note","arguments":` + arguments + `}}`
		res, msg, raw := postMCP(t, env, body, header...)
		meta, _ := msg.Result["_meta"].(map[string]any)
		callID, _ := meta["toolgate/call_id"].(string)
		decision, _ := meta["toolgate/decision"].(string)
		if res.StatusCode != 200 || msg.Result["isError"] != true || callID == "" {
			t.Fatalf("status %d body %s, want an isError tool result naming a call", res.StatusCode, raw)
		}
		return callID, decision
	}
	id, decision := call("1", `{"path":"notes/k.txt","content":"x"}`, "Idempotency-Key", "k1")
	first, ok := env.nextParked(time.Second)
	if !ok || id != first.ID || decision != outcomeAsk {
		t.Fatalf("keyed call: %s %s, parked %v %q", id, decision, ok, first.ID)
	}
	if id, decision = call("2", `{"content":"x","path":"notes/k.txt"}`); id != first.ID || decision != outcomeAsk {
		t.Fatalf("keyless retry: %s on %s, want pending on %s", decision, id, first.ID)
	}
	mcpNoneParked(t, env, "the keyless retry")
	if got := env.up.invocations(); len(got) != 0 {
		t.Fatalf("handlers ran %v", got)
	}
}
