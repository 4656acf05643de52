package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// The mechanics tests run toolgate serve with permission modes, PreToolUse
// hooks, dry run and remembered grants, against a recording upstream and
// recording hook servers, and check what the agent, the upstream, the hooks,
// the approvers and the decision log see. Their common point: nothing of
// this machinery gets a call past a deny.

// mechSetup is what differs between the mechanics tests' toolgates.
type mechSetup struct {
	// upstreams is the list under upstreams:, each line indented by two;
	// empty: one upstream "ops" at the test's recording upstream, prefix /.
	upstreams string
	policy    string // more keys under policy:, indented by two
	pending   string // more keys under pending:, indented by two
	top       string // more top-level keys (hooks:, log:)
	rules     string
	files     map[string]string // more files beside the config
}

// redisPending is mechSetup.pending for a Redis store at addr, under a
// key prefix of the test's own.
func redisPending(addr string) string {
	return "  store: redis\n  redis_url: redis://" + addr + "\n  redis_prefix: \"" + newPrefix() + "\"\n"
}

// writeMechConfig writes the config (and rules) of s. Agents: agent-key-0123456789
// (agent-42), other-key-0123456789 (agent-7) and boss-key-0123456789 (boss). Approvers with API
// keys: alice (no groups), bob and carol (sre).
func writeMechConfig(t *testing.T, upstream string, s mechSetup) string {
	t.Helper()
	if s.upstreams == "" {
		s.upstreams = "  - {name: ops, url: " + upstream + "}\n"
	}
	cfg := `listen: {proxy: 127.0.0.1:0, approvals: 127.0.0.1:0, admin: 127.0.0.1:0}
upstreams:
` + s.upstreams + `identity:
  api_keys:
    - {key: agent-key-0123456789, subject: agent-42}
    - {key: other-key-0123456789, subject: agent-7}
    - {key: boss-key-0123456789, subject: boss}
policy:
  rules_file: ./rules.yaml
` + s.policy + `pending:
  hold: 15s
` + s.pending + `approvals:
  secret: ` + testSecret + `
  approvers:
    - {name: alice, key: alice-key-0123456789}
    - {name: bob, key: bob-key-0123456789, groups: [sre]}
    - {name: carol, key: carol-key-0123456789, groups: [sre]}
` + s.top + `shutdown_grace: 2s
`
	files := map[string]string{"toolgate.yaml": cfg, "rules.yaml": s.rules}
	maps.Copy(files, s.files)
	dir := writeFiles(t, t.TempDir(), files)
	return filepath.Join(dir, "toolgate.yaml")
}

// logPaths are the two ways a decision event is written: straight to the
// console (no log service, no mask or drop rules: the default), and
// through OPA's decision-log plugin, which a mask rule (here one that
// masks nothing) switches on. with adds what a path needs to s.
var logPaths = []struct {
	name string
	with func(s mechSetup) mechSetup
}{
	{"direct console", func(s mechSetup) mechSetup { return s }},
	{"plugin", func(s mechSetup) mechSetup {
		s.policy += "  dir: ./policy\n"
		s.files = map[string]string{"policy/mask.rego": "package system.log\n\nmask contains \"/input/tool/arguments/no_such_argument\"\n"}
		return s
	}},
}

// mechEnv is a toolgate with its recording upstream.
type mechEnv struct {
	replica
	up  *testkit.Upstream
	cfg string // the config file; rules.yaml is beside it
}

func startMech(t *testing.T, s mechSetup) mechEnv {
	t.Helper()
	up := testkit.NewUpstream(t, nil)
	cfg := writeMechConfig(t, up.URL, s)
	return mechEnv{replica: startReplica(t, cfg), up: up, cfg: cfg}
}

// reached counts the upstream's requests whose body holds want.
func reached(up *testkit.Upstream, want string) int {
	n := 0
	for _, r := range up.Requests() {
		if strings.Contains(string(r.Body), want) {
			n++
		}
	}
	return n
}

// reply is what an agent was answered.
type reply struct {
	code     int
	decision string // X-Toolgate-Decision
	id       string // X-Toolgate-Call-Id
	body     string
	took     time.Duration
}

// toolCall POSTs body to base/tools/tool with the agent key, and more
// headers as name, value pairs.
func toolCall(t *testing.T, base, key, tool, body string, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/tools/"+tool, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{
		code: res.StatusCode, decision: res.Header.Get("X-Toolgate-Decision"), id: res.Header.Get("X-Toolgate-Call-Id"),
		body: string(b), took: time.Since(start),
	}
}

// async is the header that makes an asked call answer 202 at once.
var async = []string{"Prefer", "respond-async"}

// want fails the test unless the reply has the status and decision.
func (r reply) want(t *testing.T, what string, code int, decision string) reply {
	t.Helper()
	if r.code != code || r.decision != decision {
		t.Fatalf("%s: %d %q, want %d %q: %s", what, r.code, r.decision, code, decision, r.body)
	}
	return r
}

// ruleIDs are the rule IDs of a denied call's problem document.
func (r reply) ruleIDs(t *testing.T) []string {
	t.Helper()
	var doc struct {
		RuleIDs []string `json:"rule_ids"`
	}
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		t.Fatalf("answer %q: %v", r.body, err)
	}
	return doc.RuleIDs
}

// decisionEvent waits for call id's decision event in the replica's
// decision log and returns it.
func decisionEvent(t *testing.T, tg replica, id string) map[string]any {
	t.Helper()
	var ev map[string]any
	testkit.WaitFor(t, "the decision event of "+id, func() bool {
		ev, _ = eventsOf(tg.stderr.String(), id)
		return ev != nil
	})
	return ev
}

func resultOf(ev map[string]any) map[string]any {
	r, _ := ev["result"].(map[string]any)
	return r
}

// hooksOf is the hooks part of a decision event's result.
func hooksOf(result map[string]any) map[string]any {
	h, _ := result["hooks"].(map[string]any)
	return h
}

// strs reads a JSON array of strings.
func strs(v any) []string {
	var out []string
	vs, _ := v.([]any)
	for _, s := range vs {
		if s, ok := s.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// waitingCalls lists the calls the approvals API shows as waiting.
func waitingCalls(t *testing.T, approvalsBase string) []string {
	t.Helper()
	code, body := apiRequest(t, "GET", approvalsBase+"/api/approvals?status=waiting", "alice-key-0123456789", "")
	var list struct {
		Calls []struct {
			CallID string `json:"call_id"`
		} `json:"calls"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("GET /api/approvals: %d %s (%v)", code, body, err)
	}
	var ids []string
	for _, c := range list.Calls {
		ids = append(ids, c.CallID)
	}
	return ids
}

// apiRequest sends an approvals API request with an approver's key.
func apiRequest(t *testing.T, method, u, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return send(t, http.DefaultClient, req)
}

// hookServer is a PreToolUse hook that records what it receives.
type hookServer struct{ *testkit.Upstream }

// newHook starts a hook answering each input document with answer's body.
func newHook(t *testing.T, answer func(in map[string]any) string) hookServer {
	t.Helper()
	return hookServer{testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		var in map[string]any
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer(in))
	})}
}

// toolOf is the tool name of an input document.
func toolOf(in map[string]any) string {
	tool, _ := in["tool"].(map[string]any)
	name, _ := tool["name"].(string)
	return name
}

// argOf is one argument of an input document.
func argOf(in map[string]any, name string) string {
	tool, _ := in["tool"].(map[string]any)
	args, _ := tool["arguments"].(map[string]any)
	s, _ := args[name].(string)
	return s
}

// asked counts the hook's requests about tool.
func (h hookServer) asked(t *testing.T, tool string) int {
	t.Helper()
	n := 0
	for _, r := range h.Requests() {
		var in map[string]any
		if err := json.Unmarshal(r.Body, &in); err != nil {
			t.Fatalf("hook request body %q: %v", r.Body, err)
		}
		if toolOf(in) == tool {
			n++
		}
	}
	return n
}

// TestDenyBeatsBypassAndHookAllow: under bypass, with a hook allowing
// every call, a rules row denying a whole tool still denies it, and the
// upstream never hears of it; the same toolgate lets an ask through
// (bypass is on) and a call no rule names (the hook's allow is believed).
func TestDenyBeatsBypassAndHookAllow(t *testing.T) {
	hook := newHook(t, func(map[string]any) string { return `{"decision":"allow","reason":"all clear"}` })
	e := startMech(t, mechSetup{
		policy: "  mode: bypass\n",
		top:    "hooks:\n  - {name: all-clear, url: " + hook.URL + "}\n",
		rules: `rules:
  - {id: no-rm, effect: deny, tool: rm, target: "*"}
  - {id: deploys, effect: ask, tool: deploy, target: "*"}
`,
	})

	rm := toolCall(t, e.proxy, "agent-key-0123456789", "rm", `{"path":"build"}`).want(t, "rm", 403, "deny")
	if ids := rm.ruleIDs(t); !slices.Contains(ids, "no-rm") {
		t.Errorf("rm denied by %v, want no-rm", ids)
	}
	if n := hook.asked(t, "rm"); n != 1 {
		t.Errorf("the hook was asked %d times about rm, want 1 (its allow must have been weighed)", n)
	}
	if r := resultOf(decisionEvent(t, e.replica, rm.id)); r["action"] != "deny" || !slices.Equal(strs(r["rule_ids"]), []string{"no-rm"}) {
		t.Errorf("decision log of rm: %v, want action deny by no-rm alone", r)
	}
	// Controls: bypass and the hook's allow do work on this toolgate.
	toolCall(t, e.proxy, "agent-key-0123456789", "deploy", `{"target":"prod"}`).want(t, "deploy under bypass", 200, "allow")
	toolCall(t, e.proxy, "agent-key-0123456789", "ls", `{"path":"src"}`).want(t, "ls, allowed by the hook alone", 200, "allow")
	if n := reached(e.up, "build"); n != 0 {
		t.Fatalf("the upstream received rm %d times", n)
	}
}

// TestDryRunDeny: with policy.enforce false a denied call is forwarded,
// and the agent and the decision log (either way it is written) are told
// it was denied; an upstream with enforce: true keeps enforcing.
func TestDryRunDeny(t *testing.T) {
	for _, lp := range logPaths {
		t.Run(lp.name, func(t *testing.T) {
			up := testkit.NewUpstream(t, nil)
			enforced := testkit.NewUpstream(t, nil)
			e := startMech(t, lp.with(mechSetup{
				upstreams: "  - {name: ops, url: " + up.URL + ", prefix: /ops/}\n" +
					"  - {name: prod, url: " + enforced.URL + ", prefix: /prod/, enforce: true}\n",
				policy: "  enforce: false\n",
				rules:  "rules:\n  - {id: no-rm, effect: deny, tool: rm, target: \"*\"}\n",
			}))

			dry := toolCall(t, e.proxy+"/ops", "agent-key-0123456789", "rm", `{"path":"build"}`).want(t, "rm in dry run", 200, "dry-run:deny")
			if reqs := up.Requests(); len(reqs) != 1 || string(reqs[0].Body) != `{"path":"build"}` {
				t.Fatalf("dry run: the upstream received %v, want the rm call once", reqs)
			}
			toolCall(t, e.proxy+"/prod", "agent-key-0123456789", "rm", `{"path":"build"}`).want(t, "rm where enforce: true", 403, "deny")
			if n := len(enforced.Requests()); n != 0 {
				t.Fatalf("the enforced upstream received %d requests", n)
			}
			r := resultOf(decisionEvent(t, e.replica, dry.id))
			if r["action"] != "deny" || r["dry_run"] != true || !slices.Contains(strs(r["rule_ids"]), "no-rm") {
				t.Errorf("decision log of the dry-run rm: %v, want action deny, dry_run true, rule no-rm", r)
			}
		})
	}
}

// TestDontAskNeverWaits: dont_ask answers an ask with a deny at once (the
// hold is 15s), parks nothing and forwards nothing; a hook's ask is still
// an ask under it.
func TestDontAskNeverWaits(t *testing.T) {
	hook := newHook(t, func(map[string]any) string { return `{"decision":"ask","reason":"change freeze"}` })
	e := startMech(t, mechSetup{
		policy: "  mode: dont_ask\n",
		top:    "hooks:\n  - {name: freeze, url: " + hook.URL + ", match: {tool: release}}\n",
		rules: `rules:
  - {id: deploys, effect: ask, tool: deploy, target: "*"}
  - {id: releases, effect: allow, tool: release, target: "*"}
`,
	})

	r := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", `{"target":"prod"}`).want(t, "deploy under dont_ask", 403, "deny")
	if r.took > 3*time.Second {
		t.Errorf("dont_ask took %v to deny, want well under the 15s hold", r.took)
	}
	if ids := r.ruleIDs(t); !slices.Contains(ids, "toolgate.mode.dont_ask") || !slices.Contains(ids, "deploys") {
		t.Errorf("dont_ask deny names %v, want toolgate.mode.dont_ask and deploys", ids)
	}
	if ids := waitingCalls(t, e.approvals); len(ids) != 0 {
		t.Errorf("dont_ask parked %v", ids)
	}
	t.Logf("dont_ask answered in %v", r.took)

	// The hook's forced ask is not the mode's to refuse.
	toolCall(t, e.proxy, "agent-key-0123456789", "release", `{"target":"v2"}`, async...).want(t, "release with a hook ask under dont_ask", 202, "ask")
	if n := len(e.up.Requests()); n != 0 {
		t.Fatalf("the upstream received %d requests", n)
	}
}

// TestPlanMode: plan denies a write the rules allow, lets a read_only read
// through, and a denied read stays denied.
func TestPlanMode(t *testing.T) {
	e := startMech(t, mechSetup{
		policy: "  mode: plan\n",
		rules: `rules:
  - {id: reads, effect: allow, tool: read_file, target: "*", read_only: true}
  - {id: secrets, effect: deny, tool: read_file, target: secrets.txt}
  - {id: writes, effect: allow, tool: write_file, target: "*"}
`,
	})
	w := toolCall(t, e.proxy, "agent-key-0123456789", "write_file", `{"path":"a.txt","content":"x"}`).want(t, "write in plan", 403, "deny")
	if ids := w.ruleIDs(t); len(ids) == 0 || ids[0] != "toolgate.mode.plan" {
		t.Errorf("write denied by %v, want toolgate.mode.plan first", ids)
	}
	toolCall(t, e.proxy, "agent-key-0123456789", "read_file", `{"path":"a.txt"}`).want(t, "read_only read in plan", 200, "allow")
	s := toolCall(t, e.proxy, "agent-key-0123456789", "read_file", `{"path":"secrets.txt"}`).want(t, "denied read in plan", 403, "deny")
	if ids := s.ruleIDs(t); !slices.Contains(ids, "secrets") {
		t.Errorf("secrets.txt denied by %v, want secrets", ids)
	}
	if reqs := e.up.Requests(); len(reqs) != 1 || string(reqs[0].Body) != `{"path":"a.txt"}` {
		t.Fatalf("the upstream received %d requests, want only the read of a.txt", len(reqs))
	}
}

// TestModeScopes: a mode set for one upstream or one subject applies only
// there; the mode header is ignored from an untrusted subject, honoured from
// a trusted one, and never reaches the upstream.
func TestModeScopes(t *testing.T) {
	ops := testkit.NewUpstream(t, nil)
	lab := testkit.NewUpstream(t, nil)
	e := startMech(t, mechSetup{
		upstreams: "  - {name: ops, url: " + ops.URL + ", prefix: /ops/, mode: dont_ask}\n" +
			"  - {name: lab, url: " + lab.URL + ", prefix: /lab/}\n",
		policy: `  subject_modes: {agent-7: bypass}
  mode_header: {name: X-Toolgate-Mode, trusted_subjects: [boss]}
`,
		rules: `rules:
  - {id: deploys, effect: ask, tool: deploy, target: "*"}
  - {id: reads, effect: allow, tool: read_file, target: "*"}
`,
	})
	opsBase, labBase := e.proxy+"/ops", e.proxy+"/lab"

	// Per upstream: ops is dont_ask, lab is default.
	toolCall(t, opsBase, "agent-key-0123456789", "deploy", `{"target":"u1"}`, async...).want(t, "agent-42 on ops (dont_ask)", 403, "deny")
	toolCall(t, labBase, "agent-key-0123456789", "deploy", `{"target":"u2"}`, async...).want(t, "agent-42 on lab (default)", 202, "ask")
	// Per subject: agent-7 is bypass everywhere, before the upstream's mode.
	toolCall(t, opsBase, "other-key-0123456789", "deploy", `{"target":"s1"}`, async...).want(t, "agent-7 on ops (bypass)", 200, "allow")
	toolCall(t, labBase, "other-key-0123456789", "deploy", `{"target":"s2"}`, async...).want(t, "agent-7 on lab (bypass)", 200, "allow")
	// boss has no mode of its own: lab's default.
	toolCall(t, labBase, "boss-key-0123456789", "deploy", `{"target":"b1"}`, async...).want(t, "boss on lab without the header", 202, "ask")

	// The header from an untrusted subject: ignored, and not forwarded.
	toolCall(t, labBase, "agent-key-0123456789", "deploy", `{"target":"h1"}`, "X-Toolgate-Mode", "bypass", async[0], async[1]).
		want(t, "agent-42 sending bypass", 202, "ask")
	toolCall(t, opsBase, "agent-key-0123456789", "deploy", `{"target":"h2"}`, "X-Toolgate-Mode", "default", async[0], async[1]).
		want(t, "agent-42 sending default on ops", 403, "deny")
	toolCall(t, labBase, "agent-key-0123456789", "read_file", `{"path":"h3"}`, "X-Toolgate-Mode", "plan").want(t, "agent-42 read with the header", 200, "allow")
	// From the trusted subject: honoured, in both directions.
	toolCall(t, labBase, "boss-key-0123456789", "deploy", `{"target":"h4"}`, "X-Toolgate-Mode", "bypass").want(t, "boss sending bypass", 200, "allow")
	toolCall(t, opsBase, "boss-key-0123456789", "deploy", `{"target":"h5"}`, "X-Toolgate-Mode", "default", async[0], async[1]).
		want(t, "boss sending default on ops", 202, "ask")
	toolCall(t, labBase, "boss-key-0123456789", "deploy", `{"target":"h6"}`, "X-Toolgate-Mode", "sudo").want(t, "boss sending an unknown mode", 400, "invalid")

	for name, up := range map[string]*testkit.Upstream{"ops": ops, "lab": lab} {
		for _, r := range up.Requests() {
			if v := r.Header.Values("X-Toolgate-Mode"); len(v) > 0 {
				t.Errorf("upstream %s received X-Toolgate-Mode %q with %s", name, v, r.Body)
			}
		}
	}
	// What ran: agent-7's two deploys, agent-42's read, boss's bypassed deploy.
	if got := len(ops.Requests()) + len(lab.Requests()); got != 4 ||
		reached(ops, `"s1"`)+reached(lab, `"s2"`)+reached(lab, `"h3"`)+reached(lab, `"h4"`) != 4 {
		t.Fatalf("the upstreams received %d requests, want s1, s2, h3, h4", got)
	}
}

// whsecKey is the key of the signed hook; the config has it as whsec_.
var whsecKey = []byte("hook-signing-key-0123456789abcdef")

// verifyWebhook checks a Standard Webhooks signature, written here from
// the specification rather than with toolgate's own code.
func verifyWebhook(h http.Header, body []byte, key []byte) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("missing webhook headers: id %q timestamp %q signature %q", id, ts, sigs)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(secs, 0)).Abs() > time.Minute {
		return fmt.Errorf("webhook-timestamp %q is not now", ts)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for sig := range strings.FieldsSeq(sigs) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("webhook-signature %q does not match", sigs)
}

// TestHooks: a hook allow does not beat a rules ask; a hook ask holds under
// bypass; a hook that times out answers its on_failure answer (deny unless
// configured); a hook never sees the agent's credentials and its request is
// signed when it has a secret.
func TestHooks(t *testing.T) {
	gate := newHook(t, func(in map[string]any) string {
		switch toolOf(in) {
		case "status":
			return `{"decision":"ask","reason":"incident open"}`
		}
		return `{"decision":"allow"}`
	})
	// slow answers after its callers have given up (or after 5s).
	slow := hookServer{testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	})}
	secret := "whsec_" + base64.StdEncoding.EncodeToString(whsecKey)
	e := startMech(t, mechSetup{
		policy: "  subject_modes: {agent-7: bypass}\n",
		top: `hooks:
  - {name: gate, url: ` + gate.URL + `, match: {upstream: "o*", tool: "*"}, secret: "` + secret + `"}
  - {name: slow, url: ` + slow.URL + `, match: {tool: "slow_*"}, timeout: 300ms}
  - {name: lazy, url: ` + slow.URL + `, match: {tool: "lazy_*"}, timeout: 300ms, on_failure: ask}
`,
		rules: `rules:
  - {id: deploys, effect: ask, tool: deploy, target: "*"}
  - {id: status-ok, effect: allow, tool: status, target: "*"}
  - {id: slow-ok, effect: allow, tool: slow_op, target: "*"}
  - {id: lazy-ok, effect: allow, tool: lazy_op, target: "*"}
`,
	})

	t.Run("allow does not beat a rules ask", func(t *testing.T) {
		toolCall(t, e.proxy, "agent-key-0123456789", "deploy", `{"target":"a1"}`, async...).want(t, "deploy, hook allow", 202, "ask")
		// Control: the same call under bypass is allowed, so the hook did
		// not ask of its own.
		toolCall(t, e.proxy, "other-key-0123456789", "deploy", `{"target":"a2"}`).want(t, "deploy under bypass, hook allow", 200, "allow")
		if gate.asked(t, "deploy") != 2 {
			t.Errorf("the gate hook was asked %d times about deploy, want 2", gate.asked(t, "deploy"))
		}
	})

	t.Run("ask holds under bypass", func(t *testing.T) {
		r := toolCall(t, e.proxy, "other-key-0123456789", "status", `{"target":"b1"}`, async...).want(t, "status, hook ask, bypass", 202, "ask")
		if ev := resultOf(decisionEvent(t, e.replica, r.id)); ev["action"] != "ask" || !slices.Contains(strs(ev["rule_ids"]), "hook.gate") {
			t.Errorf("decision log: %v, want the gate hook's ask", ev)
		}
	})

	t.Run("timeout answers on_failure", func(t *testing.T) {
		r := toolCall(t, e.proxy, "agent-key-0123456789", "slow_op", `{"target":"c1"}`).want(t, "slow hook, default on_failure", 403, "deny")
		if !strings.Contains(r.body, "hook slow failed: timeout") || r.took > 3*time.Second {
			t.Errorf("slow hook: after %v: %s, want a timeout deny soon after 300ms", r.took, r.body)
		}
		toolCall(t, e.proxy, "agent-key-0123456789", "lazy_op", `{"target":"c2"}`, async...).want(t, "slow hook, on_failure ask", 202, "ask")
		if n := len(slow.Requests()); n != 2 {
			t.Errorf("the slow hooks were asked %d times, want 2", n)
		}
	})

	t.Run("requests carry no credentials and are signed", func(t *testing.T) {
		reqs := append(gate.Requests(), slow.Requests()...)
		if len(reqs) < 5 {
			t.Fatalf("the hooks received %d requests, want at least 5", len(reqs))
		}
		for _, r := range reqs {
			if r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "" {
				t.Errorf("a hook received Authorization %q, Cookie %q", r.Header.Get("Authorization"), r.Header.Get("Cookie"))
			}
			for _, key := range []string{"agent-key-0123456789", "other-key-0123456789"} {
				if strings.Contains(string(r.Body), key) || strings.Contains(fmt.Sprint(r.Header), key) {
					t.Errorf("a hook received the agent's key %q: %v %s", key, r.Header, r.Body)
				}
			}
		}
		for _, r := range gate.Requests() {
			if err := verifyWebhook(r.Header, r.Body, whsecKey); err != nil {
				t.Errorf("gate hook request: %v", err)
			}
			var in map[string]any
			if err := json.Unmarshal(r.Body, &in); err != nil || toolOf(in) == "" || in["subject"] == nil {
				t.Errorf("gate hook request is not an input document: %s", r.Body)
			}
		}
		for _, r := range slow.Requests() {
			if r.Header.Get("webhook-signature") != "" {
				t.Errorf("an unsigned hook's request has webhook-signature %q", r.Header.Get("webhook-signature"))
			}
		}
		// A tampered body fails the check: the verifier is not a no-op.
		if r := gate.Requests()[0]; verifyWebhook(r.Header, append(slices.Clone(r.Body), ' '), whsecKey) == nil {
			t.Error("the signature check accepts a changed body")
		}
	})
	if n := reached(e.up, `"a1"`) + reached(e.up, `"b1"`) + reached(e.up, `"c1"`) + reached(e.up, `"c2"`); n != 0 {
		t.Fatalf("the upstream received %d asked or denied calls", n)
	}
}

// TestHookUpdatedArguments: a hook's updated_arguments are what the policy
// decides, the upstream receives and the approver sees; a rewrite into a
// denied call is denied; the decision log (either way it is written)
// names the rewriting hook and both digests.
func TestHookUpdatedArguments(t *testing.T) {
	for _, lp := range logPaths {
		t.Run(lp.name, func(t *testing.T) {
			hook := newHook(t, func(in map[string]any) string {
				switch path := argOf(in, "path"); {
				case toolOf(in) == "write_file":
					return `{"decision":"none","updated_arguments":{"path":"notes/rewritten.txt","content":"safe"}}`
				case path == "x.txt":
					return `{"decision":"allow","updated_arguments":{"path":"secrets.txt"}}`
				default:
					return `{"decision":"allow","updated_arguments":{"path":"b.txt","mode":"rewritten"}}`
				}
			})
			e := startMech(t, lp.with(mechSetup{
				top: "hooks:\n  - {name: rewrite, url: " + hook.URL + "}\nlog: {arguments: true}\n",
				rules: `rules:
  - {id: reads, effect: allow, tool: read_file, target: "*"}
  - {id: secrets, effect: deny, tool: read_file, target: secrets.txt}
  - {id: writes, effect: ask, tool: write_file, target: "*"}
`,
			}))
			const rewritten = `{"path":"b.txt","mode":"rewritten"}`

			a := toolCall(t, e.proxy, "agent-key-0123456789", "read_file", `{"path":"a.txt"}`).want(t, "read a.txt", 200, "allow")
			c := toolCall(t, e.proxy, "agent-key-0123456789", "read_file", `{"path":"c.txt"}`).want(t, "read c.txt", 200, "allow")
			reqs := e.up.Requests()
			if len(reqs) != 2 || string(reqs[0].Body) != rewritten || string(reqs[1].Body) != rewritten {
				t.Fatalf("the upstream received %v, want the rewritten arguments twice", reqs)
			}
			digests := map[string][2]string{}
			hexDigest := regexp.MustCompile(`^[0-9a-f]{64}$`)
			for name, r := range map[string]reply{"a": a, "c": c} {
				ev := decisionEvent(t, e.replica, r.id)
				h := hooksOf(resultOf(ev))
				before, _ := h["arguments_digest"].(string)
				after, _ := h["updated_arguments_digest"].(string)
				if h["updated_by"] != "rewrite" || !hexDigest.MatchString(before) || !hexDigest.MatchString(after) || before == after {
					t.Errorf("decision log of %s: hooks %v, want updated_by rewrite and two different digests", name, h)
				}
				digests[name] = [2]string{before, after}
				tool, _ := ev["input"].(map[string]any)["tool"].(map[string]any)
				if b, _ := json.Marshal(tool["arguments"]); tool["target"] != "b.txt" || string(b) != `{"mode":"rewritten","path":"b.txt"}` {
					t.Errorf("decision log of %s: the policy saw %v, want the rewritten arguments", name, tool)
				}
			}
			// Different arguments rewritten alike: the digests say so.
			if digests["a"][0] == digests["c"][0] || digests["a"][1] != digests["c"][1] {
				t.Errorf("digests %v: want different digests before the rewrite and equal after", digests)
			}

			x := toolCall(t, e.proxy, "agent-key-0123456789", "read_file", `{"path":"x.txt"}`).want(t, "read x.txt rewritten to secrets.txt", 403, "deny")
			if ids := x.ruleIDs(t); !slices.Contains(ids, "secrets") {
				t.Errorf("the rewritten read was denied by %v, want secrets", ids)
			}
			if n := reached(e.up, "secrets.txt") + reached(e.up, "x.txt"); n != 0 {
				t.Fatalf("the upstream received the rewritten secrets read %d times", n)
			}

			// An asked call: the approver sees, and the upstream receives, the
			// rewrite.
			held := make(chan reply, 1)
			go func() {
				held <- toolCall(t, e.proxy, "agent-key-0123456789", "write_file", `{"path":"notes/orig.txt","content":"evil"}`)
			}()
			var id string
			testkit.WaitFor(t, "the write to wait", func() bool {
				ids := waitingCalls(t, e.approvals)
				if len(ids) == 1 {
					id = ids[0]
				}
				return id != ""
			})
			code, body := apiRequest(t, "GET", e.approvals+"/api/approvals/"+id, "alice-key-0123456789", "")
			var shown struct {
				Info struct {
					Arguments json.RawMessage `json:"arguments"`
					Target    string          `json:"target"`
				} `json:"info"`
			}
			if err := json.Unmarshal([]byte(body), &shown); code != 200 || err != nil {
				t.Fatalf("GET /api/approvals/%s: %d %s", id, code, body)
			}
			const write = `{"path":"notes/rewritten.txt","content":"safe"}`
			if string(shown.Info.Arguments) != write || shown.Info.Target != "notes/rewritten.txt" {
				t.Errorf("the approver sees arguments %s, target %q, want %s", shown.Info.Arguments, shown.Info.Target, write)
			}
			if code := approveAPI(t, e.approvals, id, "alice-key-0123456789"); code != 200 {
				t.Fatalf("approve: %d", code)
			}
			select {
			case r := <-held:
				r.want(t, "the approved write", 200, "approved")
			case <-time.After(10 * time.Second):
				t.Fatal("the held write got no answer")
			}
			if n, m := reached(e.up, write), reached(e.up, "evil"); n != 1 || m != 0 {
				t.Fatalf("the upstream received the rewritten write %d times and the original %d times, want 1 and 0", n, m)
			}
		})
	}
}

// skipUnlessMeasuring skips measurements unless TOOLGATE_MEASURE=1.
func skipUnlessMeasuring(t *testing.T) {
	t.Helper()
	if os.Getenv("TOOLGATE_MEASURE") != "1" {
		t.Skip("a measurement: set TOOLGATE_MEASURE=1 to run it")
	}
}

// TestHookRequestsBounded: limits.max_hook_requests bounds the hook
// requests in flight. At 1, a call while another's hook is being asked is
// denied without asking it, whatever on_failure says (allow here); once
// the first has its answer, calls are asked again.
func TestHookRequestsBounded(t *testing.T) {
	release := make(chan struct{})
	asked := make(chan struct{}, 4)
	hold := hookServer{testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		asked <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, `{"decision":"allow"}`)
	})}
	e := startMech(t, mechSetup{
		top: "limits: {max_hook_requests: 1}\nhooks:\n  - {name: hold, url: " + hold.URL + ", timeout: 10s, on_failure: allow}\n",
		rules: `rules:
  - {id: ops-ok, effect: allow, tool: op, target: "*"}
`,
	})
	first := make(chan reply, 1)
	go func() { first <- toolCall(t, e.proxy, "agent-key-0123456789", "op", `{"target":"a"}`) }()
	<-asked
	r := toolCall(t, e.proxy, "other-key-0123456789", "op", `{"target":"b"}`).want(t, "a call while the only slot is taken", 403, "deny")
	if !strings.Contains(r.body, "too many hook requests in flight") {
		t.Errorf("the refused call's answer: %s, want it to say the hooks were busy", r.body)
	}
	close(release)
	(<-first).want(t, "the call whose hook was asked", 200, "allow")
	toolCall(t, e.proxy, "other-key-0123456789", "op", `{"target":"c"}`).want(t, "a call once the slot is free", 200, "allow")
	if n := len(hold.Requests()); n != 2 {
		t.Errorf("the hook was asked %d times, want 2", n)
	}
}
