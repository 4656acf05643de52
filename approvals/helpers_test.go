package approvals_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

const (
	testSecret = "0123456789abcdef0123456789abcdef-test-secret"
	aliceKey   = "alice-approver-key-0123456789"
	bobKey     = "bob-approver-key-0123456789"
	publicURL  = "https://toolgate.example.com"
)

// t0 is the test clock's start; the store and the handler share the clock.
var t0 = time.Date(2026, 11, 29, 21, 15, 2, 0, time.UTC)

// env is a handler on a real memory store, served by httptest.
type env struct {
	t      *testing.T
	store  *pending.MemoryStore
	signer *approvals.Signer
	clock  *testkit.Clock
	logs   *testkit.Buffer // the handler's JSON log
	h      *approvals.Handler
	srv    *httptest.Server

	mu        sync.Mutex
	decisions []pending.Call // what OnDecision saw
}

// newEnv starts a handler; edit may change the config before New.
func newEnv(t *testing.T, edit ...func(*approvals.Config)) *env {
	t.Helper()
	e := &env{t: t, clock: testkit.NewClock(t0), logs: &testkit.Buffer{}}
	e.store = pending.NewMemory(pending.Options{Now: e.clock.Now})
	signer, err := approvals.NewSigner([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	e.signer = signer
	cfg := approvals.Config{
		Store:     e.store,
		Signer:    signer,
		Approvers: []approvals.Approver{{Name: "alice", Key: aliceKey}, {Name: "bob", Key: bobKey}},
		PublicURL: publicURL,
		Logger:    slog.New(slog.NewJSONHandler(e.logs, nil)),
		Now:       e.clock.Now,
		OnDecision: func(c pending.Call) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.decisions = append(e.decisions, c)
		},
	}
	for _, f := range edit {
		f(&cfg)
	}
	h, err := approvals.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// logRecords returns the handler's log records whose msg is msg.
func (e *env) logRecords(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, rec := range e.logs.JSONLines(t) {
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func (e *env) onDecisionCalls() []pending.Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]pending.Call(nil), e.decisions...)
}

// park parks a call of subject to tool with JSON arguments args.
func (e *env) park(subject, tool, args string) pending.Call {
	e.t.Helper()
	return e.parkOf(subject, "", tool, args)
}

// parkOf is park with the call's principal.
func (e *env) parkOf(subject, principal, tool, args string) pending.Call {
	e.t.Helper()
	// Without HTML escaping, so the stored arguments are byte-exact
	// (json.Marshal would turn "<" into "\u003c").
	var infoBuf bytes.Buffer
	enc := json.NewEncoder(&infoBuf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(callinfo.Info{
		Kind: "rest", Tool: tool, Upstream: "notes", Subject: subject, Target: "notes/today.txt",
		Arguments: json.RawMessage(args), Reasons: []string{"writes under notes/ need approval"},
		RuleIDs: []string{"r3"}, Method: "POST", Path: "/tools/" + tool,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	info := bytes.TrimSpace(infoBuf.Bytes())
	request := []byte("POST /tools/" + tool + "\n" + args)
	sum := sha256.Sum256(request)
	c, _, err := e.store.Park(context.Background(), pending.Call{
		ID: rand.Text(), Subject: subject, Principal: principal, Upstream: "notes", Tool: tool,
		Request: request, RequestDigest: hex.EncodeToString(sum[:]), Info: info,
	}, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// state is the call's state in the store.
func (e *env) state(id string) pending.State {
	e.t.Helper()
	c, err := e.store.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c.State
}

// pageURL is the call's approval link on the test server.
func (e *env) pageURL(c pending.Call) string {
	return e.signer.ApprovalURL(e.srv.URL, c)
}

type response struct {
	status int
	header http.Header
	body   string
}

// do sends a request to the test server.
func (e *env) do(method, path string, header http.Header, body string) response {
	e.t.Helper()
	target := path
	if !strings.HasPrefix(path, "http") {
		target = e.srv.URL + path
	}
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	maps.Copy(req.Header, header)
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: string(b)}
}

// postForm posts form fields to the call's page.
func (e *env) postForm(id string, form url.Values) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/approvals/"+id,
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, form.Encode())
}

// decideForm posts the page's form: token, decision and comment.
func (e *env) decideForm(c pending.Call, decision, comment string) response {
	e.t.Helper()
	return e.postForm(c.ID, url.Values{"token": {e.signer.Token(c)}, "decision": {decision}, "comment": {comment}})
}

// api sends an API request with an approver key ("" for none).
func (e *env) api(method, path, key, body string) response {
	e.t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return e.do(method, path, h, body)
}

// failingStore is the memory store with some methods failing as an
// unreachable Redis would.
type failingStore struct {
	pending.Store
	failGet, failDecide, failList bool
}

var errOutage = io.ErrUnexpectedEOF // what a dropped Redis connection looks like

func (s failingStore) Get(ctx context.Context, id string) (pending.Call, error) {
	if s.failGet {
		return pending.Call{}, errOutage
	}
	return s.Store.Get(ctx, id)
}

func (s failingStore) Decide(ctx context.Context, id string, d pending.Decision) (pending.Call, error) {
	if s.failDecide {
		return pending.Call{}, errOutage
	}
	return s.Store.Decide(ctx, id, d)
}

func (s failingStore) List(ctx context.Context, st pending.State, limit int) ([]pending.Call, error) {
	if s.failList {
		return nil, errOutage
	}
	return s.Store.List(ctx, st, limit)
}
