package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testkit"
)

var (
	inboxLink = regexp.MustCompile(`href="\./approvals/([^"]+)"`)
	csrfField = regexp.MustCompile(`<input type="hidden" name="csrf" value="([^"]+)">`)
)

// inbox returns the call IDs GET /approvals lists for who.
func inbox(t *testing.T, approvalsBase string, who approver) []string {
	t.Helper()
	code, body := getPage(t, approvalsBase+"/approvals", who.header())
	if code != 200 {
		t.Fatalf("GET /approvals as %s: %d\n%s", who.user, code, body)
	}
	var ids []string
	for _, m := range inboxLink.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	slices.Sort(ids)
	return ids
}

// formToken opens a call's page as the inbox links it (no token) and
// returns the form's csrf field.
func formToken(t *testing.T, approvalsBase, id string, who approver) string {
	t.Helper()
	code, body := getPage(t, approvalsBase+"/approvals/"+id, who.header())
	m := csrfField.FindStringSubmatch(body)
	if code != 200 || m == nil || strings.Contains(body, `name="token"`) {
		t.Fatalf("GET /approvals/%s from the inbox as %s: %d, want 200 with a csrf field and no token\n%s", id, who.user, code, body)
	}
	return m[1]
}

func sortedIDs(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// TestApproverInbox: the inbox of a signed-in approver lists exactly the
// waiting calls they may decide; a page opened from it carries a form
// token, which decides that call for that approver only, and never in a
// cross-origin post.
func TestApproverInbox(t *testing.T) {
	e := startApprovers(t, approverSetup{approvals: trustedHeaderIdentity})
	alice := signedIn("alice@example.com", "sre")
	dba1 := signedIn("dba1@example.com", "dba")

	sre := e.park(t, "agent-key-0123456789", "deploy", "inbox-sre")
	dba := e.park(t, "agent-key-0123456789", "drop_table", "inbox-dba")
	own := e.park(t, "alice-agent-key-0123456789", "restart", "inbox-own") // alice's own call
	plain := e.park(t, "agent-key-0123456789", "restart", "inbox-plain")

	if got, want := inbox(t, e.approvals, alice), sortedIDs(sre.id, plain.id); !slices.Equal(got, want) {
		t.Errorf("alice's inbox lists %v, want %v (sre %s, plain %s; not dba %s, not her own %s)", got, want, sre.id, plain.id, dba.id, own.id)
	}
	if got, want := inbox(t, e.approvals, dba1), sortedIDs(dba.id, own.id, plain.id); !slices.Equal(got, want) {
		t.Errorf("dba1's inbox lists %v, want %v", got, want)
	}
	if code, _ := getPage(t, e.approvals+"/approvals", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /approvals without identity: %d, want 401", code)
	}
	// A call alice may not decide has no page for her without its link.
	if code, _ := getPage(t, e.approvals+"/approvals/"+dba.id, alice.header()); code != http.StatusForbidden {
		t.Errorf("GET another group's call from the inbox: %d, want 403", code)
	}

	page := e.approvals + "/approvals/" + sre.id
	csrf := formToken(t, e.approvals, sre.id, alice)
	approve := func(token string) url.Values { return url.Values{"csrf": {token}, "decision": {"approve"}} }
	crossSite := alice.header()
	crossSite.Set("Origin", "https://evil.example")
	crossSite.Set("Sec-Fetch-Site", "cross-site")
	refused := []struct {
		name   string
		form   url.Values
		header http.Header
	}{
		{"a wrong csrf", approve("v1.bogus"), alice.header()},
		{"another call's csrf", approve(formToken(t, e.approvals, plain.id, alice)), alice.header()},
		{"alice's csrf sent by erin", approve(csrf), signedIn("erin@example.com", "sre").header()},
		{"no csrf", url.Values{"decision": {"approve"}}, alice.header()},
		{"a cross-site post", approve(csrf), crossSite},
	}
	for _, tc := range refused {
		if code, body := postForm(t, page, tc.form, tc.header); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403\n%s", tc.name, code, body)
		}
	}
	if s := e.state(t, sre.id); s != "waiting" {
		t.Fatalf("after the refused forms the call is %s", s)
	}
	sre.stillHeld(t)

	if code, body := postForm(t, page, approve(csrf), alice.header()); code != 200 || !strings.Contains(body, "Approved") {
		t.Fatalf("POST the inbox page's form: %d\n%s", code, body)
	}
	if a := sre.wait(t); a.code != 200 {
		t.Fatalf("the agent after the approval: %d %s", a.code, a.body)
	}
	if n := e.executed("inbox-sre"); n != 1 {
		t.Errorf("the upstream received the call %d times, want 1", n)
	}
	if c := getAPICall(t, e.approvals, sre.id); c.DecidedBy != "alice@example.com" {
		t.Errorf("decided by %q", c.DecidedBy)
	}
	if got := inbox(t, e.approvals, alice); !slices.Equal(got, []string{plain.id}) {
		t.Errorf("alice's inbox after her decision lists %v, want only %s", got, plain.id)
	}
	for _, p := range []parked{dba, own, plain} {
		if s := e.state(t, p.id); s != "waiting" {
			t.Errorf("call %s, never decided, is %s", p.id, s)
		}
	}
}

// TestApproverOIDC: a browser that opens an approval link without a session
// is sent through the identity provider's sign-in and back to the page,
// signed in; its approval is recorded under the provider's e-mail. A user
// outside the call's group signs in too, and cannot decide; one outside
// allowed_groups cannot sign in. Signing out goes through the provider's
// end_session_endpoint and back to toolgate's signed-out page.
func TestApproverOIDC(t *testing.T) {
	idp := testkit.NewOIDCProvider(t, "toolgate", "oidc-client-secret")
	addr := testkit.FreeAddrs(t, 1)[0] // known before it starts: the OIDC redirect URL
	idp.SetEndSession(idp.URL+"/logout", "http://"+addr+"/auth/signed-out")
	e := startApprovers(t, approverSetup{
		listen: addr,
		top:    "public_url: http://" + addr + "\n",
		approvals: fmt.Sprintf(`  identity:
    type: oidc
    issuer: %s
    client_id: toolgate
    client_secret: oidc-client-secret
    cookie_secret: 0123456789abcdef0123456789abcdef-cookie
    allowed_groups: [sre, dev]
`, idp.URL),
	})
	p := e.park(t, "agent-key-0123456789", "deploy", "oidc-prod")
	page := p.link + "?token=" + url.QueryEscape(p.token)

	// browse opens the page in a fresh browser signed in as u, and returns
	// the browser and the paths its redirects went through.
	browse := func(u testkit.OIDCUser) (*http.Client, []string, string) {
		t.Helper()
		idp.SetUser(u)
		b := testkit.Browser(t)
		var hops []string
		b.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			hops = append(hops, req.URL.Path)
			if len(via) > 10 {
				return fmt.Errorf("redirect loop: %v", hops)
			}
			return nil
		}
		res, err := b.Get(page)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(res)
		if res.StatusCode != 200 || res.Request.URL.Path != "/approvals/"+p.id {
			t.Fatalf("sign-in as %s ended %d at %s (via %v)\n%s", u.Email, res.StatusCode, res.Request.URL, hops, body)
		}
		return b, hops, body
	}

	// Somebody in none of allowed_groups is not signed in at all.
	idp.SetUser(testkit.OIDCUser{Email: "quinn@example.com", Groups: []string{"qa"}})
	res, err := testkit.Browser(t).Get(page)
	if err != nil {
		t.Fatal(err)
	}
	if text := readAll(res); res.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in of quinn (qa): %d at %s, want 403\n%s", res.StatusCode, res.Request.URL.Path, text)
	}

	dev, _, body := browse(testkit.OIDCUser{Email: "devon@example.com", Groups: []string{"dev"}})
	if !strings.Contains(body, "Signed in as <b>devon@example.com</b>") || strings.Contains(body, `name="decision"`) {
		t.Errorf("devon (dev) sees the sre call's page without being signed in, or with the form\n%s", body)
	}
	res, err = dev.PostForm(p.link, decideForm(p.token, "approve"))
	if err != nil {
		t.Fatal(err)
	}
	if text := readAll(res); res.StatusCode != http.StatusForbidden {
		t.Errorf("approve as devon (dev): %d, want 403\n%s", res.StatusCode, text)
	}

	olivia, hops, body := browse(testkit.OIDCUser{Email: "olivia@example.com", Groups: []string{"sre"}})
	for _, want := range []string{"/auth/login", "/authorize", "/auth/callback", "/approvals/" + p.id} {
		if !slices.Contains(hops, want) {
			t.Errorf("the sign-in went through %v, without %s", hops, want)
		}
	}
	if !strings.Contains(body, "Signed in as <b>olivia@example.com</b>") || !strings.Contains(body, `name="decision"`) {
		t.Fatalf("after the sign-in the page does not show olivia signed in with the form\n%s", body)
	}
	if !strings.Contains(body, `<form method="post" action="/auth/logout" class="signout">`) {
		t.Errorf("the page offers no sign-out\n%s", body)
	}

	// A post without the session is not sent to sign in: it is refused.
	if code, _ := postForm(t, p.link, decideForm(p.token, "approve"), nil); code != http.StatusUnauthorized {
		t.Errorf("POST without a session: %d, want 401", code)
	}
	if s := e.state(t, p.id); s != "waiting" {
		t.Fatalf("before olivia's approval the call is %s", s)
	}
	p.stillHeld(t)

	res, err = olivia.PostForm(p.link, decideForm(p.token, "approve"))
	if err != nil {
		t.Fatal(err)
	}
	if text := readAll(res); res.StatusCode != 200 || !strings.Contains(text, "Approved") {
		t.Fatalf("approve as olivia: %d\n%s", res.StatusCode, text)
	}
	if a := p.wait(t); a.code != 200 {
		t.Fatalf("the agent after olivia's approval: %d %s", a.code, a.body)
	}
	if n := e.executed("oidc-prod"); n != 1 {
		t.Errorf("the upstream received the call %d times, want 1", n)
	}
	if c := getAPICall(t, e.approvals, p.id); c.DecidedBy != "olivia@example.com" {
		t.Errorf("decided by %q, want olivia@example.com", c.DecidedBy)
	}
	if a := audits(t, e.replica, p.id, 1)[0]; a["decided_by"] != "olivia@example.com" || a["via"] != "oidc" {
		t.Errorf("audit event %v", a)
	}
	// The page's sign-out form posts here, and ends olivia's session, at
	// the provider too: the browser comes back to the signed-out page.
	res, err = olivia.PostForm(e.approvals+"/auth/logout", nil)
	if err != nil {
		t.Fatal(err)
	}
	if text := readAll(res); res.StatusCode != 200 || res.Request.URL.String() != "http://"+addr+"/auth/signed-out" || !strings.Contains(text, "Signed out") {
		t.Errorf("sign-out: %d at %s\n%s", res.StatusCode, res.Request.URL, text)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+idp.URL+";") {
		t.Errorf("Content-Security-Policy %q does not let the sign-out form go to the provider", csp)
	}
	if lo := idp.Logouts(); len(lo) != 1 || lo[0].Get("client_id") != "toolgate" || lo[0].Get("id_token_hint") == "" {
		t.Errorf("the provider's logouts: %v", lo)
	}
}

// readAll reads and closes a response's body.
func readAll(res *http.Response) string {
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
