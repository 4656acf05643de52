package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestApproverTrustedHeader: with trusted_header identity, a page or form
// without identity headers, or with them but without the proxy's secret,
// is 401 and decides nothing; with the secret the headers name the
// approver, whose name the decision records everywhere.
func TestApproverTrustedHeader(t *testing.T) {
	e := startApprovers(t, approverSetup{approvals: trustedHeaderIdentity})
	p := e.park(t, "agent-key-0123456789", "restart", "web-1")
	page := p.link + "?token=" + url.QueryEscape(p.token)
	dave := signedIn("dave@example.com", "")

	refused := []struct {
		name string
		who  approver
	}{
		{"no identity headers", approver{}},
		{"headers without the secret", approver{user: dave.user}},
		{"headers with a wrong secret", approver{user: dave.user, secret: "proxy-secret-0123456789abcdeX"}},
		{"the secret without a user", approver{secret: proxySecret}},
	}
	for _, tc := range refused {
		if code, body := getPage(t, page, tc.who.header()); code != http.StatusUnauthorized {
			t.Errorf("GET the page, %s: %d, want 401\n%s", tc.name, code, body)
		}
		if code, body := postForm(t, p.link, decideForm(p.token, "approve"), tc.who.header()); code != http.StatusUnauthorized {
			t.Errorf("POST the form, %s: %d, want 401\n%s", tc.name, code, body)
		}
	}
	// A secret sent twice proves nothing either.
	twice := dave.header()
	twice.Add("X-Approvals-Proxy-Secret", proxySecret)
	if code, _ := postForm(t, p.link, decideForm(p.token, "approve"), twice); code != http.StatusUnauthorized {
		t.Errorf("POST with the secret twice: %d, want 401", code)
	}
	if s := e.state(t, p.id); s != "waiting" {
		t.Fatalf("after the refused requests the call is %s, want waiting", s)
	}
	p.stillHeld(t)
	if n := e.executed("web-1"); n != 0 {
		t.Fatalf("the upstream received the call %d times before any approval", n)
	}

	code, body := getPage(t, page, dave.header())
	if code != 200 || !strings.Contains(body, "Signed in as <b>dave@example.com</b>") || !strings.Contains(body, `name="decision"`) {
		t.Fatalf("GET the page as dave: %d, want 200 with dave signed in and the form\n%s", code, body)
	}
	if code, body := postForm(t, p.link, decideForm(p.token, "approve"), dave.header()); code != 200 {
		t.Fatalf("approve as dave: %d\n%s", code, body)
	}
	if a := p.wait(t); a.code != 200 || a.body != `{"ok":true}` {
		t.Fatalf("the agent after the approval: %d %s", a.code, a.body)
	}
	if n := e.executed("web-1"); n != 1 {
		t.Fatalf("the upstream received the approved call %d times, want 1", n)
	}
	if c := getAPICall(t, e.approvals, p.id); c.DecidedBy != "dave@example.com" || c.Status != "executed" {
		t.Errorf("the API shows the call %s, decided by %q; want executed by dave@example.com", c.Status, c.DecidedBy)
	}
	if st := callStatus(t, e.proxy, p.id, "agent-key-0123456789"); st["decided_by"] != "dave@example.com" || st["status"] != "executed" {
		t.Errorf("the agent's status endpoint: %v", st)
	}
	if a := audits(t, e.replica, p.id, 1)[0]; a["decided_by"] != "dave@example.com" || a["via"] != "header" || a["outcome"] != "approved" {
		t.Errorf("audit event %v", a)
	}
	// Once decided, a later form is 409 and changes nothing.
	if code, _ := postForm(t, p.link, decideForm(p.token, "reject"), signedIn("erin@example.com", "").header()); code != http.StatusConflict {
		t.Errorf("a second decision: %d, want 409", code)
	}
}

// TestApproverSelfApproval: an approver whose name is the call's subject
// (ignoring case) cannot approve it on the page: 403, and the call stays
// waiting. Rejecting their own call is allowed.
func TestApproverSelfApproval(t *testing.T) {
	e := startApprovers(t, approverSetup{approvals: trustedHeaderIdentity})
	p := e.park(t, "alice-agent-key-0123456789", "restart", "web-2")
	if s := getAPICall(t, e.approvals, p.id).Subject; s != "alice@example.com" {
		t.Fatalf("the call's subject is %q, want alice@example.com", s)
	}
	page := p.link + "?token=" + url.QueryEscape(p.token)

	for _, name := range []string{"alice@example.com", "Alice@Example.COM"} {
		code, body := getPage(t, page, signedIn(name, "sre").header())
		if code != 200 || strings.Contains(body, `value="approve"`) || !strings.Contains(body, `value="reject"`) {
			t.Errorf("GET her own call's page as %s: %d, want 200 with Reject and without Approve\n%s", name, code, body)
		}
		if code, body := postForm(t, p.link, decideForm(p.token, "approve"), signedIn(name, "sre").header()); code != http.StatusForbidden {
			t.Errorf("approve her own call as %s: %d, want 403\n%s", name, code, body)
		}
	}
	if code, _ := decideAs(t, e.approvals, p.id, "alice-key-0123456789", "approve"); code != http.StatusForbidden {
		t.Errorf("approve her own call with her API key: %d, want 403", code)
	}
	if c := getAPICall(t, e.approvals, p.id); c.Status != "waiting" || len(c.Approvals) != 0 {
		t.Fatalf("after the refused self-approvals the call is %s with approvals %v", c.Status, c.approvers())
	}
	p.stillHeld(t)

	if code, body := postForm(t, p.link, decideForm(p.token, "reject"), signedIn("alice@example.com", "").header()); code != 200 {
		t.Fatalf("reject her own call: %d\n%s", code, body)
	}
	if a := p.wait(t); a.code != http.StatusForbidden || a.decision != "rejected" {
		t.Errorf("the agent after the rejection: %d %q %s", a.code, a.decision, a.body)
	}
	if n := e.executed("web-2"); n != 0 {
		t.Errorf("the upstream received a rejected call %d times", n)
	}
	if c := getAPICall(t, e.approvals, p.id); c.DecidedBy != "alice@example.com" || c.Status != "rejected" {
		t.Errorf("the call is %s, decided by %q", c.Status, c.DecidedBy)
	}
}

// TestApproverGroups: a call whose rule names the group sre may be decided
// only by a member of sre, known from the groups header or from
// approvals.approvers[].groups of a key-less entry. Anyone else gets 403
// and changes nothing; a member's approval executes the call once.
func TestApproverGroups(t *testing.T) {
	e := startApprovers(t, approverSetup{approvals: trustedHeaderIdentity})

	for i, who := range []approver{signedIn("erin@example.com", "dev, sre"), signedIn("carol@example.com", "")} {
		target := fmt.Sprintf("prod-%d", i)
		p := e.park(t, "agent-key-0123456789", "deploy", target)
		for _, other := range []approver{signedIn("dave@example.com", "dev,qa"), signedIn("dave@example.com", "")} {
			for _, decision := range []string{"approve", "reject"} {
				if code, body := postForm(t, p.link, decideForm(p.token, decision), other.header()); code != http.StatusForbidden {
					t.Errorf("%s as %s (groups %q): %d, want 403\n%s", decision, other.user, other.groups, code, body)
				}
			}
		}
		// An API key without groups is no member either.
		if code, _ := decideAs(t, e.approvals, p.id, "bot-key-0123456789", "approve"); code != http.StatusForbidden {
			t.Errorf("approve with the bot's key: %d, want 403", code)
		}
		if c := getAPICall(t, e.approvals, p.id); c.Status != "waiting" || len(c.Approvals) != 0 {
			t.Fatalf("after the refused decisions the call is %s with approvals %v", c.Status, c.approvers())
		}
		p.stillHeld(t)

		if code, body := postForm(t, p.link, decideForm(p.token, "approve"), who.header()); code != 200 {
			t.Fatalf("approve as %s (groups %q): %d\n%s", who.user, who.groups, code, body)
		}
		if a := p.wait(t); a.code != 200 {
			t.Fatalf("the agent after %s's approval: %d %s", who.user, a.code, a.body)
		}
		if n := e.executed(target); n != 1 {
			t.Errorf("the upstream received the call approved by %s %d times, want 1", who.user, n)
		}
		if c := getAPICall(t, e.approvals, p.id); c.DecidedBy != who.user {
			t.Errorf("decided by %q, want %s", c.DecidedBy, who.user)
		}
		a := audits(t, e.replica, p.id, 1)[0]
		if groups := fmt.Sprint(a["groups"]); a["decided_by"] != who.user || !strings.Contains(groups, "sre") {
			t.Errorf("audit event %v: want decided by %s with group sre", a, who.user)
		}
	}
	if n := len(e.up.Requests()); n != 2 {
		t.Errorf("the upstream received %d requests in all, want 2", n)
	}
}
