package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// TestMCPParkedOtherParams: a tools/call whose params carry _meta,
// inputResponses and requestState beside an innocent write parks with
// them in its display record (a progressToken left out) and in its policy
// input. A retry that differs only in its progressToken or its arguments'
// spelling attaches; one with other _meta or inputResponses is another
// call, parked anew, and an Idempotency-Key reused with them is refused.
// Approved, the upstream gets the message exactly as it was parked.
func TestMCPParkedOtherParams(t *testing.T) {
	env := newMCPEnv(t, mcpRawEra, func(c *Config) { c.Hold = 100 * time.Millisecond })
	pendingOn := func(body string, header ...string) (callID string, status int) {
		t.Helper()
		res, msg, raw := postMCP(t, env, body, header...)
		meta, _ := msg.Result["_meta"].(map[string]any)
		callID, _ = meta["toolgate/call_id"].(string)
		if res.StatusCode == 200 && (msg.Result["isError"] != true || callID == "") {
			t.Fatalf("status %d body %s, want an isError tool result naming a call", res.StatusCode, raw)
		}
		return callID, res.StatusCode
	}
	args := `{"path":"notes/a.txt","content":"harmless"}`
	others := `,"_meta":{"progressToken":"p-1","acme/overwrite_path":"/etc/passwd"},` +
		`"inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},"requestState":"rs-1"`
	body := paramsCall("1", args, others)

	id, _ := pendingOn(body)
	pc, ok := env.nextParked(time.Second)
	if !ok || pc.ID != id {
		t.Fatalf("parked %v %q, answered for %q", ok, pc.ID, id)
	}
	info := callinfo.Decode(pc.Info)
	want := &callinfo.Params{List: []callinfo.Param{
		{Name: "_meta", Value: json.RawMessage(`{"acme/overwrite_path":"/etc/passwd"}`)},
		{Name: "inputResponses", Value: json.RawMessage(`{"confirm":{"action":"accept","content":{"ok":true}}}`)},
		{Name: "requestState", Value: json.RawMessage(`"rs-1"`)},
	}}
	if diff := cmp.Diff(want, info.OtherParams); diff != "" {
		t.Errorf("display record's other params (-want +got):\n%s", diff)
	}
	if string(info.Arguments) != `{"content":"harmless","path":"notes/a.txt"}` {
		t.Errorf("arguments shown as %s", info.Arguments)
	}
	var in struct {
		MCP struct {
			Params map[string]any `json:"params"`
		} `json:"mcp"`
	}
	if err := json.Unmarshal(info.PolicyInput, &in); err != nil {
		t.Fatal(err)
	}
	wantIn := map[string]any{
		"_meta":          map[string]any{"progressToken": "p-1", "acme/overwrite_path": "/etc/passwd"},
		"inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}},
		"requestState":   "rs-1",
	}
	if diff := cmp.Diff(wantIn, in.MCP.Params); diff != "" {
		t.Errorf("policy input mcp.params (-want +got):\n%s", diff)
	}

	// The same call with another progressToken, its arguments and params
	// in another order: it attaches.
	same := paramsCall("2", `{"content":"harmless","path":"notes/a.txt"}`,
		`,"requestState":"rs-1","inputResponses":{"confirm":{"content":{"ok":true},"action":"accept"}},"_meta":{"acme/overwrite_path":"/etc/passwd","progressToken":"p-2"}`)
	if got, _ := pendingOn(same); got != id {
		t.Errorf("identical retry answered for %q, want %q", got, id)
	}
	mcpNoneParked(t, env, "the identical retry")

	// Other _meta, other inputResponses, no requestState: other calls.
	var bare string
	for _, tc := range []struct{ name, others string }{
		{"other _meta", strings.Replace(others, "/etc/passwd", "/etc/shadow", 1)},
		{"other inputResponses", strings.Replace(others, `"ok":true`, `"ok":false`, 1)},
		{"without requestState", strings.Replace(others, `,"requestState":"rs-1"`, "", 1)},
		{"without other params", ""},
	} {
		got, _ := pendingOn(paramsCall("3", args, tc.others))
		again, parked := env.nextParked(time.Second)
		if !parked || got == id || again.ID != got {
			t.Errorf("%s: answered for %q, parked %v %q; want a new call, not %q", tc.name, got, parked, again.ID, id)
		}
		bare = got
	}
	// A _meta holding only a progressToken is no other param: the call
	// attaches to the one sent without any.
	if got, _ := pendingOn(paramsCall("6", args, `,"_meta":{"progressToken":7}`)); got != bare {
		t.Errorf("a call whose _meta holds only a progressToken answered for %q, want %q", got, bare)
	}
	mcpNoneParked(t, env, "the call with only a progressToken")

	// An Idempotency-Key bound to one _meta refuses another.
	keyed, _ := pendingOn(paramsCall("4", `{"path":"notes/k.txt","content":"x"}`, others), "Idempotency-Key", "k1")
	if _, parked := env.nextParked(time.Second); !parked || keyed == "" {
		t.Fatal("the keyed call was not parked")
	}
	if _, status := pendingOn(paramsCall("5", `{"path":"notes/k.txt","content":"x"}`, strings.Replace(others, "/etc/passwd", "/", 1)), "Idempotency-Key", "k1"); status != http.StatusConflict {
		t.Errorf("the key reused with other _meta: status %d, want 409", status)
	}

	// Approved, an identical retry runs it: the upstream gets the message
	// as it was parked, byte for byte, progressToken and all.
	if _, err := env.store.Decide(mcpCtx(t), id, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	res, msg, raw := postMCP(t, env, same)
	if res.StatusCode != 200 || msg.Result["isError"] == true || !strings.Contains(string(raw), "wrote notes/a.txt: harmless") {
		t.Fatalf("approved retry: status %d body %s", res.StatusCode, raw)
	}
	var sent [][]byte
	for _, r := range env.up.got() {
		if r.RPCMethod == "tools/call" {
			sent = append(sent, r.Body)
		}
	}
	if len(sent) != 1 || !bytes.Equal(sent[0], []byte(body)) {
		t.Errorf("upstream got tools/calls %q, want the parked message %q", sent, body)
	}
	if n := env.up.invoked("write_note"); n != 1 {
		t.Errorf("write_note ran %d times, want 1", n)
	}
}

// TestRPCIDJSON: an id is written back as json.Marshal writes it.
func TestRPCIDJSON(t *testing.T) {
	for _, id := range []any{json.Number("7"), json.Number("-1.5e3"), json.Number("12345678901234567890"), "abc", "<&>", nil, true} {
		want, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		if got := rpcIDJSON(id); !bytes.Equal(got, want) {
			t.Errorf("rpcIDJSON(%#v) = %s, want %s", id, got, want)
		}
	}
}
