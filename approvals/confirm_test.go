package approvals_test

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// requesterOnly is an ask reason that names nobody but the requester.
var requesterOnly = callinfo.Approvers{Reason: "confirm", Requester: true, Min: 1}

// confirmURL is the call's confirmation link on the test server.
func (e *env) confirmURL(c pending.Call) string {
	return e.signer.ConfirmURL(e.srv.URL, c)
}

// confirmForm posts form fields to the call's confirmation page, with
// extra headers (nil for none).
func (e *env) confirmForm(id string, h http.Header, form url.Values) response {
	e.t.Helper()
	hd := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	maps.Copy(hd, h)
	return e.do(http.MethodPost, "/confirm/"+id, hd, form.Encode())
}

// confirm posts the confirmation page's form: its token, decision and
// comment.
func (e *env) confirm(c pending.Call, decision, comment string) response {
	e.t.Helper()
	return e.confirmForm(c.ID, nil, url.Values{"token": {e.signer.ConfirmToken(c)}, "decision": {decision}, "comment": {comment}})
}

// stored is the call as the store holds it.
func (e *env) stored(id string) pending.Call {
	e.t.Helper()
	c, err := e.store.Get(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// untouched fails t unless c still waits with no approval, no decision
// was announced and no audit record was written.
func (e *env) untouched(t *testing.T, c pending.Call) {
	t.Helper()
	got := e.stored(c.ID)
	if got.State != pending.Waiting || len(got.Approvals) != 0 || got.DecidedBy != "" {
		t.Errorf("call: %s, decided by %q, %d approvals; want waiting, undecided, none", got.State, got.DecidedBy, len(got.Approvals))
	}
	if n := len(e.onDecisionCalls()); n != 0 {
		t.Errorf("OnDecision called %d times, want 0", n)
	}
	if recs := e.logRecords(t, "approval"); len(recs) != 0 {
		t.Errorf("audit records: %v, want none", recs)
	}
}

// A confirmation link opens no approval page and an approval link no
// confirmation page: the requester's link must not decide as an approver,
// and an approver's link must not record a confirmation.
func TestConfirm_TokenPurposesAreSeparate(t *testing.T) {
	e := newEnv(t)
	c := e.parkFor("agent-42", requesterOnly)
	confirmTok, approvalTok := e.signer.ConfirmToken(c), e.signer.Token(c)
	if confirmTok == approvalTok {
		t.Fatal("the confirmation token is the approval token")
	}
	answers := map[string]response{
		"GET /approvals with the confirmation token":  e.do(http.MethodGet, "/approvals/"+c.ID+"?token="+url.QueryEscape(confirmTok), nil, ""),
		"POST /approvals with the confirmation token": e.postForm(c.ID, url.Values{"token": {confirmTok}, "decision": {"approve"}}),
		"GET /confirm with the approval token":        e.do(http.MethodGet, "/confirm/"+c.ID+"?token="+url.QueryEscape(approvalTok), nil, ""),
		"POST /confirm with the approval token":       e.confirmForm(c.ID, nil, url.Values{"token": {approvalTok}, "decision": {"approve"}}),
	}
	for name, res := range answers {
		if res.status != http.StatusForbidden {
			t.Errorf("%s = %d, want 403\n%s", name, res.status, res.body)
		}
		if strings.Contains(res.body, "<form") || strings.Contains(res.body, `{&#34;env&#34;`) {
			t.Errorf("%s: the 403 page shows the call", name)
		}
	}
	e.untouched(t, c)
}

func TestConfirm_PageOffersConfirmAndDecline(t *testing.T) {
	e := newEnv(t)
	c := e.parkFor("agent-42", requesterOnly)
	tok := e.signer.ConfirmToken(c)
	res := e.do(http.MethodGet, e.confirmURL(c), nil, "")
	if res.status != http.StatusOK {
		t.Fatalf("GET the confirmation page = %d, want 200\n%s", res.status, res.body)
	}
	if ct := res.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q, want text/html; charset=utf-8", ct)
	}
	for _, want := range []string{
		"Run deploy?",
		"deploy", "ops", "agent-42", "&#34;env&#34;", "deploys need approval",
		`name="decision" value="approve" class="approve">Confirm</button>`,
		`name="decision" value="reject" class="reject">Decline</button>`,
		`name="token" value="` + tok + `"`,
		`name="comment"`,
		`action="./` + c.ID + `?token=` + url.QueryEscape(tok) + `"`,
		"waiting for a decision",
	} {
		if !strings.Contains(res.body, want) {
			t.Errorf("confirmation page lacks %q", want)
		}
	}
	for _, bad := range []string{">Approve</button>", ">Reject</button>", `name="remember"`, `name="csrf"`} {
		if strings.Contains(res.body, bad) {
			t.Errorf("confirmation page contains %q", bad)
		}
	}
	// The token travels in the URL: the page must keep it to itself.
	for k, v := range map[string]string{"Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "X-Frame-Options": "DENY"} {
		if got := res.header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}

// Link previewers and mail scanners fetch every link they are shown; the
// requester's client may too. Only the page's POST decides.
func TestConfirm_SafeMethodsChangeNothing(t *testing.T) {
	e := newEnv(t)
	c := e.parkFor("agent-42", requesterOnly)
	link := e.confirmURL(c)
	for i := range 10 {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			if res := e.do(method, link+"&decision=approve&comment=auto", nil, ""); res.status != http.StatusOK {
				t.Fatalf("%s #%d = %d, want 200", method, i, res.status)
			}
		}
	}
	e.untouched(t, c)
}

func TestConfirm_Decides(t *testing.T) {
	tests := []struct {
		decision  string
		comment   string
		wantState pending.State
		wantTitle string
	}{
		{"approve", "yes, I asked for it", pending.Approved, "Confirmed"},
		{"reject", "not <this> one", pending.Rejected, "Declined"},
	}
	for _, tt := range tests {
		t.Run(tt.decision, func(t *testing.T) {
			e := newEnv(t)
			c := e.parkFor("agent-42", requesterOnly)

			res := e.confirm(c, tt.decision, tt.comment)
			if res.status != http.StatusOK {
				t.Fatalf("POST = %d, want 200\n%s", res.status, res.body)
			}
			for _, want := range []string{tt.wantTitle, "requester:agent-42", "2026-11-29 21:15:02 UTC"} {
				if !strings.Contains(res.body, want) {
					t.Errorf("answer lacks %q\n%s", want, res.body)
				}
			}
			if strings.Contains(res.body, "<form") {
				t.Error("the answer to a confirmation shows forms")
			}

			got := e.stored(c.ID)
			if got.State != tt.wantState || got.DecidedBy != "requester:agent-42" || got.Comment != tt.comment {
				t.Errorf("stored call: state %s, decided_by %q, comment %q; want %s, requester:agent-42, %q",
					got.State, got.DecidedBy, got.Comment, tt.wantState, tt.comment)
			}

			calls := e.onDecisionCalls()
			if len(calls) != 1 || calls[0].ID != c.ID || calls[0].State != tt.wantState {
				t.Errorf("OnDecision saw %v, want one call %s %s", calls, c.ID, tt.wantState)
			}

			recs := e.logRecords(t, "approval")
			if len(recs) != 1 {
				t.Fatalf("%d audit records, want 1", len(recs))
			}
			want := map[string]any{
				"call_id": c.ID, "outcome": string(tt.wantState), "decided_by": "requester:agent-42",
				"comment": tt.comment, "via": "requester", "at": "2026-11-29T21:15:02Z",
				"subject": "agent-42", "tool": "deploy", "partial": false,
			}
			gotRec := map[string]any{}
			for k := range want {
				gotRec[k] = recs[0][k]
			}
			if diff := cmp.Diff(want, gotRec); diff != "" {
				t.Errorf("audit record (-want +got):\n%s", diff)
			}
		})
	}
}

// Config.Audit, when set, receives the confirmation's record instead of
// the log.
func TestConfirm_AuditHook(t *testing.T) {
	var got []approvals.AuditRecord
	e := newEnv(t, func(cfg *approvals.Config) {
		cfg.Audit = func(_ context.Context, rec approvals.AuditRecord) { got = append(got, rec) }
	})
	c := e.parkFor("agent-42", requesterOnly)
	if res := e.confirm(c, "approve", "mine"); res.status != http.StatusOK {
		t.Fatalf("POST = %d\n%s", res.status, res.body)
	}
	if len(got) != 1 {
		t.Fatalf("%d audit records, want 1", len(got))
	}
	rec := got[0]
	if rec.CallID != c.ID || rec.Outcome != "approved" || rec.DecidedBy != "requester:agent-42" || rec.Via != "requester" ||
		rec.Comment != "mine" || rec.Partial || !rec.At.Equal(t0) || rec.RemoteAddr == "" {
		t.Errorf("audit record = %+v", rec)
	}
}

func TestConfirm_SecondPostConflicts(t *testing.T) {
	e := newEnv(t)
	c := e.parkFor("agent-42", requesterOnly)
	if res := e.confirm(c, "approve", "go"); res.status != http.StatusOK {
		t.Fatalf("first POST = %d, want 200\n%s", res.status, res.body)
	}
	for _, decision := range []string{"reject", "approve"} {
		res := e.confirm(c, decision, "changed my mind")
		if res.status != http.StatusConflict {
			t.Fatalf("second POST (%s) = %d, want 409\n%s", decision, res.status, res.body)
		}
		for _, want := range []string{"no longer waiting", "approved", "requester:agent-42", "go"} {
			if !strings.Contains(res.body, want) {
				t.Errorf("409 page lacks %q", want)
			}
		}
		if strings.Contains(res.body, "<form") || strings.Contains(res.body, "changed my mind") {
			t.Error("409 page shows forms or the refused comment")
		}
	}
	got := e.stored(c.ID)
	if got.State != pending.Approved || got.Comment != "go" {
		t.Errorf("call: %s with comment %q, want approved with %q", got.State, got.Comment, "go")
	}
	if n := len(e.onDecisionCalls()); n != 1 {
		t.Errorf("OnDecision called %d times, want 1", n)
	}
	if n := len(e.logRecords(t, "approval")); n != 1 {
		t.Errorf("%d audit records, want 1", n)
	}
}

// The link stays good after the decision (reloading the page after a POST):
// it shows the outcome, whoever decided, and offers nothing to decide.
func TestConfirm_DecidedCallIsReadOnly(t *testing.T) {
	e := newEnv(t)
	c := e.parkFor("agent-42", requesterOnly)
	if res := e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"reject","comment":"not today"}`); res.status != http.StatusOK {
		t.Fatalf("API reject = %d, want 200\n%s", res.status, res.body)
	}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		res := e.do(method, e.confirmURL(c), nil, "")
		if res.status != http.StatusOK {
			t.Fatalf("%s = %d, want 200\n%s", method, res.status, res.body)
		}
		if method == http.MethodHead {
			continue
		}
		for _, want := range []string{"no longer waiting", "rejected", "alice", "not today", "2026-11-29 21:15:02 UTC"} {
			if !strings.Contains(res.body, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		if strings.Contains(res.body, "<form") || strings.Contains(res.body, "Confirm</button>") {
			t.Error("a decided call's confirmation page shows forms")
		}
	}
	if got := e.stored(c.ID); got.State != pending.Rejected || got.DecidedBy != "alice" {
		t.Errorf("call: %s by %q, want rejected by alice", got.State, got.DecidedBy)
	}
}

// A confirmation never satisfies an ask that names approvers, even one
// that names the requester beside them; and a call whose ask named nobody
// was never offered to its requester.
func TestConfirm_NotForCallsNamingApprovers(t *testing.T) {
	tests := []struct {
		name      string
		approvers []callinfo.Approvers
	}{
		{"group and requester", []callinfo.Approvers{{Groups: []string{"sre"}, Requester: true, Min: 1}}},
		{"subject and requester", []callinfo.Approvers{{Subjects: []string{"alice"}, Requester: true, Min: 1}}},
		{"group only", []callinfo.Approvers{{Groups: []string{"sre"}, Min: 1}}},
		{"no approvers named", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.parkFor("agent-42", tt.approvers...)
			answers := map[string]response{
				"GET":  e.do(http.MethodGet, e.confirmURL(c), nil, ""),
				"HEAD": e.do(http.MethodHead, e.confirmURL(c), nil, ""),
				"POST": e.confirm(c, "approve", ""),
			}
			for method, res := range answers {
				if res.status != http.StatusForbidden {
					t.Errorf("%s = %d, want 403\n%s", method, res.status, res.body)
				}
				if method == http.MethodHead {
					continue
				}
				if !strings.Contains(res.body, "Not yours to confirm") {
					t.Errorf("%s: the 403 page lacks its title\n%s", method, res.body)
				}
				if strings.Contains(res.body, "<form") {
					t.Errorf("%s: the 403 page shows forms", method)
				}
			}
			e.untouched(t, c)
		})
	}
}

// A call with a requester-only requirement beside an ask for any approver
// (a reason that named nobody, or a hook's) is not the requester's to
// confirm: that other ask is an approver's to answer.
func TestConfirm_NotWithAnotherAsk(t *testing.T) {
	for name, edit := range map[string]func(*callinfo.Info){
		"a reason naming nobody": func(i *callinfo.Info) { i.OpenAsk = true },
		"a hook's ask":           func(i *callinfo.Info) { i.HookAsked = true },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			c := e.parkWith("agent-42", edit, requesterOnly)
			if infoOf := callinfo.Decode(c.Info); infoOf.RequesterConfirms() {
				t.Error("the call is offered to its requester")
			}
			if res := e.confirm(c, "approve", ""); res.status != http.StatusForbidden {
				t.Errorf("confirm = %d, want 403\n%s", res.status, res.body)
			}
			e.untouched(t, c)
		})
	}
}

// With one requirement that names only the requester and one that names
// group sre, the confirmation counts towards the first alone: the call
// waits for sre.
func TestConfirm_MixedRequirementsCountPartially(t *testing.T) {
	e := newEnv(t, withHeaders(t))
	c := e.parkFor("agent-42", requesterOnly, callinfo.Approvers{Reason: "prod", Groups: []string{"sre"}, Min: 1})

	res := e.confirm(c, "approve", "mine")
	if res.status != http.StatusOK {
		t.Fatalf("confirmation = %d, want 200\n%s", res.status, res.body)
	}
	got := e.stored(c.ID)
	if got.State != pending.Waiting {
		t.Fatalf("after the confirmation: %s, want waiting", got.State)
	}
	if len(got.Approvals) != 1 || got.Approvals[0].By != "requester:agent-42" || !slices.Equal(got.Approvals[0].Counts, []int{0}) {
		t.Fatalf("approvals after the confirmation: %+v, want one by requester:agent-42 counting towards [0]", got.Approvals)
	}
	if n := len(e.onDecisionCalls()); n != 0 {
		t.Errorf("OnDecision told of a partial confirmation (%d calls)", n)
	}
	recs := e.logRecords(t, "approval")
	if len(recs) != 1 || recs[0]["partial"] != true || recs[0]["decided_by"] != "requester:agent-42" || recs[0]["via"] != "requester" {
		t.Errorf("audit records after the confirmation: %v, want one partial approval by requester:agent-42", recs)
	}
	// The requester is told the truth: the call waits; nothing was declined
	// and nothing will run yet.
	if strings.Contains(res.body, "Declined") || strings.Contains(res.body, "declined") {
		t.Errorf("the answer to a counted confirmation says the call was declined:\n%s", res.body)
	}
	if strings.Contains(res.body, "it will be forwarded once") {
		t.Errorf("the answer to a partial confirmation says the call will run:\n%s", res.body)
	}

	// Confirming again adds nothing.
	e.confirm(c, "approve", "again")
	if got := e.stored(c.ID); got.State != pending.Waiting || len(got.Approvals) != 1 {
		t.Fatalf("after a second confirmation: %s with %d approvals, want waiting with 1", got.State, len(got.Approvals))
	}

	// An approver outside sre cannot finish it; erin (sre) does.
	form := url.Values{"token": {e.signer.Token(c)}, "decision": {"approve"}}
	if res := e.formAs(c.ID, as("mallory", "dev"), form); res.status != http.StatusForbidden || e.state(c.ID) != pending.Waiting {
		t.Fatalf("mallory (not sre): %d, %s; want 403 and waiting", res.status, e.state(c.ID))
	}
	if res := e.formAs(c.ID, as("erin"), form); res.status != http.StatusOK {
		t.Fatalf("erin (sre): %d\n%s", res.status, res.body)
	}
	got = e.stored(c.ID)
	if got.State != pending.Approved || got.DecidedBy != "erin" {
		t.Fatalf("after erin: %s by %q, want approved by erin", got.State, got.DecidedBy)
	}
	if !pending.ApprovedBy(got.Approvals, "requester:agent-42") || !pending.ApprovedBy(got.Approvals, "erin") {
		t.Errorf("approvals = %+v, want the requester's and erin's", got.Approvals)
	}
	if calls := e.onDecisionCalls(); len(calls) != 1 || calls[0].State != pending.Approved {
		t.Errorf("OnDecision saw %v, want one approved call", calls)
	}
}

// An ask that names only the requester names no approver: whoever may
// decide a call that names nobody may decide it, a bare link included.
func TestConfirm_RequesterOnlyCallDecidedLikeAnyCall(t *testing.T) {
	t.Run("bare link", func(t *testing.T) {
		e := newEnv(t)
		c := e.parkFor("agent-42", requesterOnly)
		page := e.do(http.MethodGet, e.pageURL(c), nil, "")
		if page.status != http.StatusOK || !strings.Contains(page.body, ">Approve</button>") {
			t.Errorf("the approval page offers no Approve: %d\n%s", page.status, page.body)
		}
		if res := e.decideForm(c, "approve", "ok"); res.status != http.StatusOK {
			t.Fatalf("bare link: %d, want 200\n%s", res.status, res.body)
		}
		if got := e.stored(c.ID); got.State != pending.Approved || got.DecidedBy != "link" {
			t.Errorf("call: %s by %q, want approved by link", got.State, got.DecidedBy)
		}
		if n := len(e.onDecisionCalls()); n != 1 {
			t.Errorf("OnDecision called %d times, want 1", n)
		}
	})
	t.Run("API key", func(t *testing.T) {
		e := newEnv(t)
		c := e.parkFor("agent-42", requesterOnly)
		if res := e.api(http.MethodPost, "/api/approvals/"+c.ID, bobKey, `{"decision":"approve"}`); res.status != http.StatusOK {
			t.Fatalf("bob's key: %d, want 200\n%s", res.status, res.body)
		}
		if got := e.stored(c.ID); got.State != pending.Approved || got.DecidedBy != "bob" {
			t.Errorf("call: %s by %q, want approved by bob", got.State, got.DecidedBy)
		}
	})
	t.Run("signed-in approver in no group", func(t *testing.T) {
		e := newEnv(t, withHeaders(t))
		c := e.parkFor("agent-42", requesterOnly)
		form := url.Values{"token": {e.signer.Token(c)}, "decision": {"approve"}}
		if res := e.formAs(c.ID, as("dana"), form); res.status != http.StatusOK {
			t.Fatalf("dana: %d, want 200\n%s", res.status, res.body)
		}
		if got := e.stored(c.ID); got.State != pending.Approved || got.DecidedBy != "dana" {
			t.Errorf("call: %s by %q, want approved by dana", got.State, got.DecidedBy)
		}
	})
}

// The confirmation token is the page's authority: a listener that signs
// approvers in does not ask the requester to sign in.
func TestConfirm_NeedsNoSignIn(t *testing.T) {
	e := newEnv(t, withHeaders(t))
	c := e.parkFor("agent-42", requesterOnly)
	if res := e.do(http.MethodGet, e.confirmURL(c), nil, ""); res.status != http.StatusOK || !strings.Contains(res.body, "Confirm</button>") {
		t.Fatalf("GET without identity: %d\n%s", res.status, res.body)
	}
	if res := e.confirm(c, "approve", ""); res.status != http.StatusOK {
		t.Fatalf("POST without identity: %d\n%s", res.status, res.body)
	}
	if got := e.stored(c.ID); got.State != pending.Approved || got.DecidedBy != "requester:agent-42" {
		t.Errorf("call: %s by %q, want approved by requester:agent-42", got.State, got.DecidedBy)
	}
}

// TestConfirm_RequesterSignIn: with RequesterSignIn, the link's token alone
// confirms nothing (an agent that fetched its own link cannot use it): the
// page and its form need the requester signed in, as an approver whose
// name is the call's subject.
func TestConfirm_RequesterSignIn(t *testing.T) {
	e := newEnv(t, withHeaders(t), func(cfg *approvals.Config) { cfg.RequesterSignIn = true })
	c := e.parkFor("alice@example.com", requesterOnly)
	token := e.signer.ConfirmToken(c)
	form := url.Values{"token": {token}, "decision": {"approve"}}
	if res := e.do(http.MethodGet, e.confirmURL(c), nil, ""); res.status != http.StatusUnauthorized {
		t.Errorf("GET without identity: %d, want 401", res.status)
	}
	for who, want := range map[string]int{"": http.StatusUnauthorized, "mallory@example.com": http.StatusForbidden} {
		var h http.Header
		if who != "" {
			h = as(who)
		}
		if res := e.confirmForm(c.ID, h, form); res.status != want {
			t.Errorf("POST as %q: %d, want %d\n%s", who, res.status, want, res.body)
		}
	}
	e.untouched(t, c)
	if res := e.do(http.MethodGet, e.confirmURL(c), as("Alice@Example.com"), ""); res.status != http.StatusOK || !strings.Contains(res.body, "Confirm</button>") {
		t.Fatalf("GET as the requester: %d\n%s", res.status, res.body)
	}
	if res := e.confirmForm(c.ID, as("Alice@Example.com"), form); res.status != http.StatusOK {
		t.Fatalf("POST as the requester: %d\n%s", res.status, res.body)
	}
	if got := e.stored(c.ID); got.State != pending.Approved || got.DecidedBy != "requester:alice@example.com" {
		t.Errorf("call: %s by %q, want approved by requester:alice@example.com", got.State, got.DecidedBy)
	}
	if _, err := approvals.New(approvals.Config{Store: e.store, Signer: e.signer, RequesterSignIn: true}); err == nil {
		t.Error("RequesterSignIn without an Identity: no error")
	}
}

// A confirmation link confirms one call, as it was evaluated, until it
// expires.
func TestConfirm_BadTokens(t *testing.T) {
	otherSigner := testSigner(t, strings.Repeat("k", 32))
	tests := []struct {
		name  string
		token func(e *env, c, other pending.Call) string
		wait  time.Duration // clock moves before the request
	}{
		{"missing", func(*env, pending.Call, pending.Call) string { return "" }, 0},
		{"garbage", func(*env, pending.Call, pending.Call) string { return "hello" }, 0},
		{"tampered signature", func(e *env, c, _ pending.Call) string {
			tok := e.signer.ConfirmToken(c)
			last := "A"
			if strings.HasSuffix(tok, "A") {
				last = "B"
			}
			return tok[:len(tok)-1] + last
		}, 0},
		{"tampered expiry", func(e *env, c, _ pending.Call) string {
			later := c
			later.ExpiresAt = c.ExpiresAt.Add(24 * time.Hour)
			genuine, forged := strings.Split(e.signer.ConfirmToken(c), "."), strings.Split(e.signer.ConfirmToken(later), ".")
			return genuine[0] + "." + forged[1] + "." + genuine[2]
		}, 0},
		{"another call's token", func(e *env, _, other pending.Call) string { return e.signer.ConfirmToken(other) }, 0},
		{"same ID, other request digest", func(e *env, c, _ pending.Call) string {
			forged := c
			forged.RequestDigest = strings.Repeat("0", 64)
			return e.signer.ConfirmToken(forged)
		}, 0},
		{"another secret", func(_ *env, c, _ pending.Call) string { return otherSigner.ConfirmToken(c) }, 0},
		{"expired", func(e *env, c, _ pending.Call) string { return e.signer.ConfirmToken(c) }, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.parkFor("agent-42", requesterOnly)
			other := e.parkFor("agent-42", requesterOnly)
			token := tt.token(e, c, other)
			e.clock.Advance(tt.wait)

			form := url.Values{"decision": {"approve"}}
			if token != "" {
				form.Set("token", token)
			}
			get := e.do(http.MethodGet, "/confirm/"+c.ID+"?token="+url.QueryEscape(token), nil, "")
			post := e.confirmForm(c.ID, nil, form)
			for _, res := range []response{get, post} {
				if res.status != http.StatusForbidden {
					t.Errorf("status = %d, want 403\n%s", res.status, res.body)
				}
				if strings.Contains(res.body, "<form") || strings.Contains(res.body, `&#34;env&#34;`) {
					t.Error("a 403 page shows the call")
				}
			}
			e.untouched(t, c)
			if got := e.state(other.ID); got != pending.Waiting {
				t.Errorf("the other call: %s, want waiting", got)
			}
		})
	}
}

func TestConfirm_FormRules(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		header      http.Header
		form        func(tok string) url.Values
		query       bool // the token goes in the URL, not the body
		want        int
	}{
		{
			"cross-site post", "application/x-www-form-urlencoded",
			http.Header{"Sec-Fetch-Site": {"cross-site"}},
			func(tok string) url.Values { return url.Values{"token": {tok}, "decision": {"approve"}} }, false, http.StatusForbidden,
		},
		{
			"post from another origin", "application/x-www-form-urlencoded",
			http.Header{"Origin": {"https://evil.example"}},
			func(tok string) url.Values { return url.Values{"token": {tok}, "decision": {"approve"}} }, false, http.StatusForbidden,
		},
		{
			"json body", "application/json", nil,
			func(tok string) url.Values { return url.Values{"token": {tok}, "decision": {"approve"}} }, false, http.StatusUnsupportedMediaType,
		},
		{
			"token twice", "application/x-www-form-urlencoded", nil,
			func(tok string) url.Values { return url.Values{"token": {tok, tok}, "decision": {"approve"}} }, false, http.StatusBadRequest,
		},
		{
			"token only in the query", "application/x-www-form-urlencoded", nil,
			func(string) url.Values { return url.Values{"decision": {"approve"}} }, true, http.StatusForbidden,
		},
		{
			"decision twice", "application/x-www-form-urlencoded", nil,
			func(tok string) url.Values { return url.Values{"token": {tok}, "decision": {"reject", "approve"}} }, false, http.StatusBadRequest,
		},
		{
			"comment twice", "application/x-www-form-urlencoded", nil,
			func(tok string) url.Values {
				return url.Values{"token": {tok}, "decision": {"approve"}, "comment": {"a", "b"}}
			}, false, http.StatusBadRequest,
		},
		{
			"missing decision", "application/x-www-form-urlencoded", nil,
			func(tok string) url.Values { return url.Values{"token": {tok}} }, false, http.StatusBadRequest,
		},
		{
			"unknown decision", "application/x-www-form-urlencoded", nil,
			func(tok string) url.Values { return url.Values{"token": {tok}, "decision": {"confirm"}} }, false, http.StatusBadRequest,
		},
		{
			"comment too long", "application/x-www-form-urlencoded", nil,
			func(tok string) url.Values {
				return url.Values{"token": {tok}, "decision": {"approve"}, "comment": {strings.Repeat("é", 2001)}}
			}, false, http.StatusBadRequest,
		},
		{
			"body over 64 KiB", "application/x-www-form-urlencoded", nil,
			func(tok string) url.Values {
				return url.Values{"token": {tok}, "decision": {"approve"}, "comment": {strings.Repeat("a", 70<<10)}}
			}, false, http.StatusRequestEntityTooLarge,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.parkFor("agent-42", requesterOnly)
			tok := e.signer.ConfirmToken(c)
			path := "/confirm/" + c.ID
			if tt.query {
				path += "?token=" + url.QueryEscape(tok)
			}
			h := http.Header{"Content-Type": {tt.contentType}}
			maps.Copy(h, tt.header)
			res := e.do(http.MethodPost, path, h, tt.form(tok).Encode())
			if res.status != tt.want {
				t.Errorf("POST = %d, want %d\n%s", res.status, tt.want, res.body)
			}
			e.untouched(t, c)
		})
	}
	// The same form from the listener's public origin is accepted.
	e := newEnv(t)
	c := e.parkFor("agent-42", requesterOnly)
	res := e.confirmForm(c.ID, http.Header{"Origin": {publicURL}, "Sec-Fetch-Site": {"same-origin"}},
		url.Values{"token": {e.signer.ConfirmToken(c)}, "decision": {"approve"}})
	if res.status != http.StatusOK || e.state(c.ID) != pending.Approved {
		t.Errorf("same-origin POST: %d, %s; want 200 and approved\n%s", res.status, e.state(c.ID), res.body)
	}
}

func TestConfirm_UnknownCall(t *testing.T) {
	e := newEnv(t)
	c := e.parkFor("agent-42", requesterOnly)
	gone := c
	gone.ID = "NOSUCHCALL"
	for _, res := range []response{
		e.do(http.MethodGet, e.confirmURL(gone), nil, ""),
		e.confirm(gone, "approve", ""),
		e.do(http.MethodGet, "/confirm/a%2Fb?token=x", nil, ""),
		e.do(http.MethodGet, "/confirm/"+strings.Repeat("A", 200)+"?token=x", nil, ""),
	} {
		if res.status != http.StatusNotFound {
			t.Errorf("status = %d, want 404", res.status)
		}
	}
	e.untouched(t, c)
}
