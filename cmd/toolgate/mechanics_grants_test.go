package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// grantRules: deploys and restarts are plain asks; a drop_table takes two
// of sre.
const grantRules = `rules:
  - {id: deploys, effect: ask, tool: deploy, target: "*"}
  - {id: restarts, effect: ask, tool: restart, target: "*"}
  - {id: two-sre, effect: ask, tool: drop_table, target: "*", approvers: {groups: [sre], min: 2}}
`

// callSeq makes every call's arguments unique: an identical call would
// attach to an earlier parked one (docs/parked-calls.md, retries attach)
// rather than be decided anew.
var callSeq atomic.Int64

// targetBody is tool arguments naming target, unique to the call.
func targetBody(target string) string {
	return `{"target":"` + target + `","seq":` + strconv.FormatInt(callSeq.Add(1), 10) + `}`
}

// grantDoc is a grant as the approvals API shows it.
type grantDoc struct {
	ID        string `json:"grant_id"`
	Subject   string `json:"subject"`
	Tool      string `json:"tool"`
	Target    string `json:"target"`
	Scope     string `json:"scope"`
	Covers    string `json:"covers"`
	Approver  string `json:"approver"`
	CallID    string `json:"call_id"`
	ExpiresAt string `json:"expires_at"`
	Sealed    *bool  `json:"sealed"`
}

// remember approves call id as the approver with key, asking for a grant
// of scope and lifetime; it returns the status and the grant, if any.
func remember(t *testing.T, approvalsBase, id, key, scope, lifetime string) (int, *grantDoc, string) {
	t.Helper()
	code, body := apiRequest(t, "POST", approvalsBase+"/api/approvals/"+id, key,
		`{"decision":"approve","remember":{"scope":"`+scope+`","lifetime":"`+lifetime+`"}}`)
	var ans struct {
		Status string    `json:"status"`
		Grant  *grantDoc `json:"grant"`
	}
	_ = json.Unmarshal([]byte(body), &ans)
	return code, ans.Grant, body
}

// askAndRemember parks tool on target as agent-42 (respond-async), and
// approves it as alice with a grant; it returns the grant.
func askAndRemember(t *testing.T, proxyBase, approvalsBase, tool, target, scope, lifetime string) grantDoc {
	t.Helper()
	p := toolCall(t, proxyBase, "agent-key-0123456789", tool, targetBody(target), async...).want(t, tool+" "+target+" before any grant", 202, "ask")
	code, g, body := remember(t, approvalsBase, p.id, "alice-key-0123456789", scope, lifetime)
	if code != 200 || g == nil || g.ID == "" || g.Scope != scope || g.Tool != tool || g.Approver != "alice" || g.CallID != p.id {
		t.Fatalf("approve and remember %s %s: %d %s", tool, target, code, body)
	}
	return *g
}

// listGrants is GET /api/grants.
func listGrants(t *testing.T, approvalsBase string) []grantDoc {
	t.Helper()
	code, body := apiRequest(t, "GET", approvalsBase+"/api/grants", "bob-key-0123456789", "")
	var list struct {
		Grants []grantDoc `json:"grants"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil {
		t.Fatalf("GET /api/grants: %d %s (%v)", code, body, err)
	}
	return list.Grants
}

func grantIDs(gs []grantDoc) []string {
	var ids []string
	for _, g := range gs {
		ids = append(ids, g.ID)
	}
	slices.Sort(ids)
	return ids
}

// allowedBy checks that a call was allowed by grant id: the decision
// log's rule IDs name it.
func allowedBy(t *testing.T, tg replica, r reply, grantID string) {
	t.Helper()
	if ids := strs(resultOf(decisionEvent(t, tg, r.id))["rule_ids"]); !slices.Contains(ids, "grant:"+grantID) {
		t.Errorf("call %s allowed by %v, want grant:%s", r.id, ids, grantID)
	}
}

// TestGrantScopes: a subject+tool+target grant covers that subject, tool
// and target only; a subject+tool grant covers the tool's other targets;
// GET /api/grants lists them; DELETE revokes, and the next call asks
// again; a call whose rule names approvers cannot be remembered.
func TestGrantScopes(t *testing.T) {
	e := startMech(t, mechSetup{rules: grantRules})

	exact := askAndRemember(t, e.proxy, e.approvals, "deploy", "alpha", "subject+tool+target", "1h")
	if exact.Target != "alpha" || !strings.Contains(exact.Subject, "agent-42") {
		t.Errorf("grant %+v, want target alpha for agent-42", exact)
	}
	r := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "deploy alpha, granted", 200, "allow")
	allowedBy(t, e.replica, r, exact.ID)
	toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("beta"), async...).want(t, "deploy beta (another target)", 202, "ask")
	toolCall(t, e.proxy, "other-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "agent-7 deploy alpha (another subject)", 202, "ask")
	toolCall(t, e.proxy, "agent-key-0123456789", "restart", targetBody("alpha"), async...).want(t, "restart alpha (another tool)", 202, "ask")

	wide := askAndRemember(t, e.proxy, e.approvals, "restart", "r1", "subject+tool", "1h")
	if wide.Target != "" {
		t.Errorf("subject+tool grant %+v names a target", wide)
	}
	for _, target := range []string{"r1", "r2", "anything/else"} {
		r := toolCall(t, e.proxy, "agent-key-0123456789", "restart", targetBody(target), async...).want(t, "restart "+target+", granted for the tool", 200, "allow")
		allowedBy(t, e.replica, r, wide.ID)
	}
	toolCall(t, e.proxy, "other-key-0123456789", "restart", targetBody("r2"), async...).want(t, "agent-7 restart r2 (another subject)", 202, "ask")
	toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("r2"), async...).want(t, "deploy r2 (another tool)", 202, "ask")

	if got, want := grantIDs(listGrants(t, e.approvals)), grantIDs([]grantDoc{exact, wide}); !slices.Equal(got, want) {
		t.Fatalf("GET /api/grants lists %v, want %v", got, want)
	}
	code, body := apiRequest(t, "DELETE", e.approvals+"/api/grants/"+exact.ID, "bob-key-0123456789", "")
	if code != 200 || !strings.Contains(body, exact.ID) {
		t.Fatalf("DELETE /api/grants/%s: %d %s", exact.ID, code, body)
	}
	toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "deploy alpha after the revocation", 202, "ask")
	if got := grantIDs(listGrants(t, e.approvals)); !slices.Equal(got, []string{wide.ID}) {
		t.Fatalf("GET /api/grants after the revocation lists %v, want only %s", got, wide.ID)
	}
	if code, _ := apiRequest(t, "DELETE", e.approvals+"/api/grants/"+exact.ID, "bob-key-0123456789", ""); code != 404 {
		t.Errorf("revoking twice: %d, want 404", code)
	}

	// A quorum ask cannot be remembered: 400, and the call is untouched.
	q := toolCall(t, e.proxy, "agent-key-0123456789", "drop_table", targetBody("users"), async...).want(t, "drop_table", 202, "ask")
	if code, g, body := remember(t, e.approvals, q.id, "bob-key-0123456789", "subject+tool", "1h"); code != 400 || g != nil {
		t.Fatalf("approve and remember a quorum ask: %d %s, want 400", code, body)
	}
	code, body = apiRequest(t, "GET", e.approvals+"/api/approvals/"+q.id, "alice-key-0123456789", "")
	var c apiCall
	if err := json.Unmarshal([]byte(body), &c); code != 200 || err != nil || c.Status != "waiting" || len(c.Approvals) != 0 {
		t.Fatalf("the quorum call after a refused remember: %d %s, want waiting with no approvals", code, body)
	}
	if got := grantIDs(listGrants(t, e.approvals)); !slices.Equal(got, []string{wide.ID}) {
		t.Fatalf("grants after the refused remember: %v", got)
	}
	toolCall(t, e.proxy, "agent-key-0123456789", "drop_table", targetBody("users"), async...).want(t, "drop_table again", 202, "ask")

	// A call that names more than its target (a second target argument,
	// an array) cannot be remembered for its target: the grant would
	// cover calls on that target alone, or, from an array alone, calls
	// with no target at all. For the tool it can.
	for _, args := range []string{`{"target":"gamma","path":"delta"}`, `{"path":["gamma"]}`} {
		p := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", args, async...).want(t, "deploy "+args, 202, "ask")
		if code, g, body := remember(t, e.approvals, p.id, "alice-key-0123456789", "subject+tool+target", "1h"); code != 400 || g != nil || !strings.Contains(body, "more than its target") {
			t.Fatalf("remember %s for its target: %d %s, want 400", args, code, body)
		}
	}
	// Nor can a call that names no target: a grant for "no target" would
	// cover every call of the tool, whatever its arguments.
	p := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", `{"seq":1}`, async...).want(t, "deploy without a target", 202, "ask")
	if code, g, body := remember(t, e.approvals, p.id, "alice-key-0123456789", "subject+tool+target", "1h"); code != 400 || g != nil || !strings.Contains(body, "names no target") {
		t.Fatalf("remember a call without a target for its target: %d %s, want 400", code, body)
	}
	toolCall(t, e.proxy, "agent-key-0123456789", "deploy", `{"seq":0}`, async...).want(t, "deploy without a target", 202, "ask")
}

// TestGrantBoundToHeaders: a grant remembered through the approvals API
// covers a later call in its scope only when it sends the headers its
// call sent: the usual ones (User-Agent, Accept, a trace) may differ; a
// header more (one that could steer the upstream), another value (a
// credential's too: its value was never shown, and any header can be
// named like one) or a header fewer asks, the
// decision log says which grant was not used, and the upstream never
// gets the call. A grant made from a call with only the usual headers
// covers only calls without others.
func TestGrantBoundToHeaders(t *testing.T) {
	e := startMech(t, mechSetup{rules: grantRules})
	sent := func(more ...string) []string {
		return append([]string{"Prefer", "respond-async", "X-Env", "staging", "X-Service-Token", "t-1"}, more...)
	}
	p := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), sent()...).want(t, "deploy alpha before any grant", 202, "ask")
	code, g, body := remember(t, e.approvals, p.id, "alice-key-0123456789", "subject+tool+target", "1h")
	if code != 200 || g == nil || !strings.Contains(g.Covers, "the same headers and other params as call "+p.id) {
		t.Fatalf("approve and remember: %d %s", code, body)
	}
	if gs := listGrants(t, e.approvals); len(gs) != 1 || gs[0].Covers != g.Covers {
		t.Errorf("GET /api/grants lists %+v, want the grant with covers %q", gs, g.Covers)
	}

	r := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), sent()...).want(t, "the same headers", 200, "allow")
	allowedBy(t, e.replica, r, g.ID)
	r = toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), "Prefer", "respond-async", "X-Env", "staging", "X-Service-Token", "t-1",
		"User-Agent", "agent/2.0", "Accept", "text/plain", "Accept-Encoding", "identity", "Idempotency-Key", "k-"+p.id,
		"Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").want(t, "other usual headers", 200, "allow")
	allowedBy(t, e.replica, r, g.ID)

	for _, tc := range []struct {
		name   string
		header []string
	}{
		{"a header more", sent("X-Target-Override", "/etc/shadow")},
		{"another value", []string{"Prefer", "respond-async", "X-Env", "prod", "X-Service-Token", "t-1"}},
		{"a header fewer", []string{"Prefer", "respond-async", "X-Service-Token", "t-1"}},
		{"no credential", []string{"Prefer", "respond-async", "X-Env", "staging"}},
		{"another credential value", []string{"Prefer", "respond-async", "X-Env", "staging", "X-Service-Token", "/etc/shadow"}},
	} {
		r := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), tc.header...).want(t, tc.name, 202, "ask")
		reasons := strs(resultOf(decisionEvent(t, e.replica, r.id))["reasons"])
		if !slices.Contains(reasons, "grant "+g.ID+" not used: the call sends headers or params its approval did not show") {
			t.Errorf("%s: reasons %q, want the grant named as not used", tc.name, reasons)
		}
	}
	reqs := e.up.Requests()
	for _, req := range reqs {
		if req.Header.Get("X-Target-Override") != "" || req.Header.Get("X-Env") != "staging" || req.Header.Get("X-Service-Token") == "" {
			t.Errorf("the upstream received a call the grant did not cover: %s %v", req.Body, req.Header)
		}
	}
	if len(reqs) < 2 {
		t.Errorf("the upstream received %d requests, want the two covered calls", len(reqs))
	}

	// From a call with only the usual headers: other usual ones are
	// covered, any other header is not.
	plain := toolCall(t, e.proxy, "agent-key-0123456789", "restart", targetBody("r1"), "Prefer", "respond-async", "User-Agent", "agent/1.0").want(t, "restart r1", 202, "ask")
	code, g, body = remember(t, e.approvals, plain.id, "alice-key-0123456789", "subject+tool", "1h")
	if code != 200 || g == nil || !strings.Contains(g.Covers, "no headers but the usual ones") {
		t.Fatalf("approve and remember restart: %d %s", code, body)
	}
	toolCall(t, e.proxy, "agent-key-0123456789", "restart", targetBody("r2"), "Prefer", "respond-async", "User-Agent", "agent/9", "Accept-Language", "fr").want(t, "restart r2, usual headers", 200, "allow")
	toolCall(t, e.proxy, "agent-key-0123456789", "restart", targetBody("r2"), "Prefer", "respond-async", "X-Env", "staging").want(t, "restart r2 with X-Env", 202, "ask")
}

// TestGrantNeverOverridesDenyOrQuorum: a subject+tool grant made while the
// tool was a plain ask does not answer the tool once its rule names
// approvers, nor once a rule denies the whole tool (the rules reloaded
// under the live grant).
func TestGrantNeverOverridesDenyOrQuorum(t *testing.T) {
	e := startMech(t, mechSetup{rules: "rules:\n  - {id: deploys, effect: ask, tool: deploy, target: \"*\"}\n"})
	g := askAndRemember(t, e.proxy, e.approvals, "deploy", "alpha", "subject+tool", "1h")
	r := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("beta"), async...).want(t, "deploy beta, granted", 200, "allow")
	allowedBy(t, e.replica, r, g.ID)

	reload := func(rules string) {
		t.Helper()
		before := readyRevision(t, e.admin)
		if err := os.WriteFile(filepath.Join(filepath.Dir(e.cfg), "rules.yaml"), []byte(rules), 0o600); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "the rules to reload", func() bool { return readyRevision(t, e.admin) != before })
	}

	reload("rules:\n  - {id: deploys, effect: ask, tool: deploy, target: \"*\", approvers: {groups: [sre], min: 2}}\n")
	toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("gamma"), async...).want(t, "deploy gamma under a quorum rule, grant live", 202, "ask")

	reload("rules:\n  - {id: no-deploy, effect: deny, tool: deploy, target: \"*\"}\n")
	d := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("delta"), async...).want(t, "deploy delta under a deny rule, grant live", 403, "deny")
	if ids := d.ruleIDs(t); !slices.Equal(ids, []string{"no-deploy"}) {
		t.Errorf("deploy delta denied by %v, want no-deploy alone", ids)
	}
	if got := grantIDs(listGrants(t, e.approvals)); !slices.Equal(got, []string{g.ID}) {
		t.Fatalf("the grant should still be live: %v", got)
	}
	for _, target := range []string{"gamma", "delta"} {
		if n := reached(e.up, `"`+target+`"`); n != 0 {
			t.Errorf("the upstream received deploy %s %d times", target, n)
		}
	}
}

// TestGrantExpires: a grant with a lifetime of 1s applies at once and
// not after its expiry.
func TestGrantExpires(t *testing.T) {
	e := startMech(t, mechSetup{rules: grantRules})
	p := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "deploy alpha", 202, "ask")
	start := time.Now()
	code, g, body := remember(t, e.approvals, p.id, "alice-key-0123456789", "subject+tool+target", "1s")
	stored := time.Now() // the grant was made between start and stored
	if code != 200 || g == nil {
		t.Fatalf("approve and remember for 1s: %d %s", code, body)
	}
	r := toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...)
	if time.Since(start) < 900*time.Millisecond {
		r.want(t, "deploy alpha within the grant's second", 200, "allow")
		allowedBy(t, e.replica, r, g.ID)
	} else {
		t.Logf("the call came %v after the grant; not checking that it was allowed", time.Since(start))
	}
	time.Sleep(time.Until(stored.Add(time.Second + 50*time.Millisecond)))
	toolCall(t, e.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "deploy alpha after the grant expired", 202, "ask")
	if gs := listGrants(t, e.approvals); len(gs) != 0 {
		t.Errorf("GET /api/grants after expiry lists %v", gs)
	}
}

// TestGrantsAcrossReplicas: two replicas on one Redis: a grant made
// through A applies on B; revoked on A, B asks again at once.
func TestGrantsAcrossReplicas(t *testing.T) {
	redisAddr := testRedis(t)
	up := testkit.NewUpstream(t, nil)
	cfg := writeMechConfig(t, up.URL, mechSetup{
		rules:   grantRules,
		pending: redisPending(redisAddr),
	})
	a, b := startReplica(t, cfg), startReplica(t, cfg)

	// Parked through B, approved and remembered through A.
	p := toolCall(t, b.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "deploy alpha on B", 202, "ask")
	code, g, body := remember(t, a.approvals, p.id, "alice-key-0123456789", "subject+tool+target", "1h")
	if code != 200 || g == nil {
		t.Fatalf("approve and remember on A: %d %s", code, body)
	}
	r := toolCall(t, b.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "deploy alpha on B, granted on A", 200, "allow")
	allowedBy(t, b, r, g.ID)
	// The grant keeps its call's headers in Redis: one more asks.
	toolCall(t, b.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), "Prefer", "respond-async", "X-Target-Override", "/etc/shadow").want(t, "deploy alpha on B with a header more", 202, "ask")
	toolCall(t, b.proxy, "agent-key-0123456789", "deploy", targetBody("beta"), async...).want(t, "deploy beta on B", 202, "ask")
	if got := grantIDs(listGrants(t, b.approvals)); !slices.Equal(got, []string{g.ID}) {
		t.Fatalf("B lists grants %v, want %s", got, g.ID)
	}

	if code, body := apiRequest(t, "DELETE", a.approvals+"/api/grants/"+g.ID, "bob-key-0123456789", ""); code != 200 {
		t.Fatalf("revoke on A: %d %s", code, body)
	}
	toolCall(t, b.proxy, "agent-key-0123456789", "deploy", targetBody("alpha"), async...).want(t, "deploy alpha on B right after A revoked", 202, "ask")
	if gs := listGrants(t, b.approvals); len(gs) != 0 {
		t.Fatalf("B lists grants %v after the revocation", gs)
	}
}

// TestMeasureGrantAndHookLatency (TOOLGATE_MEASURE=1) prints what a grant
// lookup adds to an ask turned allow, with the memory store and with
// Redis, and what a local allow hook adds to a call. It asserts nothing.
func TestMeasureGrantAndHookLatency(t *testing.T) {
	skipUnlessMeasuring(t)
	const n = 200
	// latencies sends n calls of each kind, interleaved so that both see
	// the same machine, and returns their durations by kind.
	latencies := func(t *testing.T, base string, kinds map[string]string) map[string][]time.Duration {
		out := map[string][]time.Duration{}
		for i := range n + 20 {
			for name, tool := range kinds {
				r := toolCall(t, base, "agent-key-0123456789", tool, targetBody("t1"), async...).want(t, name, 200, "allow")
				if i >= 20 { // warm-up
					out[name] = append(out[name], r.took)
				}
			}
		}
		for _, ds := range out {
			slices.Sort(ds)
		}
		return out
	}
	pct := func(ds []time.Duration, p int) time.Duration { return ds[(len(ds)-1)*p/100] }

	rules := `rules:
  - {id: granted, effect: ask, tool: granted, target: "*"}
  - {id: ruled, effect: allow, tool: ruled, target: "*"}
  - {id: hooked, effect: allow, tool: hooked, target: "*"}
`
	stores := []struct{ name, pending string }{{"memory", ""}}
	if addr := os.Getenv("TOOLGATE_TEST_REDIS_ADDR"); addr != "" {
		stores = append(stores, struct{ name, pending string }{
			"redis",
			redisPending(addr),
		})
	}
	for _, st := range stores {
		e := startMech(t, mechSetup{rules: rules, pending: st.pending, top: "log: {decisions: {console: false}}\n"})
		askAndRemember(t, e.proxy, e.approvals, "granted", "t0", "subject+tool", "1h")
		l := latencies(t, e.proxy, map[string]string{"by grant": "granted", "by rule": "ruled"})
		t.Logf("%s store, %d calls each: allowed by grant p50 %v p99 %v; allowed by rule p50 %v p99 %v; the grant adds %v at p50",
			st.name, n, pct(l["by grant"], 50), pct(l["by grant"], 99), pct(l["by rule"], 50), pct(l["by rule"], 99),
			pct(l["by grant"], 50)-pct(l["by rule"], 50))
	}

	hook := newHook(t, func(map[string]any) string { return `{"decision":"allow"}` })
	e := startMech(t, mechSetup{rules: rules, top: "log: {decisions: {console: false}}\nhooks:\n  - {name: local, url: " + hook.URL + ", match: {tool: hooked}}\n"})
	l := latencies(t, e.proxy, map[string]string{"hook": "hooked", "none": "ruled"})
	t.Logf("%d calls each: with a local allow hook p50 %v p99 %v; without p50 %v p99 %v; the hook adds %v at p50, %v at p99",
		n, pct(l["hook"], 50), pct(l["hook"], 99), pct(l["none"], 50), pct(l["none"], 99),
		pct(l["hook"], 50)-pct(l["none"], 50), pct(l["hook"], 99)-pct(l["none"], 99))
	if got := hook.asked(t, "hooked"); got != n+20 {
		t.Errorf("the hook was asked %d times, want %d", got, n+20)
	}
}
