package approvals_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

const proxySecret = "proxy-secret-0123456789abcdef"

// withHeaders turns on trusted_header identity: X-User and X-Groups,
// believed with proxySecret in X-Proxy-Secret.
func withHeaders(t *testing.T) func(*approvals.Config) {
	return func(cfg *approvals.Config) {
		a, err := signin.New(signin.Config{Type: signin.TypeTrustedHeader, Header: signin.HeaderConfig{
			UserHeader: "X-User", GroupsHeader: "X-Groups", SecretHeader: "X-Proxy-Secret", Secret: proxySecret,
		}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Identity = a
		cfg.Approvers = append(cfg.Approvers, approvals.Approver{Name: "erin", Groups: []string{"sre"}},
			approvals.Approver{Name: "deploy-bot", Key: "deploy-bot-key-0123456789", Groups: []string{"sre"}})
	}
}

// as is the header set of a signed-in approver behind the proxy.
func as(user string, groups ...string) http.Header {
	h := http.Header{"X-User": {user}, "X-Proxy-Secret": {proxySecret}}
	if len(groups) > 0 {
		h.Set("X-Groups", strings.Join(groups, ","))
	}
	return h
}

// parkFor parks a call of subject whose ask reasons name approvers.
func (e *env) parkFor(subject string, approvers ...callinfo.Approvers) pending.Call {
	e.t.Helper()
	return e.parkWith(subject, nil, approvers...)
}

// parkWith is parkFor with the call's display document edited by edit
// (nil: as parkFor parks it).
func (e *env) parkWith(subject string, edit func(*callinfo.Info), approvers ...callinfo.Approvers) pending.Call {
	e.t.Helper()
	info := callinfo.Info{
		Kind: "rest", Tool: "deploy", Upstream: "ops", Subject: subject, Arguments: json.RawMessage(`{"env":"prod"}`),
		Reasons: []string{"deploys need approval"}, RuleIDs: []string{"dep"}, Method: "POST", Path: "/tools/deploy",
		Approvers: approvers,
	}
	if edit != nil {
		edit(&info)
	}
	var quorum []int
	for _, a := range approvers {
		quorum = append(quorum, a.Min)
	}
	c, _, err := e.store.Park(context.Background(), pending.Call{
		ID: rand.Text(), Subject: subject, Upstream: "ops", Tool: "deploy",
		Request: []byte("POST /tools/deploy\n{}"), RequestDigest: "digest-" + rand.Text(), Info: info.Encode(), Quorum: quorum,
	}, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) formAs(id string, h http.Header, form url.Values) response {
	e.t.Helper()
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.do(http.MethodPost, "/approvals/"+id, h, form.Encode())
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestIdentity_PagesNeedAnApprover(t *testing.T) {
	e := newEnv(t, withHeaders(t))
	c := e.park("agent-42", "write_note", `{"path":"a"}`)
	link := e.pageURL(c)
	spoofed := as("alice")
	spoofed.Set("X-Proxy-Secret", "wrong-secret-0123456789abcdef")
	for name, h := range map[string]http.Header{"no identity": nil, "spoofed without the secret": spoofed} {
		if res := e.do(http.MethodGet, link, h, ""); res.status != http.StatusUnauthorized {
			t.Errorf("%s: GET the link = %d, want 401", name, res.status)
		}
		form := url.Values{"token": {e.signer.Token(c)}, "decision": {"approve"}}
		if res := e.formAs(c.ID, h, form); res.status != http.StatusUnauthorized {
			t.Errorf("%s: POST the form = %d, want 401", name, res.status)
		}
	}
	if e.state(c.ID) != pending.Waiting {
		t.Fatal("a request without a believed identity decided the call")
	}
	res := e.formAs(c.ID, as("alice"), url.Values{"token": {e.signer.Token(c)}, "decision": {"approve"}, "comment": {"ok"}})
	if res.status != http.StatusOK {
		t.Fatalf("signed-in approver with the link: %d\n%s", res.status, res.body)
	}
	got, _ := e.store.Get(context.Background(), c.ID)
	if got.State != pending.Approved || got.DecidedBy != "alice" {
		t.Fatalf("decided %s by %q, want approved by alice (never \"link\")", got.State, got.DecidedBy)
	}
}

func TestIdentity_SelfApprovalRefusedOnThePage(t *testing.T) {
	e := newEnv(t, withHeaders(t))
	c := e.park("Alice", "write_note", `{"path":"a"}`)
	res := e.formAs(c.ID, as("alice"), url.Values{"token": {e.signer.Token(c)}, "decision": {"approve"}})
	if res.status != http.StatusForbidden || e.state(c.ID) != pending.Waiting {
		t.Fatalf("alice approving Alice's call: %d, call %s; want 403 and waiting", res.status, e.state(c.ID))
	}
	if page := e.do(http.MethodGet, e.pageURL(c), as("alice"), ""); strings.Contains(page.body, `value="approve"`) || !strings.Contains(page.body, `value="reject"`) {
		t.Error("the page of alice's own call should offer Reject and not Approve")
	}
	res = e.formAs(c.ID, as("alice"), url.Values{"token": {e.signer.Token(c)}, "decision": {"reject"}, "comment": {"not needed"}})
	if res.status != http.StatusOK || e.state(c.ID) != pending.Rejected {
		t.Fatalf("alice rejecting her own call: %d, %s", res.status, e.state(c.ID))
	}

	// Signed in, without the link: the page offers Reject too, and its
	// form (with the form token) rejects.
	d := e.park("alice", "write_note", `{"path":"b"}`)
	page := e.do(http.MethodGet, "/approvals/"+d.ID, as("alice"), "")
	if page.status != http.StatusOK || strings.Contains(page.body, `value="approve"`) || !strings.Contains(page.body, `value="reject"`) {
		t.Fatalf("alice's own call without the link: %d, want a page offering Reject only\n%s", page.status, page.body)
	}
	m := csrfField.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatal("no form token on the page")
	}
	if res := e.formAs(d.ID, as("alice"), url.Values{"csrf": {m[1]}, "decision": {"reject"}}); res.status != http.StatusOK || e.state(d.ID) != pending.Rejected {
		t.Fatalf("alice rejecting her own call from the page: %d, %s", res.status, e.state(d.ID))
	}
}

func TestIdentity_GroupScopedAsk(t *testing.T) {
	e := newEnv(t, withHeaders(t))
	c := e.parkFor("agent-42", callinfo.Approvers{Groups: []string{"sre"}, Min: 1})
	form := url.Values{"token": {e.signer.Token(c)}, "decision": {"reject"}}
	if res := e.formAs(c.ID, as("mallory", "dev", "sre-team", "SRE"), form); res.status != http.StatusForbidden {
		t.Fatalf("an approver outside sre: %d, want 403\n%s", res.status, res.body)
	}
	if e.state(c.ID) != pending.Waiting {
		t.Fatal("an ineligible rejection changed the call")
	}
	// Without identity on the link, the call names approvers: nobody
	// with only the link can decide it. The API key alice is not in sre.
	if res := e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"approve"}`); res.status != http.StatusForbidden {
		t.Fatalf("alice's key, not in sre: %d, want 403", res.status)
	}
	// An entry's groups belong to its name however it is known: signed
	// in as deploy-bot, whose entry also has a key, is in sre.
	c2 := e.parkFor("agent-42", callinfo.Approvers{Groups: []string{"sre"}, Min: 1})
	if res := e.formAs(c2.ID, as("deploy-bot"), url.Values{"token": {e.signer.Token(c2)}, "decision": {"approve"}}); res.status != http.StatusOK || e.state(c2.ID) != pending.Approved {
		t.Fatalf("signed in as a keyed approver in sre: %d, %s\n%s", res.status, e.state(c2.ID), res.body)
	}
	// A name that is erin's only under Unicode case folding (U+0130,
	// which strings.ToLower makes "i") is not erin: the quorum would count
	// it as another approver, so it gets none of her groups.
	form.Set("decision", "approve")
	if res := e.formAs(c.ID, as("er\u0130n"), form); res.status != http.StatusForbidden || e.state(c.ID) != pending.Waiting {
		t.Fatalf("a Unicode look-alike of erin: %d, %s; want 403 and waiting", res.status, e.state(c.ID))
	}
	// erin is in sre through approvals.approvers[].groups, her name
	// compared ignoring (ASCII) case.
	if res := e.formAs(c.ID, as("Erin"), form); res.status != http.StatusOK {
		t.Fatalf("erin (sre from the configuration): %d\n%s", res.status, res.body)
	}
	if e.state(c.ID) != pending.Approved {
		t.Fatalf("call %s, want approved", e.state(c.ID))
	}
}

func TestIdentity_NamedApproversNeedAnIdentity(t *testing.T) {
	e := newEnv(t) // no identity: links alone
	c := e.parkFor("agent-42", callinfo.Approvers{Subjects: []string{"alice"}, Min: 1})
	if res := e.decideForm(c, "approve", ""); res.status != http.StatusForbidden || e.state(c.ID) != pending.Waiting {
		t.Fatalf("a bare link on a call naming its approvers: %d, %s; want 403 and waiting", res.status, e.state(c.ID))
	}
	if res := e.api(http.MethodPost, "/api/approvals/"+c.ID, bobKey, `{"decision":"approve"}`); res.status != http.StatusForbidden {
		t.Fatalf("bob's key, not named: %d, want 403", res.status)
	}
	if res := e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"approve"}`); res.status != http.StatusOK || e.state(c.ID) != pending.Approved {
		t.Fatalf("alice's key, named: %d, %s", res.status, e.state(c.ID))
	}
}

func TestIdentity_Quorum(t *testing.T) {
	e := newEnv(t, withHeaders(t))
	c := e.parkFor("agent-42", callinfo.Approvers{Groups: []string{"sre"}, Min: 2})
	form := url.Values{"token": {e.signer.Token(c)}, "decision": {"approve"}}
	for range 2 { // the same approver twice counts once
		if res := e.formAs(c.ID, as("dana", "sre"), form); res.status != http.StatusOK || !strings.Contains(res.body, "1 of 2 approvals") {
			t.Fatalf("dana's approval: %d\n%s", res.status, res.body)
		}
	}
	got, _ := e.store.Get(context.Background(), c.ID)
	if got.State != pending.Waiting || len(got.Approvals) != 1 {
		t.Fatalf("after dana twice: %s with %d approvals, want waiting with 1", got.State, len(got.Approvals))
	}
	res := e.api(http.MethodGet, "/api/approvals/"+c.ID, aliceKey, "")
	if !strings.Contains(res.body, `"progress":"1 of 2 approvals"`) || !strings.Contains(res.body, `"by":"dana"`) {
		t.Errorf("the API does not show the partial approval:\n%s", res.body)
	}
	if len(e.onDecisionCalls()) != 0 {
		t.Error("OnDecision was told of a partial approval")
	}
	if recs := e.logRecords(t, "approval"); len(recs) != 1 || recs[0]["partial"] != true || recs[0]["decided_by"] != "dana" {
		t.Errorf("audit records after dana's approval twice: %v, want one partial approval by dana", recs)
	}
	if res := e.formAs(c.ID, as("erin"), form); res.status != http.StatusOK || e.state(c.ID) != pending.Approved {
		t.Fatalf("erin completes the quorum: %d, %s", res.status, e.state(c.ID))
	}
	if n := len(e.onDecisionCalls()); n != 1 {
		t.Errorf("OnDecision told %d times, want once", n)
	}

	// The first eligible rejection rejects a call that has an approval.
	c2 := e.parkFor("agent-42", callinfo.Approvers{Groups: []string{"sre"}, Min: 2})
	form.Set("token", e.signer.Token(c2))
	e.formAs(c2.ID, as("dana", "sre"), form)
	form.Set("decision", "reject")
	if res := e.formAs(c2.ID, as("erin"), form); res.status != http.StatusOK || e.state(c2.ID) != pending.Rejected {
		t.Fatalf("erin's rejection after dana's approval: %d, %s", res.status, e.state(c2.ID))
	}
}

func TestIdentity_InboxAndFormToken(t *testing.T) {
	e := newEnv(t, withHeaders(t))
	mine := e.parkFor("agent-42", callinfo.Approvers{Groups: []string{"sre"}, Min: 1})
	other := e.parkFor("agent-42", callinfo.Approvers{Groups: []string{"finance"}, Min: 1})
	own := e.park("dana", "write_note", `{}`)
	open := e.park("agent-7", "write_note", `{}`)
	res := e.do(http.MethodGet, "/approvals", as("dana", "sre"), "")
	if res.status != http.StatusOK {
		t.Fatalf("inbox: %d\n%s", res.status, res.body)
	}
	for _, c := range []pending.Call{mine, open} {
		if !strings.Contains(res.body, "approvals/"+c.ID) {
			t.Errorf("the inbox lacks %s, which dana may decide", c.ID)
		}
	}
	for _, c := range []pending.Call{other, own} {
		if strings.Contains(res.body, c.ID) {
			t.Errorf("the inbox lists %s, which dana may not decide", c.ID)
		}
	}
	if res := e.do(http.MethodGet, "/approvals", nil, ""); res.status != http.StatusUnauthorized {
		t.Errorf("inbox without identity: %d, want 401", res.status)
	}
	if res := e.do(http.MethodGet, "/approvals/"+other.ID, as("dana", "sre"), ""); res.status != http.StatusForbidden {
		t.Errorf("another group's call without a link: %d, want 403", res.status)
	}

	page := e.do(http.MethodGet, "/approvals/"+mine.ID, as("dana", "sre"), "")
	m := csrfField.FindStringSubmatch(page.body)
	if page.status != http.StatusOK || m == nil || strings.Contains(page.body, `name="token"`) {
		t.Fatalf("the page from the inbox: %d, form token found %v\n%s", page.status, m != nil, page.body)
	}
	// erin's form token is not dana's, and another call's is not this one's.
	for name, tok := range map[string]string{"forged": "AAAA", "empty": "", "another call's": csrfOf(t, e, open, as("dana", "sre"))} {
		if res := e.formAs(mine.ID, as("dana", "sre"), url.Values{"csrf": {tok}, "decision": {"approve"}}); res.status != http.StatusForbidden {
			t.Errorf("%s form token: %d, want 403", name, res.status)
		}
	}
	if res := e.formAs(mine.ID, as("erin"), url.Values{"csrf": {m[1]}, "decision": {"approve"}}); res.status != http.StatusForbidden {
		t.Errorf("dana's form token sent by erin: %d, want 403", res.status)
	}
	cross := as("dana", "sre")
	cross.Set("Sec-Fetch-Site", "cross-site")
	if res := e.formAs(mine.ID, cross, url.Values{"csrf": {m[1]}, "decision": {"approve"}}); res.status != http.StatusForbidden {
		t.Errorf("cross-site post: %d, want 403", res.status)
	}
	if e.state(mine.ID) != pending.Waiting {
		t.Fatal("a refused form decided the call")
	}
	if res := e.formAs(mine.ID, as("dana", "sre"), url.Values{"csrf": {m[1]}, "decision": {"approve"}}); res.status != http.StatusOK || e.state(mine.ID) != pending.Approved {
		t.Fatalf("dana's own form: %d, %s\n%s", res.status, e.state(mine.ID), res.body)
	}
	// The decided call is still shown to her, read only.
	if res := e.do(http.MethodGet, "/approvals/"+mine.ID, as("dana", "sre"), ""); res.status != http.StatusOK || strings.Contains(res.body, `value="approve"`) {
		t.Errorf("reloading after the decision: %d\n%s", res.status, res.body)
	}
}

func csrfOf(t *testing.T, e *env, c pending.Call, h http.Header) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(e.do(http.MethodGet, "/approvals/"+c.ID, h, "").body)
	if m == nil {
		t.Fatalf("no form token on %s's page", c.ID)
	}
	return m[1]
}

func TestIdentity_NoInboxWithoutIdentity(t *testing.T) {
	e := newEnv(t)
	if res := e.do(http.MethodGet, "/approvals", nil, ""); res.status != http.StatusNotFound {
		t.Errorf("GET /approvals without identity: %d, want 404", res.status)
	}
}
