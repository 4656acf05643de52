package approvals_test

import (
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/pending"
)

func TestPage_ShowsTheCallEscaped(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"notes/today.txt","content":"<script>alert(1)</script>","n":1.50e3}`)

	res := e.do(http.MethodGet, e.pageURL(c), nil, "")
	if res.status != http.StatusOK {
		t.Fatalf("GET page = %d, want 200\n%s", res.status, res.body)
	}
	if ct := res.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q, want text/html; charset=utf-8", ct)
	}
	for _, want := range []string{
		"write_note",                            // tool
		"notes",                                 // upstream
		"agent-42",                              // caller
		"notes/today.txt",                       // target
		"writes under notes/ need approval",     // reason
		"r3",                                    // rule ID
		"&lt;script&gt;alert(1)&lt;/script&gt;", // the argument, escaped
		"\n  &#34;content&#34;: ",               // pretty-printed (indented)
		"1.50e3",                                // the exact number literal, not re-encoded
		"2026-11-29 22:15:02 UTC",               // expiry
		"1h 00m left",                           // time left
		"waiting for a decision",                // status
		`name="decision" value="approve"`,
		`name="decision" value="reject"`,
		`name="token" value="` + e.signer.Token(c) + `"`,
		`name="comment"`,
		`action="./` + c.ID + `?token=` + url.QueryEscape(e.signer.Token(c)) + `"`,
	} {
		if !strings.Contains(res.body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "alert(1)</script>"} {
		if strings.Contains(res.body, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
}

func TestPage_RevealsHiddenCharacters(t *testing.T) {
	e := newEnv(t)
	// A right-to-left override can make "txt.exe" read as "exe.txt".
	c := e.park("agent-42", "write_note", `{"path":"notes/a\u202etxt.exe","content":"x`+"\u202e"+`y"}`)
	res := e.do(http.MethodGet, e.pageURL(c), nil, "")
	if strings.Contains(res.body, "\u202e") {
		t.Error("page shows a raw U+202E")
	}
	if !strings.Contains(res.body, `x\u202ey`) {
		t.Errorf("page does not spell out U+202E as \\u202e:\n%s", res.body)
	}
}

// Link previewers and mail scanners GET (and HEAD) every link: nothing may
// change (docs/security.md, F09 and INV-6).
func TestPage_SafeMethodsChangeNothing(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
	link := e.pageURL(c)
	for i := range 20 {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			h := http.Header{"User-Agent": {"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"}}
			if res := e.do(method, link+"&decision=approve", h, ""); res.status != http.StatusOK {
				t.Fatalf("%s #%d = %d, want 200", method, i, res.status)
			}
		}
	}
	if got := e.state(c.ID); got != pending.Waiting {
		t.Errorf("state after 20 GETs and HEADs = %s, want waiting", got)
	}
	if n := len(e.onDecisionCalls()); n != 0 {
		t.Errorf("OnDecision called %d times, want 0", n)
	}
	if recs := e.logRecords(t, "approval"); len(recs) != 0 {
		t.Errorf("audit records after GETs: %v", recs)
	}
}

func TestLink_Decides(t *testing.T) {
	tests := []struct {
		decision  string
		wantState pending.State
		wantText  string
	}{
		{"approve", pending.Approved, "The call was approved"},
		{"reject", pending.Rejected, "The call was rejected"},
	}
	for _, tt := range tests {
		t.Run(tt.decision, func(t *testing.T) {
			e := newEnv(t)
			c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)

			res := e.decideForm(c, tt.decision, "looks <fine>")
			if res.status != http.StatusOK {
				t.Fatalf("POST = %d, want 200\n%s", res.status, res.body)
			}
			for _, want := range []string{tt.wantText, "looks &lt;fine&gt;", "2026-11-29 21:15:02 UTC"} {
				if !strings.Contains(res.body, want) {
					t.Errorf("answer lacks %q", want)
				}
			}
			if strings.Contains(res.body, "<form") {
				t.Error("the answer to a decision shows forms")
			}

			got, err := e.store.Get(t.Context(), c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tt.wantState || got.DecidedBy != "link" || got.Comment != "looks <fine>" {
				t.Errorf("stored call: state %s, decided_by %q, comment %q; want %s, link, %q",
					got.State, got.DecidedBy, got.Comment, tt.wantState, "looks <fine>")
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
				"call_id": c.ID, "outcome": string(tt.wantState), "decided_by": "link",
				"comment": "looks <fine>", "via": "link", "at": "2026-11-29T21:15:02Z",
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

func TestLink_SecondDecisionConflicts(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
	if res := e.decideForm(c, "approve", "ship it"); res.status != http.StatusOK {
		t.Fatalf("first POST = %d, want 200", res.status)
	}
	res := e.decideForm(c, "reject", "wait")
	if res.status != http.StatusConflict {
		t.Fatalf("second POST = %d, want 409", res.status)
	}
	for _, want := range []string{"no longer waiting", "approved", "link", "ship it"} {
		if !strings.Contains(res.body, want) {
			t.Errorf("409 page lacks %q", want)
		}
	}
	if strings.Contains(res.body, "<form") {
		t.Error("409 page shows forms")
	}
	if got := e.state(c.ID); got != pending.Approved {
		t.Errorf("state = %s, want approved", got)
	}
	if n := len(e.onDecisionCalls()); n != 1 {
		t.Errorf("OnDecision called %d times, want 1", n)
	}
}

func TestLink_DecidedCallIsReadOnly(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
	if res := e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"reject","comment":"not today"}`); res.status != http.StatusOK {
		t.Fatalf("API reject = %d, want 200", res.status)
	}
	res := e.do(http.MethodGet, e.pageURL(c), nil, "")
	if res.status != http.StatusOK {
		t.Fatalf("GET = %d, want 200", res.status)
	}
	for _, want := range []string{"rejected", "alice", "not today", "2026-11-29 21:15:02 UTC"} {
		if !strings.Contains(res.body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(res.body, "<form") {
		t.Error("a decided call's page shows forms")
	}
}

// A link decides one call, as it was evaluated, until it expires
// (docs/security.md, INV-7).
func TestLink_BadTokens(t *testing.T) {
	otherSigner, err := approvals.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token func(e *env, c, other pending.Call) string
		wait  time.Duration // clock moves before the request
	}{
		{"missing", func(*env, pending.Call, pending.Call) string { return "" }, 0},
		{"garbage", func(*env, pending.Call, pending.Call) string { return "hello" }, 0},
		{"tampered signature", func(e *env, c, _ pending.Call) string {
			tok := e.signer.Token(c)
			last := "A"
			if strings.HasSuffix(tok, "A") {
				last = "B"
			}
			return tok[:len(tok)-1] + last
		}, 0},
		{"tampered expiry", func(e *env, c, _ pending.Call) string {
			// The expiry of a day later with the signature of the real one.
			later := c
			later.ExpiresAt = c.ExpiresAt.Add(24 * time.Hour)
			genuine, forged := strings.Split(e.signer.Token(c), "."), strings.Split(e.signer.Token(later), ".")
			return genuine[0] + "." + forged[1] + "." + genuine[2]
		}, 0},
		{"another call's token", func(e *env, _, other pending.Call) string { return e.signer.Token(other) }, 0},
		{"same ID, other request digest", func(e *env, c, _ pending.Call) string {
			forged := c
			forged.RequestDigest = strings.Repeat("0", 64)
			return e.signer.Token(forged)
		}, 0},
		{"another secret", func(_ *env, c, _ pending.Call) string { return otherSigner.Token(c) }, 0},
		{"expired", func(e *env, c, _ pending.Call) string { return e.signer.Token(c) }, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
			other := e.park("agent-42", "write_note", `{"path":"notes/other.txt"}`)
			token := tt.token(e, c, other)
			e.clock.Advance(tt.wait)

			get := e.do(http.MethodGet, "/approvals/"+c.ID+"?token="+url.QueryEscape(token), nil, "")
			post := e.decideFormWithToken(c.ID, token, "approve")
			for _, res := range []response{get, post} {
				if res.status != http.StatusForbidden {
					t.Errorf("status = %d, want 403\n%s", res.status, res.body)
				}
				if strings.Contains(res.body, "<form") || strings.Contains(res.body, "notes/today.txt") {
					t.Error("a 403 page shows the call")
				}
			}
			if got := e.state(c.ID); got != pending.Waiting {
				t.Errorf("state = %s, want waiting", got)
			}
			if n := len(e.onDecisionCalls()); n != 0 {
				t.Errorf("OnDecision called %d times, want 0", n)
			}
		})
	}
}

func (e *env) decideFormWithToken(id, token, decision string) response {
	e.t.Helper()
	form := url.Values{"decision": {decision}}
	if token != "" {
		form.Set("token", token)
	}
	return e.postForm(id, form)
}

func TestLink_UnknownCall(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
	gone := c
	gone.ID = "NOSUCHCALL"
	for _, res := range []response{
		e.do(http.MethodGet, e.pageURL(gone), nil, ""),
		e.decideForm(gone, "approve", ""),
		e.do(http.MethodGet, "/approvals/a%2Fb?token=x", nil, ""),
		e.do(http.MethodGet, "/approvals/"+strings.Repeat("A", 200)+"?token=x", nil, ""),
	} {
		if res.status != http.StatusNotFound {
			t.Errorf("status = %d, want 404", res.status)
		}
		if !strings.Contains(res.body, "unknown call (it may have expired, or the store lost it)") {
			t.Errorf("404 page lacks the explanation:\n%s", res.body)
		}
	}
}

func TestLink_FormRules(t *testing.T) {
	form := func(decision, comment string) func(pending.Call, *approvals.Signer) url.Values {
		return func(c pending.Call, s *approvals.Signer) url.Values {
			return url.Values{"token": {s.Token(c)}, "decision": {decision}, "comment": {comment}}
		}
	}
	tests := []struct {
		name        string
		contentType string
		header      http.Header
		body        func(pending.Call, *approvals.Signer) url.Values
		raw         string // sent instead of body when set
		want        int
		wantState   pending.State
	}{
		{"json body", "application/json", nil, nil, `{"decision":"approve"}`, http.StatusUnsupportedMediaType, pending.Waiting},
		{"text body", "text/plain", nil, form("approve", ""), "", http.StatusUnsupportedMediaType, pending.Waiting},
		{"no content type", "", nil, form("approve", ""), "", http.StatusUnsupportedMediaType, pending.Waiting},
		{"missing decision", "application/x-www-form-urlencoded", nil, form("", ""), "", http.StatusBadRequest, pending.Waiting},
		{"unknown decision", "application/x-www-form-urlencoded", nil, form("APPROVE", ""), "", http.StatusBadRequest, pending.Waiting},
		{"decision twice", "application/x-www-form-urlencoded", nil, func(c pending.Call, s *approvals.Signer) url.Values {
			return url.Values{"token": {s.Token(c)}, "decision": {"reject", "approve"}}
		}, "", http.StatusBadRequest, pending.Waiting},
		{"token twice", "application/x-www-form-urlencoded", nil, func(c pending.Call, s *approvals.Signer) url.Values {
			return url.Values{"token": {s.Token(c), s.Token(c)}, "decision": {"approve"}}
		}, "", http.StatusBadRequest, pending.Waiting},
		{"form token twice", "application/x-www-form-urlencoded", nil, func(pending.Call, *approvals.Signer) url.Values {
			return url.Values{"csrf": {"x", "x"}, "decision": {"approve"}}
		}, "", http.StatusBadRequest, pending.Waiting},
		{"comment too long", "application/x-www-form-urlencoded", nil, form("approve", strings.Repeat("é", 2001)), "", http.StatusBadRequest, pending.Waiting},
		{"comment at the limit", "application/x-www-form-urlencoded", nil, form("approve", strings.Repeat("é", 2000)), "", http.StatusOK, pending.Approved},
		{"body over 64 KiB", "application/x-www-form-urlencoded", nil, form("approve", strings.Repeat("a", 70<<10)), "", http.StatusRequestEntityTooLarge, pending.Waiting},
		{"cross-site post", "application/x-www-form-urlencoded", http.Header{"Sec-Fetch-Site": {"cross-site"}}, form("approve", ""), "", http.StatusForbidden, pending.Waiting},
		{"post from another origin", "application/x-www-form-urlencoded", http.Header{"Origin": {"https://evil.example"}}, form("approve", ""), "", http.StatusForbidden, pending.Waiting},
		{"post from the public URL behind a proxy", "application/x-www-form-urlencoded", http.Header{"Origin": {publicURL}, "Sec-Fetch-Site": {"same-origin"}}, form("approve", ""), "", http.StatusOK, pending.Approved},
		{"token only in the query", "application/x-www-form-urlencoded", nil, form("approve", ""), "", http.StatusForbidden, pending.Waiting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
			body, path := tt.raw, "/approvals/"+c.ID
			if tt.body != nil {
				v := tt.body(c, e.signer)
				if tt.name == "token only in the query" {
					path += "?token=" + url.QueryEscape(v.Get("token"))
					v.Del("token")
				}
				body = v.Encode()
			}
			h := http.Header{}
			if tt.contentType != "" {
				h.Set("Content-Type", tt.contentType)
			}
			maps.Copy(h, tt.header)
			res := e.do(http.MethodPost, path, h, body)
			if res.status != tt.want {
				t.Errorf("POST = %d, want %d\n%s", res.status, tt.want, res.body)
			}
			if got := e.state(c.ID); got != tt.wantState {
				t.Errorf("state = %s, want %s", got, tt.wantState)
			}
		})
	}
}

// A decision the store did not record never looks like a success
// (docs/security.md, R06). One the store did not answer may stand (its
// reply lost): the approver is told to reload before deciding again.
func TestStoreFailure(t *testing.T) {
	tests := []struct {
		name  string
		store failingStore
		send  func(e *env, c pending.Call) response
		want  string
	}{
		{"form decision", failingStore{failDecide: true}, func(e *env, c pending.Call) response {
			return e.decideForm(c, "approve", "")
		}, "may or may not have been recorded; reload the call before deciding again"},
		{"API decision", failingStore{failDecide: true}, func(e *env, c pending.Call) response {
			return e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"approve"}`)
		}, "may or may not have been recorded; reload the call before deciding again"},
		{"form decision, store unreadable", failingStore{failGet: true}, func(e *env, c pending.Call) response {
			return e.decideForm(c, "approve", "")
		}, "decision not recorded, try again"},
		{"page", failingStore{failGet: true}, func(e *env, c pending.Call) response {
			return e.do(http.MethodGet, e.pageURL(c), nil, "")
		}, "try again"},
		{"list", failingStore{failList: true}, func(e *env, _ pending.Call) response {
			return e.api(http.MethodGet, "/api/approvals", aliceKey, "")
		}, "try again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *approvals.Config) {
				s := tt.store
				s.Store = cfg.Store
				cfg.Store = s
			})
			c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
			res := tt.send(e, c)
			if res.status != http.StatusServiceUnavailable {
				t.Errorf("status = %d, want 503", res.status)
			}
			if !strings.Contains(res.body, tt.want) {
				t.Errorf("answer lacks %q:\n%s", tt.want, res.body)
			}
			for _, success := range []string{"approved", "Approved"} {
				if strings.Contains(res.body, success) {
					t.Errorf("a failed decision's answer says %q:\n%s", success, res.body)
				}
			}
			if n := len(e.onDecisionCalls()); n != 0 {
				t.Errorf("OnDecision called %d times, want 0", n)
			}
			if recs := e.logRecords(t, "approval"); len(recs) != 0 {
				t.Errorf("audit records for an unrecorded decision: %v", recs)
			}
			if got := e.state(c.ID); got != pending.Waiting {
				t.Errorf("state = %s, want waiting", got)
			}
		})
	}
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
	}
	answers := map[string]response{
		"page":          e.do(http.MethodGet, e.pageURL(c), nil, ""),
		"head":          e.do(http.MethodHead, e.pageURL(c), nil, ""),
		"bad token":     e.do(http.MethodGet, "/approvals/"+c.ID+"?token=x", nil, ""),
		"unknown call":  e.do(http.MethodGet, "/approvals/NOPE?token=x", nil, ""),
		"bad form":      e.postForm(c.ID, url.Values{}),
		"unknown route": e.do(http.MethodGet, "/", nil, ""),
		"wrong method":  e.do(http.MethodDelete, "/approvals/"+c.ID, nil, ""),
		"API no key":    e.api(http.MethodGet, "/api/approvals", "", ""),
		"API list":      e.api(http.MethodGet, "/api/approvals", aliceKey, ""),
		"API unknown":   e.api(http.MethodGet, "/api/nothing", aliceKey, ""),
		"decision":      e.decideForm(c, "approve", ""),
		"late decision": e.decideForm(c, "reject", ""),
		"API late":      e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"reject"}`),
	}
	for name, res := range answers {
		for k, v := range want {
			if got := res.header.Get(k); got != v {
				t.Errorf("%s (%d): %s = %q, want %q", name, res.status, k, got, v)
			}
		}
	}
	if got := answers["wrong method"].status; got != http.StatusMethodNotAllowed {
		t.Errorf("DELETE = %d, want 405", got)
	}
}
