package main

import (
	"bufio"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// The approver tests run toolgate serve with approvals.identity, approver
// groups, quorums and Slack, against a recording upstream, and decide
// parked calls the way approvers do: on the page (behind an authenticating
// proxy's headers, or signed in with OIDC), in the inbox, through the API
// and from Slack.

const (
	// proxySecret is what the authenticating proxy in front sends in
	// X-Approvals-Proxy-Secret to be believed.
	proxySecret = "proxy-secret-0123456789abcdef"

	trustedHeaderIdentity = `  identity:
    type: trusted_header
    user_header: X-Auth-Request-Email
    groups_header: X-Auth-Request-Groups
    secret: ` + proxySecret + `
`

	// approverRules has one ask row of each kind: anyone may approve a
	// restart, only sre a deploy, and a drop_table takes two of dba.
	approverRules = `rules:
  - {id: plain, effect: ask, tool: restart, target: "*"}
  - {id: sre-only, effect: ask, tool: deploy, target: "*", approvers: {groups: [sre]}}
  - {id: two-dba, effect: ask, tool: drop_table, target: "*", approvers: {groups: [dba], min: 2}}
`
)

// approverSetup is what differs between the approver tests' toolgates.
type approverSetup struct {
	approvals string // more keys under approvals: (identity, slack), indented by two
	top       string // more top-level keys (public_url)
	listen    string // the approvals listener's address; default 127.0.0.1:0
	pending   string // more keys under pending: (store), indented by two
	rules     string // default approverRules
}

// approverEnv is a toolgate with a recording upstream and a receiver of
// its notifications, whose approval links carry the tokens.
type approverEnv struct {
	replica
	up *testkit.Upstream
	ev events
}

// writeApproverConfig writes the config (and rules) of s and returns the
// config file. Agents: agent-key-0123456789 (agent-42) and alice-agent-key-0123456789, whose
// subject is the approver alice@example.com. Approvers with API keys:
// bot (no groups), alice@example.com, bob@example.com (dba); without a
// key: carol@example.com (sre).
func writeApproverConfig(t *testing.T, upstream, notifyURL string, s approverSetup) string {
	t.Helper()
	if s.listen == "" {
		s.listen = "127.0.0.1:0"
	}
	if s.rules == "" {
		s.rules = approverRules
	}
	cfg := `listen: {proxy: 127.0.0.1:0, approvals: ` + s.listen + `, admin: 127.0.0.1:0}
` + s.top + `upstreams:
  - {name: ops, url: ` + upstream + `}
identity:
  api_keys:
    - {key: agent-key-0123456789, subject: agent-42}
    - {key: alice-agent-key-0123456789, subject: alice@example.com}
policy:
  rules_file: ./rules.yaml
pending:
  hold: 15s
` + s.pending + `approvals:
  secret: ` + testSecret + `
  approvers:
    - {name: bot, key: bot-key-0123456789}
    - {name: alice@example.com, key: alice-key-0123456789}
    - {name: bob@example.com, key: bob-key-0123456789, groups: [dba]}
    - {name: carol@example.com, groups: [sre]}
  notify: [{url: ` + notifyURL + `, format: cloudevents}]
` + s.approvals + `shutdown_grace: 2s
`
	dir := writeFiles(t, t.TempDir(), map[string]string{"toolgate.yaml": cfg, "rules.yaml": s.rules})
	return filepath.Join(dir, "toolgate.yaml")
}

// startApprovers starts one toolgate configured by s.
func startApprovers(t *testing.T, s approverSetup) approverEnv {
	t.Helper()
	up := testkit.NewUpstream(t, nil)
	ev := newEvents(t)
	return approverEnv{replica: startReplica(t, writeApproverConfig(t, up.URL, ev.URL, s)), up: up, ev: ev}
}

// heldAnswer is what a held agent was finally answered.
type heldAnswer struct {
	code     int
	body     string
	id       string
	decision string // X-Toolgate-Decision
}

// parked is a call an agent waits on.
type parked struct {
	id, link, token string // link: the page on this replica, without the token
	answer          <-chan heldAnswer
}

// park sends tool with {"target": target} as the agent with key, held
// (no respond-async), and returns once the call is parked and announced.
// Every call of a test needs its own target: it is how its event is found.
func (e approverEnv) park(t *testing.T, key, tool, target string) parked {
	t.Helper()
	return parkOn(t, e.proxy, e.approvals, e.ev, key, tool, target)
}

// parkOn parks a held call on the replica whose proxy listener is proxyBase
// and links its page to approvalsBase.
func parkOn(t *testing.T, proxyBase, approvalsBase string, ev events, key, tool, target string) parked {
	t.Helper()
	req, err := http.NewRequest("POST", proxyBase+"/tools/"+tool, strings.NewReader(`{"target":"`+target+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	ch := make(chan heldAnswer, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- heldAnswer{code: -1, body: err.Error()}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		ch <- heldAnswer{code: res.StatusCode, body: string(b), id: res.Header.Get("X-Toolgate-Call-Id"), decision: res.Header.Get("X-Toolgate-Decision")}
	}()
	var id string
	testkit.WaitFor(t, "the approval.requested event of "+tool+" "+target, func() bool {
		for _, d := range ev.requested(t) {
			if d["target"] == target {
				id, _ = d["call_id"].(string)
				return true
			}
		}
		select {
		case a := <-ch:
			t.Fatalf("%s %s was answered at once: %d %s", tool, target, a.code, a.body)
		default:
		}
		return false
	})
	link, token := relink(t, ev.approvalURL(t, id), approvalsBase)
	return parked{id: id, link: link, token: token, answer: ch}
}

// wait returns the held agent's answer.
func (p parked) wait(t *testing.T) heldAnswer {
	t.Helper()
	select {
	case a := <-p.answer:
		if a.id != p.id {
			t.Errorf("the agent's answer names call %q, want %q", a.id, p.id)
		}
		return a
	case <-time.After(10 * time.Second):
		t.Fatalf("call %s: the held agent got no answer", p.id)
		return heldAnswer{}
	}
}

// stillHeld fails the test if the agent has been answered.
func (p parked) stillHeld(t *testing.T) {
	t.Helper()
	select {
	case a := <-p.answer:
		t.Fatalf("call %s: the agent was answered %d %s while the call should wait", p.id, a.code, a.body)
	default:
	}
}

// executed counts the requests the upstream received for target.
func (e approverEnv) executed(target string) int {
	n := 0
	for _, r := range e.up.Requests() {
		if strings.Contains(string(r.Body), `"target":"`+target+`"`) {
			n++
		}
	}
	return n
}

// approver is who the authenticating proxy in front names: the identity
// headers, and the proxy's secret that makes toolgate believe them.
type approver struct {
	user, groups, secret string
}

func (a approver) header() http.Header {
	h := http.Header{}
	if a.user != "" {
		h.Set("X-Auth-Request-Email", a.user)
	}
	if a.groups != "" {
		h.Set("X-Auth-Request-Groups", a.groups)
	}
	if a.secret != "" {
		h.Set("X-Approvals-Proxy-Secret", a.secret)
	}
	return h
}

// signedIn is an approver the proxy in front vouches for.
func signedIn(user, groups string) approver {
	return approver{user: user, groups: groups, secret: proxySecret}
}

// getPage GETs an approvals page with header.
func getPage(t *testing.T, u string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, header)
	return send(t, http.DefaultClient, req)
}

// postForm POSTs a page's form with header.
func postForm(t *testing.T, u string, form url.Values, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, header)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return send(t, http.DefaultClient, req)
}

func send(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// decideForm is the form of a link's page.
func decideForm(token, decision string) url.Values {
	return url.Values{"token": {token}, "decision": {decision}}
}

// apiCall is a call as GET /api/approvals/{id} shows it to the bot.
type apiCall struct {
	Status    string `json:"status"`
	DecidedBy string `json:"decided_by"`
	Subject   string `json:"subject"`
	Progress  string `json:"progress"`
	Approvals []struct {
		By string `json:"by"`
	} `json:"approvals"`
}

func (c apiCall) approvers() []string {
	var out []string
	for _, a := range c.Approvals {
		out = append(out, a.By)
	}
	return out
}

func getAPICall(t *testing.T, approvalsBase, id string) apiCall {
	t.Helper()
	req, _ := http.NewRequest("GET", approvalsBase+"/api/approvals/"+id, nil)
	req.Header.Set("Authorization", "Bearer bot-key-0123456789")
	code, body := send(t, http.DefaultClient, req)
	var c apiCall
	if err := json.Unmarshal([]byte(body), &c); code != 200 || err != nil {
		t.Fatalf("GET /api/approvals/%s: %d %s (%v)", id, code, body, err)
	}
	return c
}

// state is the call's status as the approvals API shows it.
func (e approverEnv) state(t *testing.T, id string) string {
	t.Helper()
	return getAPICall(t, e.approvals, id).Status
}

// decideAs decides a call through the API with an approver's key, and
// returns the status and the decoded answer.
func decideAs(t *testing.T, approvalsBase, id, key, decision string) (int, apiCall) {
	t.Helper()
	code, c, err := tryDecide(approvalsBase, id, key, decision)
	if err != nil {
		t.Fatal(err)
	}
	return code, c
}

// tryDecide is decideAs for goroutines other than the test's.
func tryDecide(approvalsBase, id, key, decision string) (int, apiCall, error) {
	req, err := http.NewRequest("POST", approvalsBase+"/api/approvals/"+id, strings.NewReader(`{"decision":"`+decision+`"}`))
	if err != nil {
		return 0, apiCall{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, apiCall{}, err
	}
	defer res.Body.Close()
	var c apiCall
	_ = json.NewDecoder(res.Body).Decode(&c)
	return res.StatusCode, c, nil
}

// callStatus is the agent's view of its call: GET /_toolgate/calls/{id}.
func callStatus(t *testing.T, proxyBase, id, agentKey string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", proxyBase+"/_toolgate/calls/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+agentKey)
	code, body := send(t, http.DefaultClient, req)
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); code != 200 || err != nil {
		t.Fatalf("GET /_toolgate/calls/%s: %d %s (%v)", id, code, body, err)
	}
	return doc
}

// audits returns the results of the audit events (toolgate/approval) of
// call id in the decision log, waiting until there are want of them.
func audits(t *testing.T, tg replica, id string, want int) []map[string]any {
	t.Helper()
	var out []map[string]any
	read := func() bool {
		out = nil
		sc := bufio.NewScanner(strings.NewReader(tg.stderr.String()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) != nil || ev["msg"] != "Decision Log" || ev["decision_id"] != id || ev["path"] != "toolgate/approval" {
				continue
			}
			r, _ := ev["result"].(map[string]any)
			out = append(out, r)
		}
		return len(out) >= want
	}
	for deadline := time.Now().Add(5 * time.Second); !read(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("call %s: %d audit events in the decision log, want %d", id, len(out), want)
		}
	}
	if len(out) != want {
		t.Fatalf("call %s: %d audit events in the decision log, want %d: %v", id, len(out), want, out)
	}
	return out
}
