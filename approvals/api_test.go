package approvals_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// decoded is an API answer read as generic JSON.
func decoded(t *testing.T, res response) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(res.body), &v); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v\n%s", res.status, err, res.body)
	}
	return v
}

// TestAPI_SelfApprovalBehindASubjectPrefix: a JWT's subject may carry a
// prefix (identity.jwt.subject_prefix); the approver its claim names is
// still refused on the call, through the principal.
func TestAPI_SelfApprovalBehindASubjectPrefix(t *testing.T) {
	e := newEnv(t)
	c := e.parkOf("jwt:alice", "jwt:https://issuer.example#alice", "write_note", `{"path":"notes/today.txt"}`)
	if res := e.do(http.MethodPost, "/api/approvals/"+c.ID, bearer(aliceKey), `{"decision":"approve"}`); res.status != http.StatusForbidden {
		t.Fatalf("alice approving her own token's call: %d, want 403\n%s", res.status, res.body)
	}
	if e.state(c.ID) != pending.Waiting {
		t.Fatalf("call %s, want waiting", e.state(c.ID))
	}
	if res := e.do(http.MethodPost, "/api/approvals/"+c.ID, bearer(bobKey), `{"decision":"approve"}`); res.status != http.StatusOK {
		t.Fatalf("bob approving: %d\n%s", res.status, res.body)
	}
}

func TestAPI_Decide(t *testing.T) {
	tests := []struct {
		name      string
		subject   string // the call's caller
		header    http.Header
		body      string
		unknownID bool
		want      int
		wantBody  map[string]any // nil: only the status is checked
		wantState pending.State
	}{
		{
			"approve with a good key", "agent-42", bearer(aliceKey), `{"decision":"approve","comment":"ok"}`, false,
			http.StatusOK,
			map[string]any{"status": "approved", "decided_by": "alice", "approvals": []any{map[string]any{"by": "alice", "at": "2026-11-29T21:15:02Z", "comment": "ok"}}},
			pending.Approved,
		},
		{
			"reject with a good key", "agent-42", bearer(bobKey), `{"decision":"reject"}`, false,
			http.StatusOK,
			map[string]any{"status": "rejected", "decided_by": "bob"},
			pending.Rejected,
		},
		{
			"null comment", "agent-42", bearer(aliceKey), `{"decision":"approve","comment":null}`, false,
			http.StatusOK,
			map[string]any{"status": "approved", "decided_by": "alice", "approvals": []any{map[string]any{"by": "alice", "at": "2026-11-29T21:15:02Z", "comment": ""}}},
			pending.Approved,
		},
		{"no key", "agent-42", nil, `{"decision":"approve"}`, false, http.StatusUnauthorized, nil, pending.Waiting},
		{"unknown key", "agent-42", bearer("not-a-key-0123456789"), `{"decision":"approve"}`, false, http.StatusUnauthorized, nil, pending.Waiting},
		{"key with a suffix", "agent-42", bearer(aliceKey + "x"), `{"decision":"approve"}`, false, http.StatusUnauthorized, nil, pending.Waiting},
		{"empty bearer", "agent-42", http.Header{"Authorization": {"Bearer "}}, `{"decision":"approve"}`, false, http.StatusUnauthorized, nil, pending.Waiting},
		{"basic scheme", "agent-42", http.Header{"Authorization": {"Basic " + aliceKey}}, `{"decision":"approve"}`, false, http.StatusUnauthorized, nil, pending.Waiting},
		{"two authorization headers", "agent-42", http.Header{"Authorization": {"Bearer " + aliceKey, "Bearer " + bobKey}}, `{"decision":"approve"}`, false, http.StatusUnauthorized, nil, pending.Waiting},
		{"self-approval", "alice", bearer(aliceKey), `{"decision":"approve"}`, false, http.StatusForbidden, nil, pending.Waiting},
		{"self-approval, other case", "Alice", bearer(aliceKey), `{"decision":"approve"}`, false, http.StatusForbidden, nil, pending.Waiting},
		{
			"rejecting one's own call", "alice", bearer(aliceKey), `{"decision":"reject","comment":"oops"}`, false,
			http.StatusOK,
			map[string]any{"status": "rejected", "decided_by": "alice"},
			pending.Rejected,
		},
		{"unknown call", "agent-42", bearer(aliceKey), `{"decision":"approve"}`, true, http.StatusNotFound, nil, pending.Waiting},
		{"not JSON", "agent-42", bearer(aliceKey), `decision=approve`, false, http.StatusBadRequest, nil, pending.Waiting},
		{"not an object", "agent-42", bearer(aliceKey), `["approve"]`, false, http.StatusBadRequest, nil, pending.Waiting},
		{"unknown decision", "agent-42", bearer(aliceKey), `{"decision":"yes"}`, false, http.StatusBadRequest, nil, pending.Waiting},
		{"missing decision", "agent-42", bearer(aliceKey), `{"comment":"hm"}`, false, http.StatusBadRequest, nil, pending.Waiting},
		{"duplicate decision", "agent-42", bearer(aliceKey), `{"decision":"reject","decision":"approve"}`, false, http.StatusBadRequest, nil, pending.Waiting},
		{"case-variant key", "agent-42", bearer(aliceKey), `{"Decision":"approve"}`, false, http.StatusBadRequest, nil, pending.Waiting},
		{"unknown key", "agent-42", bearer(aliceKey), `{"decision":"approve","remember":true}`, false, http.StatusBadRequest, nil, pending.Waiting},
		{"decision not a string", "agent-42", bearer(aliceKey), `{"decision":true}`, false, http.StatusBadRequest, nil, pending.Waiting},
		{"trailing data", "agent-42", bearer(aliceKey), `{"decision":"approve"}{"decision":"reject"}`, false, http.StatusBadRequest, nil, pending.Waiting},
		{"invalid UTF-8", "agent-42", bearer(aliceKey), "{\"decision\":\"approve\",\"comment\":\"\xff\"}", false, http.StatusBadRequest, nil, pending.Waiting},
		{"comment too long", "agent-42", bearer(aliceKey), `{"decision":"approve","comment":"` + strings.Repeat("x", 2001) + `"}`, false, http.StatusBadRequest, nil, pending.Waiting},
		{"body over 64 KiB", "agent-42", bearer(aliceKey), `{"decision":"approve","comment":"` + strings.Repeat("x", 70<<10) + `"}`, false, http.StatusRequestEntityTooLarge, nil, pending.Waiting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.park(tt.subject, "write_note", `{"path":"notes/today.txt"}`)
			id := c.ID
			if tt.unknownID {
				id = "NOSUCHCALL"
			}
			res := e.do(http.MethodPost, "/api/approvals/"+id, tt.header, tt.body)
			if res.status != tt.want {
				t.Errorf("POST = %d, want %d\n%s", res.status, tt.want, res.body)
			}
			if ct := res.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			got := decoded(t, res)
			if tt.wantBody != nil {
				tt.wantBody["call_id"] = c.ID
				if diff := cmp.Diff(tt.wantBody, got); diff != "" {
					t.Errorf("answer (-want +got):\n%s", diff)
				}
			} else if _, ok := got["error"].(string); !ok {
				t.Errorf("refusal without an error message: %s", res.body)
			}
			if tt.want == http.StatusUnauthorized && res.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if s := e.state(c.ID); s != tt.wantState {
				t.Errorf("state = %s, want %s", s, tt.wantState)
			}
			wantDecisions := 0
			if tt.want == http.StatusOK {
				wantDecisions = 1
			}
			if n := len(e.onDecisionCalls()); n != wantDecisions {
				t.Errorf("OnDecision called %d times, want %d", n, wantDecisions)
			}
			if recs := e.logRecords(t, "approval"); len(recs) != wantDecisions {
				t.Errorf("%d audit records, want %d", len(recs), wantDecisions)
			} else if wantDecisions == 1 && (recs[0]["via"] != "api" || recs[0]["decided_by"] != got["decided_by"]) {
				t.Errorf("audit record %v, want via api and decided_by %v", recs[0], got["decided_by"])
			}
		})
	}
}

func bearer(key string) http.Header {
	return http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}}
}

func TestAPI_SecondDecisionConflicts(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
	if res := e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"reject"}`); res.status != http.StatusOK {
		t.Fatalf("first decision = %d, want 200", res.status)
	}
	res := e.api(http.MethodPost, "/api/approvals/"+c.ID, bobKey, `{"decision":"approve"}`)
	if res.status != http.StatusConflict {
		t.Fatalf("second decision = %d, want 409", res.status)
	}
	got := decoded(t, res)
	delete(got, "error")
	want := map[string]any{"call_id": c.ID, "status": "rejected", "decided_by": "alice"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("409 answer (-want +got):\n%s", diff)
	}
}

// A call whose expiry passed is refused by the store even before a sweeper
// marks it; the 409 says expired, not waiting.
func TestAPI_ExpiredCallConflicts(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
	e.clock.Advance(61 * time.Minute)
	res := e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"approve"}`)
	if res.status != http.StatusConflict {
		t.Fatalf("decision after expiry = %d, want 409", res.status)
	}
	if got := decoded(t, res)["status"]; got != "expired" {
		t.Errorf("status = %v, want expired", got)
	}
}

func TestAPI_List(t *testing.T) {
	e := newEnv(t)
	a := e.park("agent-42", "write_note", `{"path":"notes/a.txt"}`)
	e.clock.Advance(time.Second)
	b := e.park("agent-7", "write_note", `{"path":"notes/b.txt"}`)
	e.clock.Advance(time.Second)
	d := e.park("agent-42", "write_note", `{"path":"notes/d.txt"}`)
	if res := e.api(http.MethodPost, "/api/approvals/"+d.ID, bobKey, `{"decision":"approve"}`); res.status != http.StatusOK {
		t.Fatalf("approve = %d", res.status)
	}
	type summary struct {
		CallID    string `json:"call_id"`
		Status    string `json:"status"`
		Tool      string `json:"tool"`
		Upstream  string `json:"upstream"`
		Subject   string `json:"subject"`
		ExpiresAt string `json:"expires_at"`
		CreatedAt string `json:"created_at"`
		DecidedBy string `json:"decided_by"`
	}
	row := func(c pending.Call, status, by string) summary {
		return summary{
			c.ID, status, "write_note", "notes", c.Subject,
			c.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"), c.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), by,
		}
	}
	tests := []struct {
		query string
		want  []summary
	}{
		{"", []summary{row(a, "waiting", ""), row(b, "waiting", "")}},
		{"?status=waiting", []summary{row(a, "waiting", ""), row(b, "waiting", "")}},
		{"?status=waiting&limit=1", []summary{row(a, "waiting", "")}},
		{"?status=approved", []summary{row(d, "approved", "bob")}},
		{"?status=rejected", []summary{}},
	}
	for _, tt := range tests {
		t.Run("list"+tt.query, func(t *testing.T) {
			res := e.api(http.MethodGet, "/api/approvals"+tt.query, aliceKey, "")
			if res.status != http.StatusOK {
				t.Fatalf("GET = %d, want 200\n%s", res.status, res.body)
			}
			var got struct {
				Calls []summary `json:"calls"`
			}
			dec := json.NewDecoder(strings.NewReader(res.body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("%v\n%s", err, res.body)
			}
			if diff := cmp.Diff(tt.want, got.Calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
	for _, q := range []string{"?status=pending", "?limit=0", "?limit=1001", "?limit=x", "?status=waiting&status=approved"} {
		if res := e.api(http.MethodGet, "/api/approvals"+q, aliceKey, ""); res.status != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400", q, res.status)
		}
	}
	if res := e.api(http.MethodGet, "/api/approvals", "", ""); res.status != http.StatusUnauthorized {
		t.Errorf("GET without a key = %d, want 401", res.status)
	}
}

func TestAPI_Show(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"notes/today.txt","content":"<b>"}`)
	if res := e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"approve","comment":"fine"}`); res.status != http.StatusOK {
		t.Fatalf("approve = %d", res.status)
	}
	res := e.api(http.MethodGet, "/api/approvals/"+c.ID, bobKey, "")
	if res.status != http.StatusOK {
		t.Fatalf("GET = %d, want 200\n%s", res.status, res.body)
	}
	got := decoded(t, res)
	var info map[string]any
	if err := json.Unmarshal(c.Info, &info); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"call_id": c.ID, "status": "approved", "tool": "write_note", "upstream": "notes", "subject": "agent-42",
		"created_at": "2026-11-29T21:15:02Z", "expires_at": "2026-11-29T22:15:02Z",
		"decided_by": "alice", "decided_at": "2026-11-29T21:15:02Z", "comment": "fine", "info": info,
		"approvals": []any{map[string]any{"by": "alice", "at": "2026-11-29T21:15:02Z", "comment": "fine"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("call (-want +got):\n%s", diff)
	}
	if strings.Contains(res.body, "token") || strings.Contains(res.body, "POST /tools/write_note\\n") {
		t.Errorf("the API shows a token or the request bytes:\n%s", res.body)
	}
	if res := e.api(http.MethodGet, "/api/approvals/NOSUCHCALL", bobKey, ""); res.status != http.StatusNotFound {
		t.Errorf("GET unknown = %d, want 404", res.status)
	}
	if res := e.api(http.MethodGet, "/api/approvals/"+c.ID, "", ""); res.status != http.StatusUnauthorized {
		t.Errorf("GET without a key = %d, want 401", res.status)
	}
}

// Sixteen deciders at once, approving and rejecting: the store's first
// decision wins, everyone else sees 409 (docs/security.md, X03 and X04).
func TestConcurrentDecisions(t *testing.T) {
	for _, via := range []string{"link", "api"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t)
			c := e.park("agent-42", "write_note", `{"path":"notes/today.txt"}`)
			const n = 16
			statuses := make([]int, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				decision := "approve"
				if i%2 == 1 {
					decision = "reject"
				}
				wg.Go(func() {
					<-start
					if via == "link" {
						statuses[i] = e.postForm(c.ID, url.Values{"token": {e.signer.Token(c)}, "decision": {decision}}).status
					} else {
						statuses[i] = e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"`+decision+`"}`).status
					}
				})
			}
			close(start)
			wg.Wait()
			count := map[int]int{}
			for _, s := range statuses {
				count[s]++
			}
			if diff := cmp.Diff(map[int]int{http.StatusOK: 1, http.StatusConflict: n - 1}, count); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			calls := e.onDecisionCalls()
			if len(calls) != 1 {
				t.Fatalf("OnDecision called %d times, want 1", len(calls))
			}
			if s := e.state(c.ID); s != calls[0].State {
				t.Errorf("state = %s, but OnDecision saw %s", s, calls[0].State)
			}
			if recs := e.logRecords(t, "approval"); len(recs) != 1 {
				t.Errorf("%d audit records, want 1", len(recs))
			}
		})
	}
}

// TestAPIDecisionEndsOverdueCall: a decision that arrives after the call's
// expiry, before any sweep, is refused (409), and the end it makes (the
// call expires) is reported once, through OnDecision: no sweep would.
func TestAPIDecisionEndsOverdueCall(t *testing.T) {
	e := newEnv(t)
	c := e.park("agent-42", "write_note", `{"path":"notes/x"}`)
	e.clock.Advance(2 * time.Hour)
	res := e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"approve"}`)
	if res.status != http.StatusConflict {
		t.Errorf("approve after the expiry: %d %s, want 409", res.status, res.body)
	}
	if st := e.state(c.ID); st != pending.Expired {
		t.Errorf("the call is %s, want expired", st)
	}
	got := e.onDecisionCalls()
	if len(got) != 1 || got[0].ID != c.ID || got[0].State != pending.Expired {
		t.Errorf("OnDecision saw %v, want the call once, expired", got)
	}
	if ended, err := e.store.Expire(context.Background(), 10); err != nil || len(ended) != 0 {
		t.Errorf("Expire after the decision's end = %v, %v; want nothing more to report", ended, err)
	}
}

// unreplicated is the memory store as a Redis primary whose replicas do
// not confirm: a decision is made, and ErrNotReplicated comes back.
type unreplicated struct{ pending.Store }

func (s unreplicated) Decide(ctx context.Context, id string, d pending.Decision) (pending.Call, error) {
	if _, err := s.Store.Decide(ctx, id, d); err != nil {
		return pending.Call{}, err
	}
	return pending.Call{}, pending.ErrNotReplicated
}

// TestAPIDecisionNotReplicated: a decision the primary recorded but its
// replicas did not confirm stands (it may run), so it is audited and
// reported as any decision, and the approver is told it is unconfirmed,
// not to try again.
func TestAPIDecisionNotReplicated(t *testing.T) {
	e := newEnv(t, func(cfg *approvals.Config) { cfg.Store = unreplicated{cfg.Store} })
	c := e.park("agent-42", "write_note", `{"path":"notes/x"}`)
	res := e.api(http.MethodPost, "/api/approvals/"+c.ID, aliceKey, `{"decision":"approve"}`)
	if res.status != http.StatusServiceUnavailable || !strings.Contains(res.body, "not yet confirmed") || strings.Contains(res.body, "try again") {
		t.Errorf("unconfirmed decision: %d %s, want 503 saying it is unconfirmed", res.status, res.body)
	}
	if got := e.onDecisionCalls(); len(got) != 1 || got[0].State != pending.Approved || got[0].DecidedBy != "alice" {
		t.Errorf("OnDecision saw %v, want the approval once", got)
	}
	if recs := e.logRecords(t, "approval"); len(recs) != 1 {
		t.Errorf("audit records %v, want the decision's", recs)
	}
}

// TestAPI_RememberNeedsAKnownCaller: callers without credentials
// (identity.anonymous) share one principal, so a grant for one of their
// calls would let every one of them through: "remember" is refused, and the
// call stays waiting.
func TestAPI_RememberNeedsAKnownCaller(t *testing.T) {
	e := newEnv(t, func(c *approvals.Config) { c.Grants = c.Store.(*pending.MemoryStore) })
	c := e.parkOf("anonymous", "anonymous", "write_note", `{"path":"notes/today.txt"}`)
	res := e.do(http.MethodPost, "/api/approvals/"+c.ID, bearer(aliceKey),
		`{"decision":"approve","remember":{"scope":"subject+tool","lifetime":"720h"}}`)
	if res.status != http.StatusBadRequest || strings.Contains(res.body, `"grant_id"`) {
		t.Errorf("POST = %d, want 400 and no grant\n%s", res.status, res.body)
	}
	if s := e.state(c.ID); s != pending.Waiting {
		t.Errorf("state = %s, want waiting", s)
	}
}

// TestAPI_RememberNeedsAToolCall: a grant names one principal's calls of
// one tool, so "remember" on a call without a tool (a plain HTTP call) is
// refused before anything is decided, as a bad scope is.
func TestAPI_RememberNeedsAToolCall(t *testing.T) {
	e := newEnv(t, func(c *approvals.Config) { c.Grants = c.Store.(*pending.MemoryStore) })
	c := e.park("agent-42", "", `{"path":"notes/today.txt"}`)
	res := e.do(http.MethodPost, "/api/approvals/"+c.ID, bearer(aliceKey),
		`{"decision":"approve","remember":{"scope":"subject+tool","lifetime":"8h"}}`)
	if res.status != http.StatusBadRequest {
		t.Errorf("POST = %d, want 400\n%s", res.status, res.body)
	}
	if s := e.state(c.ID); s != pending.Waiting {
		t.Errorf("state = %s, want waiting", s)
	}
}

// TestAPI_MustAskIsApprovedOnce: a call a rule says must_ask is asked
// about every time, so its approval cannot be remembered: the page offers
// no grant and the API refuses one, the call left waiting. The same call
// without must_ask is offered and remembered.
func TestAPI_MustAskIsApprovedOnce(t *testing.T) {
	e := newEnv(t, func(c *approvals.Config) { c.Grants = c.Store.(*pending.MemoryStore) })
	for _, mustAsk := range []bool{false, true} {
		info := callinfo.Info{
			Kind: "rest", Tool: "write_note", Upstream: "notes", Subject: "agent-42", Target: "secrets/key",
			Arguments: json.RawMessage(`{"path":"secrets/key"}`), Reasons: []string{"secrets are asked about every time"},
			RuleIDs: []string{"secrets"}, Method: "POST", Path: "/tools/write_note", MustAsk: mustAsk,
		}
		c, _, err := e.store.Park(context.Background(), pending.Call{
			ID: rand.Text(), Subject: "agent-42", Principal: "key:agent-42", Upstream: "notes", Tool: "write_note",
			Request: []byte(`POST /tools/write_note` + "\n" + `{"path":"secrets/key"}`), RequestDigest: "digest-" + rand.Text(), Info: info.Encode(),
		}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		page := e.do(http.MethodGet, e.pageURL(c), nil, "")
		if offered := strings.Contains(page.body, `value="subject+tool"`); offered == mustAsk {
			t.Errorf("must_ask %v: the page offers a grant: %v", mustAsk, offered)
		}
		res := e.do(http.MethodPost, "/api/approvals/"+c.ID, bearer(aliceKey),
			`{"decision":"approve","remember":{"scope":"subject+tool","lifetime":"8h"}}`)
		switch {
		case mustAsk && (res.status != http.StatusBadRequest || !strings.Contains(res.body, "must_ask")):
			t.Errorf("must_ask: POST = %d, want 400 naming must_ask\n%s", res.status, res.body)
		case mustAsk && e.state(c.ID) != pending.Waiting:
			t.Errorf("must_ask: state = %s, want waiting", e.state(c.ID))
		case !mustAsk && (res.status != http.StatusOK || !strings.Contains(res.body, `"grant_id"`)):
			t.Errorf("without must_ask: POST = %d, want 200 and a grant\n%s", res.status, res.body)
		}
	}
}
