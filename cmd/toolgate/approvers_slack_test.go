package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

const (
	slackSigningSecret = "slack-signing-secret-0123456789"

	slackApprovals = `  slack:
    signing_secret: ` + slackSigningSecret + `
    users: {U0ALICE: alice@example.com, U0BOB: bob@example.com, U0CAROL: carol@example.com}
`

	// slackResponseURL is where toolgate answers most clicks here; it
	// does not resolve (the post fails in the background). TestApproverSlack
	// sends carol's click with a response_url of its own, to read the update.
	slackResponseURL = "https://hooks.slack.com/actions/T0TEST/1/toolgate-test"
)

// slackClick is one signed interaction request, kept whole so that it can
// be sent again (a replay).
type slackClick struct {
	body   string
	header http.Header
}

// newSlackClick is Slack's block_actions request for user clicking the
// button actionID of call id, sent at ts and signed with secret.
func newSlackClick(t *testing.T, secret string, ts time.Time, user, actionID, id, responseURL string) slackClick {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"type":         "block_actions",
		"user":         map[string]any{"id": user, "username": strings.ToLower(user)},
		"team":         map[string]any{"id": "T0TEST"},
		"response_url": responseURL,
		"actions": []map[string]any{{
			"type": "button", "action_id": actionID, "block_id": "toolgate_decide", "value": id,
			"action_ts": strconv.FormatInt(ts.Unix(), 10),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := url.Values{"payload": {string(payload)}}.Encode()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + stamp + ":" + body))
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", stamp)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return slackClick{body: body, header: h}
}

// click is a click signed now with the app's secret, answered on Slack.
func click(t *testing.T, user, actionID, id string) slackClick {
	t.Helper()
	return newSlackClick(t, slackSigningSecret, time.Now(), user, actionID, id, slackResponseURL)
}

// send posts the click to the approvals listener and returns the status.
func (c slackClick) send(t *testing.T, approvalsBase string) int {
	t.Helper()
	req, err := http.NewRequest("POST", approvalsBase+"/slack/interactions", strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, c.header)
	code, _ := send(t, http.DefaultClient, req)
	return code
}

// TestApproverSlack: a click signed with the Slack app's signing secret
// decides the call as the approver its Slack user is mapped to, with the
// groups approvals.approvers gives that name. A request unsigned, forged,
// stale or replayed is 401 and changes nothing; a click by an unmapped or
// ineligible Slack user, or one whose response_url is not Slack's, changes
// nothing either.
func TestApproverSlack(t *testing.T) {
	e := startApprovers(t, approverSetup{approvals: slackApprovals})
	p := e.park(t, "agent-key-0123456789", "deploy", "slack-prod")
	const approve, reject = "toolgate_approve", "toolgate_reject"

	unsigned := click(t, "U0CAROL", approve, p.id)
	unsigned.header.Del("X-Slack-Signature")
	badVersion := click(t, "U0CAROL", approve, p.id)
	badVersion.header.Set("X-Slack-Signature", strings.Replace(badVersion.header.Get("X-Slack-Signature"), "v0=", "v1=", 1))
	tampered := click(t, "U0CAROL", approve, p.id)
	tampered.body = strings.Replace(tampered.body, "U0CAROL", "U0ALICE", 1)
	refused := []struct {
		name string
		c    slackClick
	}{
		{"unsigned", unsigned},
		{"signed with another secret", newSlackClick(t, "another-signing-secret-012345", time.Now(), "U0CAROL", approve, p.id, slackResponseURL)},
		{"a signature of another version", badVersion},
		{"a body changed after signing", tampered},
		{"six minutes old", newSlackClick(t, slackSigningSecret, time.Now().Add(-6*time.Minute), "U0CAROL", approve, p.id, slackResponseURL)},
		{"six minutes ahead", newSlackClick(t, slackSigningSecret, time.Now().Add(6*time.Minute), "U0CAROL", approve, p.id, slackResponseURL)},
	}
	for _, tc := range refused {
		if code := tc.c.send(t, e.approvals); code != http.StatusUnauthorized {
			t.Errorf("a click %s: %d, want 401", tc.name, code)
		}
	}
	// Signed and fresh, but nothing may be decided by them.
	ignored := []struct {
		name string
		c    slackClick
		want int
	}{
		{"by an unmapped Slack user", click(t, "U0MALLORY", approve, p.id), http.StatusOK},
		{"by alice, who is not in sre", click(t, "U0ALICE", approve, p.id), http.StatusOK},
		{"with a response_url that holds credentials", newSlackClick(t, slackSigningSecret, time.Now(), "U0CAROL", approve, p.id, "https://u:p@hooks.slack.com/x"), http.StatusBadRequest},
	}
	for _, tc := range ignored {
		if code := tc.c.send(t, e.approvals); code != tc.want {
			t.Errorf("a click %s: %d, want %d", tc.name, code, tc.want)
		}
	}
	if c := getAPICall(t, e.approvals, p.id); c.Status != "waiting" || len(c.Approvals) != 0 {
		t.Fatalf("after the refused clicks the call is %s with approvals %v", c.Status, c.approvers())
	}
	p.stillHeld(t)
	if n := e.executed("slack-prod"); n != 0 {
		t.Fatalf("the upstream received the call %d times before any approval", n)
	}

	// carol's click names a response_url of a stand-in for Slack: the
	// message update goes there.
	respond := testkit.NewUpstream(t, nil)
	carol := newSlackClick(t, slackSigningSecret, time.Now(), "U0CAROL", approve, p.id, respond.URL+"/actions/T0TEST/1/x")
	if code := carol.send(t, e.approvals); code != 200 {
		t.Fatalf("carol's click: %d", code)
	}
	if a := p.wait(t); a.code != 200 {
		t.Fatalf("the agent after carol's click: %d %s", a.code, a.body)
	}
	if n := e.executed("slack-prod"); n != 1 {
		t.Errorf("the upstream received the call %d times, want 1", n)
	}
	if c := getAPICall(t, e.approvals, p.id); c.DecidedBy != "carol@example.com" {
		t.Errorf("decided by %q, want carol@example.com", c.DecidedBy)
	}
	if a := audits(t, e.replica, p.id, 1)[0]; a["decided_by"] != "carol@example.com" || a["via"] != "slack" || a["outcome"] != "approved" {
		t.Errorf("audit event %v", a)
	}
	if code := carol.send(t, e.approvals); code != http.StatusUnauthorized {
		t.Errorf("carol's click replayed: %d, want 401", code)
	}
	for deadline := time.Now().Add(5 * time.Second); len(respond.Requests()) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := respond.Requests(); len(got) != 1 || got[0].Path != "/actions/T0TEST/1/x" || !strings.Contains(string(got[0].Body), "carol@example.com") {
		t.Errorf("the message update: %d posts %v", len(got), got)
	}

	// The Reject button rejects; its click, replayed, is refused too.
	q := e.park(t, "agent-key-0123456789", "deploy", "slack-staging")
	rej := click(t, "U0CAROL", reject, q.id)
	if code := rej.send(t, e.approvals); code != 200 {
		t.Fatalf("carol's reject click: %d", code)
	}
	if code := rej.send(t, e.approvals); code != http.StatusUnauthorized {
		t.Errorf("the reject click replayed: %d, want 401", code)
	}
	if a := q.wait(t); a.code != http.StatusForbidden || a.decision != "rejected" {
		t.Errorf("the agent after carol's reject click: %d %q %s", a.code, a.decision, a.body)
	}
	if c := getAPICall(t, e.approvals, q.id); c.Status != "rejected" || c.DecidedBy != "carol@example.com" {
		t.Errorf("the call is %s, decided by %q; want rejected by carol@example.com", c.Status, c.DecidedBy)
	}
	if n := e.executed("slack-staging"); n != 0 {
		t.Errorf("the upstream received a rejected call %d times", n)
	}

	// bob's entry has an API key and the group dba: his Slack click is
	// one of the two dba approvals a drop_table needs.
	d := e.park(t, "agent-key-0123456789", "drop_table", "slack-dba")
	if code := click(t, "U0BOB", approve, d.id).send(t, e.approvals); code != 200 {
		t.Fatalf("bob's click: %d", code)
	}
	if c := getAPICall(t, e.approvals, d.id); c.Status != "waiting" || len(c.Approvals) != 1 || c.Approvals[0].By != "bob@example.com" {
		t.Errorf("after bob's click the call is %s with approvals %v, want bob's one of two", c.Status, c.approvers())
	}
}

// TestApproverSlackReplayTwoReplicas: two replicas on one Redis behind the
// Slack app's one Request URL. A click received by one replica and sent
// again to the other is a replay too: the store they share remembers it
// (docs/slack.md, replays).
func TestApproverSlackReplayTwoReplicas(t *testing.T) {
	redisAddr := testRedis(t)
	up := testkit.NewUpstream(t, nil)
	ev := newEvents(t)
	cfg := writeApproverConfig(t, up.URL, ev.URL, approverSetup{
		approvals: slackApprovals,
		pending:   redisPending(redisAddr),
	})
	a, b := startReplica(t, cfg), startReplica(t, cfg)
	p := parkOn(t, a.proxy, a.approvals, ev, "agent-key-0123456789", "deploy", "slack-replicas")

	carol := click(t, "U0CAROL", "toolgate_approve", p.id)
	if code := carol.send(t, a.approvals); code != 200 {
		t.Fatalf("carol's click on replica A: %d", code)
	}
	if ans := p.wait(t); ans.code != 200 {
		t.Fatalf("the agent after carol's click: %d %s", ans.code, ans.body)
	}
	if code := carol.send(t, a.approvals); code != http.StatusUnauthorized {
		t.Errorf("carol's click replayed on replica A: %d, want 401", code)
	}
	if code := carol.send(t, b.approvals); code != http.StatusUnauthorized {
		t.Errorf("carol's click replayed on replica B: %d, want 401 (the store remembers it for every replica)", code)
	}
	time.Sleep(200 * time.Millisecond) // a wrongly repeated execution would have reached the upstream by now
	if n := len(up.Requests()); n != 1 {
		t.Fatalf("after a replay on replica B the upstream got the call %d times, want once", n)
	}
}
