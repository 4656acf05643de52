package approvals

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// marked writes spans as text, with every classed span as [class:text],
// so a test can see both what the page says and how it marks it.
func marked(spans []argSpan) string {
	var b strings.Builder
	for _, s := range spans {
		if s.Class == "" {
			b.WriteString(s.Text)
			continue
		}
		fmt.Fprintf(&b, "[%s:%s]", s.Class, s.Text)
	}
	return b.String()
}

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		name, in, want string
		revealed       bool
	}{
		{"escapes decoded", `{"path":"\u002e\u002e/\u0065tc"}`, "{\n  \"path\": [str:\"../etc\"]\n}", false},
		{"keys decoded too", `{"\u0070ath":1}`, "{\n  \"path\": 1\n}", false},
		{
			"numbers as sent", `[1e400,-0.0,1.50e3,12345678901234567890123,0]`,
			"[\n  1e400,\n  -0.0,\n  1.50e3,\n  12345678901234567890123,\n  0\n]", false,
		},
		{"key order and duplicates kept", `{"b":1,"a":2,"b":3}`, "{\n  \"b\": 1,\n  \"a\": 2,\n  \"b\": 3\n}", false},
		{
			"right-to-left override spelled out", `{"p":"a\u202etxt.exe","q":"x` + "\u202e" + `y"}`,
			"{\n  \"p\": [str:\"a][hid:\\u202e][str:txt.exe\"],\n  \"q\": [str:\"x][hid:\\u202e][str:y\"]\n}", true,
		},
		{"hidden character in a key", `{"a\u200bb":true}`, "{\n  \"a[hid:\\u200b]b\": true\n}", true},
		{
			// A newline is marked, then broken: the marked \n says the
			// break is the value's, not the page's.
			"newline marked and broken", `{"cmd":"ls\nrm -rf /"}`,
			"{\n  \"cmd\": [str:\"ls][esc:\\n][str:\nrm -rf /\"]\n}", false,
		},
		{
			// Quotes and backslashes stay escaped: every bare quote on the
			// page ends a string, so a value cannot fake a key.
			"quotes and backslashes stay escaped", `{"a":"x\", \"b\": \"y","c":"\\u002e"}`,
			"{\n  \"a\": [str:\"x][esc:\\\"][str:, ][esc:\\\"][str:b][esc:\\\"][str:: ][esc:\\\"][str:y\"],\n  \"c\": [str:\"][esc:\\\\][str:u002e\"]\n}", false,
		},
		{"tab and carriage return stay escapes", `"a\tb\rc"`, "[str:\"a][esc:\\t][str:b][esc:\\r][str:c\"]", false},
		{"empty containers", `{"a":[],"b":{},"c":""}`, "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [str:\"\"]\n}", false},
		{"nesting", `{"a":[1,{"b":null}]}`, "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ]\n}", false},
		{"literals", ` [true, false, null] `, "[\n  true,\n  false,\n  null\n]", false},
		{"markup is text", `{"c":"<script>alert(1)</script>"}`, "{\n  \"c\": [str:\"<script>alert(1)</script>\"]\n}", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans, revealed := decodeArgs([]byte(tt.in))
			if spans == nil {
				t.Fatalf("decodeArgs(%s) = nil", tt.in)
			}
			if got := marked(spans); got != tt.want {
				t.Errorf("decodeArgs(%s) =\n%s\nwant\n%s", tt.in, got, tt.want)
			}
			if revealed != tt.revealed {
				t.Errorf("revealed = %v, want %v", revealed, tt.revealed)
			}
		})
	}
}

func TestDecodeArgs_NotShown(t *testing.T) {
	for _, in := range []string{
		``, `not json`, `{"a":1`, `{"a":1}}`, `1 2`, `{"a":1} x`, `]`, `{1:2}`,
		strings.Repeat("[", maxArgDepth+2) + strings.Repeat("]", maxArgDepth+2),
	} {
		if spans, _ := decodeArgs([]byte(in)); spans != nil {
			t.Errorf("decodeArgs(%.40q) = %q, want nil", in, marked(spans))
		}
	}
	// Nested as deep as allowed still shows.
	deep := strings.Repeat("[", maxArgDepth) + strings.Repeat("]", maxArgDepth)
	if spans, _ := decodeArgs([]byte(deep)); spans == nil {
		t.Errorf("decodeArgs(%d nested arrays) = nil", maxArgDepth)
	}
}

func TestAgo(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "just now"},
		{0, "just now"},
		{59 * time.Second, "59s ago"},
		{3*time.Minute + 59*time.Second, "3m ago"},
		{5 * time.Hour, "5h ago"},
		{47 * time.Hour, "47h ago"},
		{72 * time.Hour, "3d ago"},
	}
	for _, tt := range tests {
		if got := ago(tt.d); got != tt.want {
			t.Errorf("ago(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestApprovalHelpers(t *testing.T) {
	at := time.Date(2026, 11, 29, 21, 0, 0, 0, time.FixedZone("CET", 3600))
	if got, want := approvalOf("alice", at, "ok"), (approvalView{By: "alice", At: "2026-11-29 20:00:00 UTC", Comment: "ok"}); got != want {
		t.Errorf("approvalOf = %+v, want %+v", got, want)
	}
	if got := approvalOf("bob", time.Time{}, ""); got.At != "" {
		t.Errorf("approvalOf with no time: At = %q, want empty", got.At)
	}
	cases := []struct {
		have, need int
		want       string
	}{{0, 0, ""}, {1, 1, ""}, {0, 2, "0 of 2 approvals"}, {1, 2, "1 of 2 approvals"}, {3, 3, "3 of 3 approvals"}}
	for _, tt := range cases {
		c := pending.Call{}
		if tt.need > 0 {
			c.Quorum = []int{tt.need}
		}
		for range tt.have {
			c.Approvals = append(c.Approvals, pending.Approval{Counts: []int{0}})
		}
		if got := progress(c, callinfo.Info{}); got != tt.want {
			t.Errorf("progress(%d of %d) = %q, want %q", tt.have, tt.need, got, tt.want)
		}
	}
	approvers := []struct {
		groups, subjects []string
		need             int
		want             string
	}{
		{nil, nil, 1, ""},
		{nil, nil, 2, "2 approvals needed"},
		{[]string{"sre", "security"}, nil, 2, "groups sre, security · 2 approvals needed"},
		{[]string{"sre"}, []string{"alice"}, 1, "group sre · approver alice"},
		{nil, []string{"alice", "bob"}, 0, "approvers alice, bob"},
	}
	for _, tt := range approvers {
		if got := approversText(tt.groups, tt.subjects, tt.need); got != tt.want {
			t.Errorf("approversText(%v, %v, %d) = %q, want %q", tt.groups, tt.subjects, tt.need, got, tt.want)
		}
	}
}

func TestCallLabel(t *testing.T) {
	tests := []struct {
		v    callView
		want string
	}{
		{callView{Tool: "write_note", Request: "POST /tools/write_note"}, "write_note"},
		{callView{Tool: "write_note", Method: "tools/call", Request: "POST /"}, "tools/call write_note"},
		{callView{Tool: "mcp:resources/read", Method: "resources/read", Target: "file:///etc/hosts"}, "resources/read file:///etc/hosts"},
		{callView{Method: "initialize"}, "initialize"},
		{callView{Request: "DELETE /v1/items/7"}, "DELETE /v1/items/7"},
		{callView{}, ""},
	}
	for _, tt := range tests {
		if got := tt.v.Label(); got != tt.want {
			t.Errorf("%+v.Label() = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestHeading(t *testing.T) {
	tool := &callView{Tool: "write\u202enote"}
	tests := []struct {
		d    pageData
		want string
	}{
		{pageData{Title: "Approval requested", Forms: true, Call: tool}, `Approve write\u202enote?`},
		{pageData{Title: "Approval requested", Forms: true, Call: &callView{}}, "Approve this call?"},
		{pageData{Title: "Approved", Call: &callView{Tool: "write_note"}}, "Approved: write_note"},
		{pageData{Title: "Already decided", Call: &callView{}}, "Already decided"},
		{pageData{Title: "Request refused"}, "Request refused"},
	}
	for _, tt := range tests {
		if got := tt.d.Heading(); got != tt.want {
			t.Errorf("Heading() = %q, want %q", got, tt.want)
		}
	}
}

func TestMCPMethod(t *testing.T) {
	tests := []struct {
		name string
		info callinfo.Info
		want string
	}{
		{"field", callinfo.Info{Kind: "mcp", MCPMethod: "tools/call", PolicyInput: json.RawMessage(`{"mcp":{"method":"other"}}`)}, "tools/call"},
		{"policy input of an older record", callinfo.Info{Kind: "mcp", PolicyInput: json.RawMessage(`{"kind":"mcp","mcp":{"method":"tools/call"}}`)}, "tools/call"},
		{"neither", callinfo.Info{Kind: "mcp"}, ""},
		{"not mcp", callinfo.Info{Kind: "rest", MCPMethod: "tools/call"}, ""},
	}
	for _, tt := range tests {
		if got := mcpMethod(tt.info); got != tt.want {
			t.Errorf("%s: mcpMethod = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// viewNow is the clock of the page tests.
var viewNow = time.Date(2026, 11, 29, 21, 15, 2, 0, time.UTC)

// newViewHandler is a Handler whose pages render at viewNow.
func newViewHandler(t *testing.T) *Handler {
	t.Helper()
	signer, err := NewSigner([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Store: pending.NewMemory(pending.Options{}), Signer: signer, Now: func() time.Time { return viewNow }})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// viewCall is a call parked three minutes before viewNow, of info.
func viewCall(id string, state pending.State, info callinfo.Info) pending.Call {
	return pending.Call{
		ID: id, State: state, Subject: info.Subject, Upstream: info.Upstream, Tool: info.Tool, Info: info.Encode(),
		CreatedAt: viewNow.Add(-3 * time.Minute), ExpiresAt: viewNow.Add(57 * time.Minute),
	}
}

func restInfo(args string) callinfo.Info {
	return callinfo.Info{
		Kind: "rest", Tool: "write_note", Upstream: "notes", Subject: "agent-42", Target: "notes/today.txt",
		Arguments: json.RawMessage(args), Reasons: []string{"writes under notes/ need approval"}, RuleIDs: []string{"r3"},
		Method: "POST", Path: "/tools/write_note",
	}
}

func renderPage(t *testing.T, h *Handler, data pageData) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.render(rec, http.StatusOK, data)
	if rec.Code != http.StatusOK {
		t.Fatalf("render = %d\n%s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// between returns the text of body from the first from to the next to.
func between(t *testing.T, body, from, to string) string {
	t.Helper()
	i := strings.Index(body, from)
	if i < 0 {
		t.Fatalf("page lacks %q:\n%s", from, body)
	}
	j := strings.Index(body[i:], to)
	if j < 0 {
		t.Fatalf("page lacks %q after %q", to, from)
	}
	return body[i : i+j]
}

func TestPage_Layout(t *testing.T) {
	h := newViewHandler(t)
	args := `{"path":"\u002e\u002e/\u0065tc/passwd","content":"<script>alert(1)</script>\nline 2","n":1e400,"b":1,"a":2,"b":3}`
	c := viewCall("CALL1", pending.Waiting, restInfo(args))
	body := renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(c), Forms: true, Token: "v1.tok", Action: "./CALL1"})

	if got := between(t, body, "<h1>", "</h1>"); got != "<h1>Approve write_note?" {
		t.Errorf("heading = %q, want it to name the tool", got)
	}
	// The arguments and the form come before the details, so a phone
	// shows them first.
	args1, form, details := strings.Index(body, `<pre class="args"`), strings.Index(body, "<form"), strings.Index(body, `id="details"`)
	if args1 < 0 || form < 0 || details < 0 || args1 > form || form > details {
		t.Errorf("order: arguments at %d, form at %d, details at %d; want arguments < form < details", args1, form, details)
	}
	for name, n := range map[string]int{
		"<form":          1,
		"<textarea":      1,
		`name="comment"`: 1,
		`<button type="submit" name="decision" value="approve"`: 1,
		`<button type="submit" name="decision" value="reject"`:  1,
		`<input type="hidden" name="token" value="v1.tok">`:     1,
		`name="csrf"`:  0,
		"<script":      0, // no script, and the argument's tag is escaped
		"Signed in as": 0,
	} {
		if got := strings.Count(body, name); got != n {
			t.Errorf("page has %q %d times, want %d", name, got, n)
		}
	}

	decoded := between(t, body, `<pre class="args"`, "</pre>")
	for _, want := range []string{
		`<span class="str">&#34;../etc/passwd&#34;</span>`,
		`&lt;script&gt;alert(1)&lt;/script&gt;</span><span class="esc">\n</span><span class="str">` + "\nline 2",
		`"n": 1e400`, `"b": 1,` + "\n" + `  "a": 2,` + "\n" + `  "b": 3`,
	} {
		want = strings.ReplaceAll(want, `"n"`, "&#34;n&#34;")
		want = strings.ReplaceAll(strings.ReplaceAll(want, `"b"`, "&#34;b&#34;"), `"a"`, "&#34;a&#34;")
		if !strings.Contains(decoded, want) {
			t.Errorf("decoded arguments lack %q:\n%s", want, decoded)
		}
	}
	if strings.Contains(decoded, `\u002e`) {
		t.Errorf("decoded arguments still escaped:\n%s", decoded)
	}
	exact := between(t, body, "<summary>Exact JSON", "</details>")
	if !strings.Contains(exact, `&#34;path&#34;:&#34;\u002e\u002e/\u0065tc/passwd&#34;`) || !strings.Contains(exact, `&#34;n&#34;:1e400`) {
		t.Errorf("exact JSON not as stored:\n%s", exact)
	}
	details1 := body[details:]
	for _, want := range []string{
		"notes", "agent-42", "notes/today.txt", "writes under notes/ need approval", "r3",
		"POST /tools/write_note", "2026-11-29 21:12:02 UTC", "3m ago", "2026-11-29 22:12:02 UTC", "57m 00s left", "CALL1",
	} {
		if !strings.Contains(details1, want) {
			t.Errorf("details lack %q", want)
		}
	}
}

func TestPage_RevealsHiddenCharacters(t *testing.T) {
	h := newViewHandler(t)
	c := viewCall("CALL1", pending.Waiting, restInfo(`{"path":"notes/a\u202etxt.exe","content":"x`+"\u202e"+`y"}`))
	body := renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(c), Forms: true, Token: "t", Action: "./CALL1"})
	if strings.Contains(body, "\u202e") {
		t.Error("page shows a raw U+202E")
	}
	decoded := between(t, body, `<pre class="args"`, "</pre>")
	for _, want := range []string{`a</span><span class="hid">\u202e</span>`, `x</span><span class="hid">\u202e</span>`} {
		if !strings.Contains(decoded, want) {
			t.Errorf("decoded arguments lack %q:\n%s", want, decoded)
		}
	}
	if !strings.Contains(body, "Hidden characters (invisible or changing the text's direction)") {
		t.Error("page does not warn of the hidden characters")
	}
}

// TestPage_RevealsSelectorsAndTags: tag characters and variation
// selectors show as nothing, so the page spells them out in any value,
// a target or not, as it does bidi controls.
func TestPage_RevealsSelectorsAndTags(t *testing.T) {
	h := newViewHandler(t)
	c := viewCall("CALL1", pending.Waiting, restInfo(`{"path":"notes/a.txt","content":"see report`+"\uFE0F"+`.txt`+"\U000E0049\U000E0047"+`"}`))
	body := renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(c), Forms: true, Token: "t", Action: "./CALL1"})
	if strings.ContainsAny(body, "\uFE0F\U000E0049\U000E0047") {
		t.Error("page shows a raw variation selector or tag character")
	}
	decoded := between(t, body, `<pre class="args"`, "</pre>")
	for _, want := range []string{`report</span><span class="hid">\ufe0f</span>`, `<span class="hid">\udb40\udc49\udb40\udc47</span>`} {
		if !strings.Contains(decoded, want) {
			t.Errorf("decoded arguments lack %q:\n%s", want, decoded)
		}
	}
	if !strings.Contains(body, "Hidden characters (invisible or changing the text's direction)") {
		t.Error("page does not warn of the hidden characters")
	}
}

func TestPage_SignedIn(t *testing.T) {
	h := newViewHandler(t)
	c := viewCall("CALL1", pending.Waiting, restInfo(`{}`))
	body := renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(c), Forms: true, CSRF: "c<s>rf", Approver: "dana@example.com", Action: "./CALL1"})
	for name, n := range map[string]int{
		`<input type="hidden" name="csrf" value="c&lt;s&gt;rf">`: 1,
		`name="token"`:                         0,
		"Signed in as <b>dana@example.com</b>": 1,
	} {
		if got := strings.Count(body, name); got != n {
			t.Errorf("page has %q %d times, want %d", name, got, n)
		}
	}
}

// TestPage_QueryDecoded: a query with escapes is also shown decoded, a
// line a pair in the order sent, hidden characters spelled out: the policy
// judged the decoded values, and %2E%2E%2F reads as nothing to a person. A
// query without escapes is shown once, as sent.
func TestPage_QueryDecoded(t *testing.T) {
	h := newViewHandler(t)
	page := func(path string) string {
		info := callinfo.Info{Kind: "http", Upstream: "files", Subject: "agent-42", Method: "GET", Path: path}
		return renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(viewCall("CALL1", pending.Waiting, info)), Forms: true, Token: "t", Action: "./CALL1"})
	}
	body := page("/files?p=%2E%2E%2Fetc%2Fpasswd&name=a+b&z=%E2%80%AE")
	for _, want := range []string{"Query, decoded</dt>", "<code>p = ../etc/passwd</code>", "<code>name = a b</code>", `z = \u202e`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Index(body, "p = ") > strings.Index(body, "name = ") {
		t.Error("pairs not in the order sent")
	}
	if body := page("/files?p=a&q=b"); strings.Contains(body, "Query, decoded") {
		t.Error("a query without escapes is shown twice")
	}
}

func TestPage_MCP(t *testing.T) {
	h := newViewHandler(t)
	info := callinfo.Info{
		Kind: "mcp", Tool: "write_note", Upstream: "notes-mcp", Subject: "agent-42", Arguments: json.RawMessage(`{"path":"a"}`),
		Method: "POST", Path: "/", MCPMethod: "tools/call",
	}
	body := renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(viewCall("CALL1", pending.Waiting, info)), Forms: true, Token: "t", Action: "./CALL1"})
	if got := between(t, body, "<h1>", "</h1>"); got != "<h1>Approve tools/call write_note?" {
		t.Errorf("heading = %q", got)
	}
	if !regexp.MustCompile(`MCP method</dt><dd><code>tools/call</code>`).MatchString(body) {
		t.Error("details lack the MCP method")
	}
	if strings.Contains(body, "Request</dt>") {
		t.Error(`page still calls the HTTP request "Request"`)
	}
}

func TestPage_Quorum(t *testing.T) {
	h := newViewHandler(t)
	v := h.view(viewCall("CALL1", pending.Waiting, restInfo(`{}`)))
	v.Approvals = []approvalView{approvalOf("alice", viewNow.Add(-time.Minute), "fine <by me>")}
	v.Progress = "1 of 2 approvals"
	v.Approvers = approversText([]string{"sre", "security"}, nil, 2)
	body := renderPage(t, h, pageData{Title: "Approval requested", Call: v, Forms: true, Token: "t", Action: "./CALL1"})
	for _, want := range []string{
		"<b>1 of 2 approvals</b>", "<b>alice</b>", "2026-11-29 21:14:02 UTC", "<q>fine &lt;by me&gt;</q>",
		"groups sre, security · 2 approvals needed", "once enough approvers have approved",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Index(body, "Approvals so far") > strings.Index(body, "<form") {
		t.Error("the approvals so far come after the form")
	}
}

func TestPage_Decided(t *testing.T) {
	h := newViewHandler(t)
	c := viewCall("CALL1", pending.Rejected, restInfo(`{}`))
	c.DecidedBy, c.DecidedAt, c.Comment = "alice", viewNow.Add(-time.Minute), "not today"
	body := renderPage(t, h, pageData{Title: "Approval request", Message: "This call is no longer waiting for a decision.", Call: h.view(c)})
	if got := between(t, body, "<h1>", "</h1>"); got != "<h1>Approval request: write_note" {
		t.Errorf("heading = %q; want the title and the tool", got)
	}
	for _, want := range []string{"rejected", "alice", "not today", "2026-11-29 21:14:02 UTC"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<form") || strings.Contains(body, "left</span>") {
		t.Error("a decided call's page shows a form or a time left")
	}
}

func TestTitles(t *testing.T) {
	tests := []struct {
		err    error
		status int
		title  string
	}{
		{errCrossOrigin, http.StatusForbidden, "Request refused"},
		{ErrTokenInvalid, http.StatusForbidden, "Link not valid"},
		{fmt.Errorf("checking: %w", ErrTokenExpired), http.StatusForbidden, "Link expired"},
		{errSelfApproval, http.StatusForbidden, "You cannot approve your own call"},
		{errSignInRequired, http.StatusUnauthorized, "Sign-in needed"},
		{errNotEligible, http.StatusForbidden, "Not one of this call's approvers"},
		{errNeedsIdentity, http.StatusForbidden, "Sign-in needed"},
		{errCSRF, http.StatusForbidden, "Form expired"},
		{pending.ErrNotFound, http.StatusNotFound, "Unknown call"},
		{fmt.Errorf("pending: decoding call X: %w", pending.ErrDamaged), http.StatusInternalServerError, "Call unreadable"},
		{&pending.StateError{}, http.StatusConflict, "Already decided"},
		{badRequest("x"), http.StatusBadRequest, "Request not understood"},
		{errors.New("redis: connection refused"), http.StatusServiceUnavailable, "Try again"},
	}
	for _, tt := range tests {
		a := classify(tt.err, http.MethodPost)
		if a.status != tt.status || titleFor(a) != tt.title {
			t.Errorf("classify(%v): %d %q, want %d %q", tt.err, a.status, titleFor(a), tt.status, tt.title)
		}
	}
	if got := titleFor(answer{status: http.StatusTeapot}); got != "I'm a teapot" {
		t.Errorf("titleFor without a title = %q, want the status text", got)
	}
	msgs := map[error]string{
		errSignInRequired: "sign in to decide this call",
		errNotEligible:    "this call names its approvers, and you are not one of them",
		errNeedsIdentity:  "this call names its approvers: only a signed-in approver can decide it",
		errCSRF:           "the form could not be verified; reload the page and decide again",
		errCrossOrigin:    "cross-origin form posts are refused; open the approval link and decide on its page",
	}
	for err, want := range msgs {
		if got := classify(err, http.MethodGet).msg; got != want {
			t.Errorf("message %q, want %q", got, want)
		}
	}
}

func TestRenderInbox(t *testing.T) {
	h := newViewHandler(t)
	rec := httptest.NewRecorder()
	h.renderInbox(rec, inboxData{Approver: "dana"})
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("renderInbox = %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if body := rec.Body.String(); !strings.Contains(body, "Nothing is waiting for you.") || !strings.Contains(body, "<h1>Waiting for you</h1>") {
		t.Errorf("empty inbox:\n%s", body)
	}
}

func TestTimeLeft(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "expired"},
		{0, "expired"},
		{1500 * time.Millisecond, "2s left"},
		{61 * time.Second, "1m 01s left"},
		{time.Hour + 2*time.Minute + 3*time.Second, "1h 02m left"},
		{25 * time.Hour, "25h 00m left"},
	}
	for _, tt := range tests {
		if got := timeLeft(tt.d); got != tt.want {
			t.Errorf("timeLeft(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestParseDecisionRequest(t *testing.T) {
	tests := []struct {
		body    string
		want    decisionRequest
		wantErr bool
	}{
		{`{"decision":"approve"}`, decisionRequest{decision: "approve"}, false},
		{` {"comment":"c","decision":"reject"} `, decisionRequest{decision: "reject", comment: "c"}, false},
		{`{"decision":"approve","comment":null}`, decisionRequest{decision: "approve"}, false},
		{`{}`, decisionRequest{}, false}, // parseDecision refuses the missing decision
		{``, decisionRequest{}, true},
		{`null`, decisionRequest{}, true},
		{`{"decision":"approve"`, decisionRequest{}, true},
		{`{"decision":"approve",}`, decisionRequest{}, true},
		{`{"decision":1}`, decisionRequest{}, true},
		{`{"comment":{}}`, decisionRequest{}, true},
		{`{"decision":"a","decision":"b"}`, decisionRequest{}, true},
		{`{"DECISION":"approve"}`, decisionRequest{}, true},
		{`{"decision":"approve"} x`, decisionRequest{}, true},
	}
	for _, tt := range tests {
		got, err := parseDecisionRequest([]byte(tt.body))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseDecisionRequest(%q) = %+v, %v; want %+v, error %v", tt.body, got, err, tt.want, tt.wantErr)
		}
	}
}

// FuzzPlainDecisionRequest holds the fast reading of a decision request to
// the decoder's: whatever it reads, the decoder reads the same, without
// an error.
func FuzzPlainDecisionRequest(f *testing.F) {
	for _, body := range []string{
		`{"decision":"approve"}`, ` {"comment":"c","decision":"reject"} `, "{\n\t\"decision\" : \"approve\" ,\r\"comment\":\"\"}\n",
		`{}`, `{ }`, `{"decision":"approve","comment":null}`, `{"decision":"a","decision":"b"}`, `{"decision":"a\"b"}`,
		`{"comment":"héllo <b> & \u00e9"}`, `{"decision":"approve"} x`, `{"decision":"approve",}`, `{,}`, `{"decision":"approve"}}`,
		`{"remember":{"scope":"subject+tool","lifetime":"8h"},"decision":"approve"}`, "{\"comment\":\"a\tb\"}", `{"comment":"\u2028"}`,
		`{"DECISION":"approve"}`, `{"decision" "approve"}`, `{"decision":"approve" "comment":"c"}`, "\ufeff{}",
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return // parseDecisionRequest refuses it before either reading
		}
		fast, ok := plainDecisionRequest(body)
		if !ok {
			return
		}
		slow, err := decodeDecisionRequest(body)
		if err != nil || fast != slow {
			t.Fatalf("%q: plainDecisionRequest = %+v, decodeDecisionRequest = %+v, %v", body, fast, slow, err)
		}
	})
}

func TestNew_ChecksConfig(t *testing.T) {
	signer, err := NewSigner([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	store := pending.NewMemory(pending.Options{})
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{Store: store, Signer: signer}, true},
		{"no store", Config{Signer: signer}, false},
		{"no signer", Config{Store: store}, false},
		{"no key: groups only", Config{Store: store, Signer: signer, Approvers: []Approver{{Name: "alice", Groups: []string{"sre"}}}}, true},
		{"same name twice", Config{Store: store, Signer: signer, Approvers: []Approver{{Name: "alice", Key: "k1"}, {Name: "alice", Key: "k2"}}}, false},
		{"empty name", Config{Store: store, Signer: signer, Approvers: []Approver{{Key: "k"}}}, false},
		{"shared key", Config{Store: store, Signer: signer, Approvers: []Approver{{Name: "alice", Key: "k"}, {Name: "bob", Key: "k"}}}, false},
		{"public URL without scheme", Config{Store: store, Signer: signer, PublicURL: "toolgate.example.com"}, false},
		{"public URL", Config{Store: store, Signer: signer, PublicURL: "https://toolgate.example.com/"}, true},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg); (err == nil) != tt.ok {
			t.Errorf("%s: New() error = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// TestPage_TargetsBeyond: a call that names more than its target says so
// beside the target, and offers no grant for that target; one that does
// not offers both scopes and says nothing.
func TestPage_TargetsBeyond(t *testing.T) {
	h := newViewHandler(t)
	for _, beyond := range []bool{false, true} {
		info := restInfo(`{"path":"notes/today.txt","file":"secrets/k"}`)
		info.TargetsBeyond = beyond
		c := viewCall("CALL1", pending.Waiting, info)
		body := renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(c), Forms: true, Remember: true, Token: "t", Action: "./CALL1"})
		want := 0
		if beyond {
			want = 1
		}
		if got := strings.Count(body, "and other targets: read the arguments below"); got != want {
			t.Errorf("beyond %v: the note appears %d times, want %d", beyond, got, want)
		}
		if got := strings.Count(body, `value="subject+tool+target"`); got != 1-want {
			t.Errorf("beyond %v: the grant for this target is offered %d times, want %d", beyond, got, 1-want)
		}
		if got := strings.Count(body, `value="subject+tool"`); got != 1 {
			t.Errorf("beyond %v: the grant for the tool is offered %d times, want 1", beyond, got)
		}
		// Before remembering, the approver learns what a grant is bound to.
		if !strings.Contains(body, "only if it sends the same headers and other parameters as this one") {
			t.Errorf("beyond %v: the page does not say a grant is bound to this call's headers and parameters", beyond)
		}
	}
}

// TestPage_Headers: the headers approving sends have their own section,
// escaped, with hidden characters spelled out, credentials' values
// hidden, long values marked as cut and unlisted ones counted; the form
// says approving sends them. A call parked before headers were listed
// shows no section, and the form does not claim to show them.
func TestPage_Headers(t *testing.T) {
	h := newViewHandler(t)
	info := restInfo(`{"path":"notes/today.txt"}`)
	info.Headers = &callinfo.Headers{List: []callinfo.Header{
		{Name: "Accept", Value: "*/*"},
		{Name: "Cookie", Hidden: true, Size: 13},
		{Name: "X-Api-Key", Hidden: true, Size: 1},
		{Name: "X-Long", Value: "aaaa…", Size: 5000},
		{Name: "X-Note", Value: "<script>alert(1)</script>\tx"},
		{Name: "X-Raw", Value: `\xFF\xFE`, NotUTF8: true},
		{Name: "X-Target-Override", Value: "/etc/sha\u202edow"},
	}, Omitted: 2}
	c := viewCall("CALL1", pending.Waiting, info)
	body := renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(c), Forms: true, Token: "t", Action: "./CALL1"})

	section := between(t, body, `<h2 id="headers">Headers sent</h2>`, `<form`)
	want := `<pre class="headers" aria-labelledby="headers"><b>Accept</b>: */*
<b>Cookie</b>: <span class="mark">(hidden: 13 bytes)</span>
<b>X-Api-Key</b>: <span class="mark">(hidden: 1 byte)</span>
<b>X-Long</b>: aaaa… <span class="mark">(cut: 4 of 5000 bytes shown)</span>
<b>X-Note</b>: &lt;script&gt;alert(1)&lt;/script&gt;<span class="esc">\t</span>x
<b>X-Raw</b>: \xFF\xFE <span class="mark">(not UTF-8: such bytes are shown as \xNN)</span>
<b>X-Target-Override</b>: /etc/sha<span class="hid">\u202e</span>dow
</pre>`
	if !strings.Contains(section, want) {
		t.Errorf("headers section lacks\n%s\ngot\n%s", want, section)
	}
	for _, want := range []string{
		"Hidden characters (invisible or changing the text's direction)",
		"2 more headers are sent that this page does not list: it lists the first 64 by name, 16 KiB in all.",
		"toolgate adds its own",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("headers section lacks %q:\n%s", want, section)
		}
	}
	if strings.Contains(body, "\u202e") || strings.Contains(body, "<script") {
		t.Error("a header reached the page unescaped")
	}
	// The arguments come first, the headers next, then the form.
	if a, hd, f := strings.Index(body, `<pre class="args"`), strings.Index(body, `id="headers"`), strings.Index(body, "<form"); a > hd || hd > f {
		t.Errorf("arguments at %d, headers at %d, form at %d: want them in that order", a, hd, f)
	}
	if !strings.Contains(body, "Approving forwards the request above, as stored: its arguments and headers, once.") {
		t.Error("the form does not say that approving sends the headers")
	}

	// No headers of the agent's: said so.
	info.Headers = &callinfo.Headers{List: []callinfo.Header{}}
	body = renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(viewCall("CALL2", pending.Waiting, info)), Forms: true, Token: "t", Action: "./CALL2"})
	if section := between(t, body, `<h2 id="headers">`, `<form`); !strings.Contains(section, "none of the agent's") || strings.Contains(section, "<pre") {
		t.Errorf("no headers shown as:\n%s", section)
	}

	// Parked before headers were listed: no section, and the form does not
	// point at one.
	info.Headers = nil
	body = renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(viewCall("CALL3", pending.Waiting, info)), Forms: true, Token: "t", Action: "./CALL3"})
	if strings.Contains(body, "Headers sent") || strings.Contains(body, "its arguments and headers") {
		t.Errorf("a call without listed headers shows a headers section or claims to:\n%s", between(t, body, `<h2 id="arguments">`, "</form>"))
	}
	if !strings.Contains(body, "Approving forwards the arguments above, with the headers the agent sent (this call's record does not list them), once.") {
		t.Error("the form of a call without listed headers does not say what approving sends")
	}
	// The requester's confirmation says the same.
	info.Headers = &callinfo.Headers{List: []callinfo.Header{{Name: "X-Mode", Value: "fast"}}}
	body = renderPage(t, h, pageData{Title: "Confirm", Call: h.view(viewCall("CALL4", pending.Waiting, info)), Forms: true, Confirm: true, Token: "t", Action: "./CALL4"})
	if !strings.Contains(body, "Confirming forwards the request above, as stored: its arguments and headers, once.") || !strings.Contains(body, "<b>X-Mode</b>: fast") {
		t.Error("the confirmation page does not show the headers or say that confirming sends them")
	}
}

// TestPage_OtherParams: the other members of an MCP tool call's params
// have their own section, between the arguments and the headers, decoded
// and escaped as the arguments are, hidden characters spelled out; a
// value too large to list is named with its size, members past the list
// are counted, and the form says approving sends them. A call that sends
// none shows no section; an MCP call parked before they were listed
// shows none and its form does not claim to show them.
func TestPage_OtherParams(t *testing.T) {
	h := newViewHandler(t)
	info := callinfo.Info{
		Kind: "mcp", Tool: "write_note", Upstream: "notes-mcp", Subject: "agent-42", MCPMethod: "tools/call",
		Method: "POST", Path: "/mcp", Arguments: json.RawMessage(`{"path":"notes/a.txt","content":"hi"}`),
		Headers: &callinfo.Headers{List: []callinfo.Header{{Name: "Accept", Value: "*/*"}}},
		OtherParams: &callinfo.Params{List: []callinfo.Param{
			{Name: "_meta", Value: json.RawMessage(`{"acme/overwrite_path":"/etc/pass\u202ewd","note":"<script>x</script>"}`)},
			{Name: "big", Size: 20000},
			{Name: "inputResponses", Value: json.RawMessage(`{"confirm":{"action":"accept","content":{"ok":true}}}`)},
			{Name: "requestState", Value: json.RawMessage(`"s1"`)},
		}, Omitted: 3},
	}
	body := renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(viewCall("CALL1", pending.Waiting, info)), Forms: true, Token: "t", Action: "./CALL1"})

	section := between(t, body, `<h2 id="params">Other parameters sent</h2>`, `<h2 id="headers">`)
	for _, want := range []string{
		`<pre class="args" aria-labelledby="params">{
  &#34;_meta&#34;: {
    &#34;acme/overwrite_path&#34;: <span class="str">&#34;/etc/pass</span><span class="hid">\u202e</span><span class="str">wd&#34;</span>,
    &#34;note&#34;: <span class="str">&#34;&lt;script&gt;x&lt;/script&gt;&#34;</span>
  },
  &#34;inputResponses&#34;: {
    &#34;confirm&#34;: {
      &#34;action&#34;: <span class="str">&#34;accept&#34;</span>,
      &#34;content&#34;: {
        &#34;ok&#34;: true
      }
    }
  },
  &#34;requestState&#34;: <span class="str">&#34;s1&#34;</span>
}</pre>`,
		`<b>big</b>: <span class="mark">(value not shown: 20000 bytes)</span>`,
		"Hidden characters (invisible or changing the text's direction)",
		"3 more parameters are sent that this page does not list: it lists the first 32 by name.",
		"a <code>progressToken</code> in <code>_meta</code> is not shown",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("params section lacks\n%s\ngot\n%s", want, section)
		}
	}
	if strings.Contains(body, "\u202e") || strings.Contains(body, "<script") {
		t.Error("a parameter reached the page unescaped")
	}
	if a, p, hd := strings.Index(body, `id="arguments"`), strings.Index(body, `id="params"`), strings.Index(body, `id="headers"`); a > p || p > hd {
		t.Errorf("arguments at %d, params at %d, headers at %d: want them in that order", a, p, hd)
	}
	if !strings.Contains(body, "Approving forwards the request above, as stored: its arguments, other parameters and headers, once.") {
		t.Error("the form does not say that approving sends the other parameters")
	}

	// None sent: no section, and the form names none.
	info.OtherParams = &callinfo.Params{List: []callinfo.Param{}}
	body = renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(viewCall("CALL2", pending.Waiting, info)), Forms: true, Token: "t", Action: "./CALL2"})
	if strings.Contains(body, "Other parameters sent") || !strings.Contains(body, "Approving forwards the request above, as stored: its arguments and headers, once.") {
		t.Errorf("a call with no other parameters shows:\n%s", between(t, body, `<h2 id="arguments">`, "</form>"))
	}

	// Parked before they were listed: no section, and the form says so.
	info.OtherParams = nil
	body = renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(viewCall("CALL3", pending.Waiting, info)), Forms: true, Token: "t", Action: "./CALL3"})
	if strings.Contains(body, "Other parameters sent") ||
		!strings.Contains(body, "its arguments and headers, with any other parameters of its MCP message (this call's record does not list them), once.") {
		t.Errorf("an MCP call without listed parameters shows:\n%s", between(t, body, `<h2 id="arguments">`, "</form>"))
	}
	info.Headers = nil
	body = renderPage(t, h, pageData{Title: "Approval requested", Call: h.view(viewCall("CALL4", pending.Waiting, info)), Forms: true, Token: "t", Action: "./CALL4"})
	if !strings.Contains(body, "Approving forwards the arguments above, with the headers and any other parameters of its MCP message the agent sent (this call's record does not list them), once.") {
		t.Errorf("an old MCP call's form says:\n%s", between(t, body, `<form`, "</form>"))
	}
}
