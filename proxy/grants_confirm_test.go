package proxy

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestGrantBindsAConfirmationsMembers: a remembered grant is bound to the
// headers and other params of the call it was made from. A later call
// that adds a requestState beside an answer to toolgate's confirmation
// (inputResponses["toolgate.confirm"]) is not covered: those two members
// are left out of an identical retry's attach key, since they are
// addressed to toolgate, but a call a grant lets through sends them to the
// upstream, which may act on a requestState. A progressToken that is not
// a string or an integer, which approvers are not shown, is refused.
func TestGrantBindsAConfirmationsMembers(t *testing.T) {
	env, store := newGrantsMCPEnv(t)
	meta := `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	send := func(others string) (ran bool, parked pending.Call) {
		t.Helper()
		before := env.up.invoked("write_note")
		res, _, raw := postMCP(t, env, paramsCall(strconv.Itoa(rand.IntN(1e6)), `{"path":"notes/a.txt","content":"c"}`, others),
			"Authorization", "Bearer agent-key", "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "write_note")
		t.Logf("%s -> %d %s %.200s", others, res.StatusCode, res.Header.Get("X-Toolgate-Decision"), raw)
		ran = env.up.invoked("write_note") > before || res.Header.Get("X-Toolgate-Decision") == "allow"
		if !ran && res.Header.Get("X-Toolgate-Decision") == "ask" {
			// Parked, or attached to a call parked before (a confirmation's
			// answer is left out of the attach key).
			parked, _ = env.nextParked(100 * time.Millisecond)
		}
		return ran, parked
	}
	ran, pc := send(meta + "}")
	if ran {
		t.Fatal("the first call ran without a grant")
	}
	rememberParked(t, store, pc)
	for _, tc := range []struct{ name, others string }{
		{"requestState alone (control)", meta + `},"requestState":{"overwrite":"/etc/passwd"}`},
		{"requestState beside a dummy toolgate.confirm answer", meta + `},"requestState":{"overwrite":"/etc/passwd"},"inputResponses":{"toolgate.confirm":{"action":"accept","content":{"x":"SMUGGLED"}}}`},
		{"a string requestState beside a toolgate.confirm answer", meta + `},"requestState":"/etc/passwd","inputResponses":{"toolgate.confirm":{"action":"accept"}}`},
		{"an object progressToken", meta + `,"progressToken":{"overwrite":"/etc/shadow"}}`},
	} {
		if got, _ := send(tc.others); got {
			t.Errorf("%s: forwarded under the grant of a call that sent no other params", tc.name)
		}
	}
	for _, r := range env.up.got() {
		if bytes.Contains(r.Body, []byte("/etc/")) {
			t.Errorf("the upstream received what no approver saw: %s", r.Body)
		}
	}
}
