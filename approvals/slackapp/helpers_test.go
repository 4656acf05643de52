package slackapp

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/notify"
)

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

// decision is one call of the test Decider.
type decision struct {
	callID, approver string
	approve          bool
}

// env is a Handler behind a real server, a recording response_url server
// and a Decider that records its calls.
type env struct {
	h      *Handler
	srv    *httptest.Server
	slack  *testkit.Upstream // the response_url server
	logs   *testkit.Buffer
	clock  *testkit.Clock
	mu     sync.Mutex
	calls  []decision
	answer func(decision) (Outcome, error)
}

// newEnv starts an env whose Decider answers with answer, or approves
// singly if answer is nil. edit, if set, changes the Config before New.
func newEnv(t *testing.T, answer func(decision) (Outcome, error), edit func(*Config)) *env {
	t.Helper()
	e := &env{
		slack:  testkit.NewUpstream(t, nil),
		logs:   &testkit.Buffer{},
		clock:  testkit.NewClock(time.Now()),
		answer: answer,
	}
	if e.answer == nil {
		e.answer = func(d decision) (Outcome, error) {
			state := "approved"
			if !d.approve {
				state = "rejected"
			}
			return Outcome{
				CallID: d.callID, Tool: "write_note", Upstream: "notes", Subject: "agent-42",
				State: state, DecidedBy: d.approver, Approvals: 1,
			}, nil
		}
	}
	cfg := Config{
		SigningSecret: secret,
		Users:         map[string]string{"U0ALICE": "alice@example.com", "U0BOB": "bob@example.com"},
		Decide: func(_ context.Context, callID, approver string, approve bool) (Outcome, error) {
			d := decision{callID, approver, approve}
			e.mu.Lock()
			defer e.mu.Unlock()
			e.calls = append(e.calls, d)
			return e.answer(d)
		},
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:    e.clock.Now,
		AllowResponseURL: func(u *url.URL) bool {
			return u.Scheme == "http" && u.Host == strings.TrimPrefix(e.slack.URL, "http://")
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.h = h
	e.srv = httptest.NewServer(h)
	t.Cleanup(func() {
		e.srv.Close()
		e.close(t)
	})
	return e
}

// close waits for the handler's response_url posts, so a test can then
// assert on what was, and was not, posted.
func (e *env) close(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.h.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func (e *env) decisions() []decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]decision(nil), e.calls...)
}

// posted returns the bodies the response_url server received, decoded.
func (e *env) posted(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range e.slack.Requests() {
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("response_url body: %v\n%s", err, r.Body)
		}
		out = append(out, m)
	}
	return out
}

// waitPosted waits for n posts to the response_url server and returns them.
func (e *env) waitPosted(t *testing.T, n int) []map[string]any {
	t.Helper()
	testkit.WaitFor(t, "response_url posts", func() bool { return len(e.slack.Requests()) >= n })
	return e.posted(t)
}

// sign computes Slack's v0 signature over the timestamp and body.
func sign(key string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte("v0:" + strconv.FormatInt(ts, 10) + ":"))
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// request is an interaction request as Slack would send it.
type request struct {
	body []byte
	ts   int64
	sig  string // "": signed correctly with secret
}

// signed returns body as a request signed now with secret.
func signed(body []byte) request {
	return request{body: body, ts: time.Now().Unix()}
}

// send posts req to the handler and returns the status and body.
func (e *env) send(t *testing.T, req request) (int, string) {
	t.Helper()
	if req.sig == "" {
		req.sig = sign(secret, req.ts, req.body)
	}
	r, err := http.NewRequest(http.MethodPost, e.srv.URL+Path, bytes.NewReader(req.body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(req.ts, 10))
	r.Header.Set("X-Slack-Signature", req.sig)
	res, err := e.srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return res.StatusCode, b.String()
}

// form wraps a payload as Slack sends it: a form with one field.
func form(payload any) []byte {
	p, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	return []byte(url.Values{"payload": {string(p)}}.Encode())
}

// click is a block_actions payload: user clicked actionID (value) on
// message, whose answers go to responseURL.
func click(user, actionID, value, responseURL string, message json.RawMessage) map[string]any {
	p := map[string]any{
		"type":         "block_actions",
		"user":         map[string]any{"id": user, "username": "someone", "team_id": "T0TEAM"},
		"api_app_id":   "A0APP",
		"team":         map[string]any{"id": "T0TEAM", "domain": "example"},
		"container":    map[string]any{"type": "message", "message_ts": "1700000000.000100", "channel_id": "C0CHAN"},
		"channel":      map[string]any{"id": "C0CHAN", "name": "approvals"},
		"trigger_id":   "1.2.3",
		"response_url": responseURL,
		"actions": []any{map[string]any{
			"action_id": actionID, "block_id": notify.SlackActionsBlockID, "type": "button",
			"text": map[string]any{"type": "plain_text", "text": "Approve"}, "value": value,
			"action_ts": "1700000001.000200",
		}},
	}
	if message != nil {
		p["message"] = message
	}
	return p
}

// requestedMessage is the Slack message notify sends for call id with
// interactive buttons, as a channel would show it (Slack adds type and ts).
func requestedMessage(t *testing.T, id string) json.RawMessage {
	t.Helper()
	rc := testkit.NewUpstream(t, nil)
	n, err := notify.New(notify.Options{
		Targets:          []notify.Target{{URL: rc.URL, Format: notify.FormatSlack}},
		SlackInteractive: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Notify(notify.Event{
		Type: notify.TypeRequested, CallID: id, Tool: "write_note", Upstream: "notes", Subject: "agent-42",
		Arguments:   json.RawMessage(`{"path":"notes/today.txt"}`),
		Reasons:     []string{"writing notes needs a human"},
		ApprovalURL: "https://approvals.example/approvals/" + id + "?token=tok",
		ExpiresAt:   time.Now().Add(15 * time.Minute),
	})
	testkit.WaitFor(t, "the notification", func() bool { return len(rc.Requests()) == 1 })
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(rc.Requests()[0].Body, &m); err != nil {
		t.Fatal(err)
	}
	m["type"], m["ts"] = "message", "1700000000.000100"
	// Slack gives every block without an ID one of its own.
	for i, b := range m["blocks"].([]any) {
		b := b.(map[string]any)
		if _, ok := b["block_id"]; !ok {
			b["block_id"] = "sl" + strconv.Itoa(i)
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// blocks returns a posted message's blocks.
func blocks(t *testing.T, m map[string]any) []map[string]any {
	t.Helper()
	raw, _ := m["blocks"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, b := range raw {
		out = append(out, b.(map[string]any))
	}
	return out
}

// blockTypes lists the types of blocks, with the block ID where there is one.
func blockTypes(bs []map[string]any) []string {
	var out []string
	for _, b := range bs {
		s := b["type"].(string)
		if id, _ := b["block_id"].(string); strings.HasPrefix(id, "toolgate_") {
			s += ":" + id
		}
		out = append(out, s)
	}
	return out
}

// statusText is the text of the status block of a posted message.
func statusText(t *testing.T, m map[string]any) string {
	t.Helper()
	for _, b := range blocks(t, m) {
		if b["block_id"] == statusBlockID {
			return b["text"].(map[string]any)["text"].(string)
		}
	}
	t.Fatalf("no status block in %v", m)
	return ""
}
