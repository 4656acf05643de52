package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestIdempotencyKeyOtherTool: an Idempotency-Key names one call. An MCP
// tools/call of another tool with the same key and arguments (the tool is
// params.name, not in the arguments' digest) is refused as a reused key,
// 409: it neither attaches to the first call nor gets its result.
func TestIdempotencyKeyOtherTool(t *testing.T) {
	env := newMCPEnv(t, mcpRawEra, func(c *Config) {
		c.Hold = 100 * time.Millisecond
		c.Decider = mcpEngineRules(t,
			`{id: a1, effect: ask, tool: read_file, target: "*", message: "reads need a look"}`,
			`{id: a2, effect: ask, tool: delete_file, target: "*", message: "deletes need a look"}`,
		)
	})
	callOf := func(id, tool string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"path":"notes/k.txt"}}}`
	}
	res, msg, raw := postMCP(t, env, callOf("1", "read_file"), "Idempotency-Key", "k1")
	meta, _ := msg.Result["_meta"].(map[string]any)
	first, _ := meta["toolgate/call_id"].(string)
	if res.StatusCode != 200 || first == "" {
		t.Fatalf("read_file: status %d %s", res.StatusCode, raw)
	}
	if _, ok := env.nextParked(time.Second); !ok {
		t.Fatal("read_file not parked")
	}
	if _, err := env.store.Decide(mcpCtx(t), first, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	res, _, raw = postMCP(t, env, callOf("2", "delete_file"), "Idempotency-Key", "k1")
	if res.StatusCode != 409 || strings.Contains(string(raw), "contents of notes/k.txt") {
		t.Errorf("delete_file with read_file's Idempotency-Key: status %d %s, want 409", res.StatusCode, raw)
	}
	if pc, ok := env.nextParked(100 * time.Millisecond); ok {
		t.Errorf("delete_file parked as %s, want refused", pc.ID)
	}
	if env.up.sawToolCall("delete_file") {
		t.Error("delete_file reached the upstream")
	}
}
