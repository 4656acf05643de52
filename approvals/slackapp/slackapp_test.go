package slackapp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/notify"
)

func TestApproveUpdatesMessage(t *testing.T) {
	e := newEnv(t, nil, nil)
	msg := requestedMessage(t, "c1")
	status, body := e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/actions/T0/1/x", msg))))
	if status != http.StatusOK || body != "" {
		t.Fatalf("answer %d %q, want 200 and no body", status, body)
	}
	if diff := cmp.Diff([]decision{{"c1", "alice@example.com", true}}, e.decisions(), cmp.AllowUnexported(decision{})); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}

	posts := e.waitPosted(t, 1)
	if r := e.slack.Requests()[0]; r.Path != "/actions/T0/1/x" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("posted to %s as %q, want /actions/T0/1/x as application/json", r.Path, r.Header.Get("Content-Type"))
	}
	m := posts[0]
	if m["replace_original"] != true || m["response_type"] != nil {
		t.Errorf("replace_original %v, response_type %v; want true and none", m["replace_original"], m["response_type"])
	}
	// The summary stays as sent; the buttons give way to the outcome.
	want := []string{"header", "section", "section", "section", "context", "section:" + statusBlockID}
	if diff := cmp.Diff(want, blockTypes(blocks(t, m))); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	if got := statusText(t, m); got != "✅ Approved by alice@example.com" {
		t.Errorf("status = %q", got)
	}
	all := string(e.slack.Requests()[0].Body)
	for _, keep := range []string{"Approval needed: write_note", `*Caller*\nagent-42`, "writing notes needs a human", "Call ID c1"} {
		if !strings.Contains(all, keep) {
			t.Errorf("updated message lost %q:\n%s", keep, all)
		}
	}
	if !strings.Contains(m["text"].(string), "Approved by alice@example.com") {
		t.Errorf("fallback text %q does not say who approved", m["text"])
	}
}

func TestRejectUpdatesMessage(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.send(t, signed(form(click("U0BOB", notify.SlackRejectActionID, "c1", e.slack.URL+"/r", requestedMessage(t, "c1")))))
	if diff := cmp.Diff([]decision{{"c1", "bob@example.com", false}}, e.decisions(), cmp.AllowUnexported(decision{})); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	m := e.waitPosted(t, 1)[0]
	if got := statusText(t, m); got != "❌ Rejected by bob@example.com" {
		t.Errorf("status = %q", got)
	}
	for _, b := range blocks(t, m) {
		if b["type"] == "actions" {
			t.Errorf("a rejected call's message still has buttons: %v", b)
		}
	}
}

// TestPartialQuorumKeepsButtons: while more approvals are needed the
// buttons stay for the others, and each update replaces the status line.
func TestPartialQuorumKeepsButtons(t *testing.T) {
	approvals := 0
	e := newEnv(t, func(d decision) (Outcome, error) {
		approvals++
		o := Outcome{CallID: d.callID, Tool: "write_note", State: "waiting", Approvals: approvals, Needed: 2}
		if approvals == 2 {
			o.State, o.DecidedBy = "approved", d.approver
		}
		return o, nil
	}, nil)
	e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", requestedMessage(t, "c1")))))
	first := e.waitPosted(t, 1)[0]
	if got, want := statusText(t, first), "☑️ Approved by alice@example.com (1 of 2); waiting for more approvers"; got != want {
		t.Errorf("status = %q, want %q", got, want)
	}
	want := []string{"header", "section", "section", "section", "context", "section:" + statusBlockID, "actions:" + notify.SlackActionsBlockID}
	if diff := cmp.Diff(want, blockTypes(blocks(t, first))); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	actions := blocks(t, first)[6]["elements"].([]any)
	if len(actions) != 3 || actions[2].(map[string]any)["url"] == nil {
		t.Errorf("buttons %v: want Approve, Reject and the page link as sent", actions)
	}

	// Bob clicks on the message as it now stands.
	var msg map[string]any
	if err := json.Unmarshal(e.slack.Requests()[0].Body, &msg); err != nil {
		t.Fatal(err)
	}
	msg["type"] = "message"
	now, _ := json.Marshal(msg)
	e.send(t, signed(form(click("U0BOB", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", now))))
	last := e.waitPosted(t, 2)[1]
	want = []string{"header", "section", "section", "section", "context", "section:" + statusBlockID}
	if diff := cmp.Diff(want, blockTypes(blocks(t, last))); diff != "" {
		t.Errorf("blocks after the second approval (-want +got):\n%s", diff)
	}
	if got, want := statusText(t, last), "✅ Approved by bob@example.com (2 of 2)"; got != want {
		t.Errorf("status = %q, want %q", got, want)
	}
}

// TestMessageWithoutBlocks: a payload that does not carry the message
// still gets a summary and the outcome.
func TestMessageWithoutBlocks(t *testing.T) {
	e := newEnv(t, func(d decision) (Outcome, error) {
		return Outcome{CallID: d.callID, Tool: "x <!channel>", Upstream: "notes", Subject: "agent-42", State: "approved", DecidedBy: d.approver}, nil
	}, nil)
	e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil))))
	m := e.waitPosted(t, 1)[0]
	tool := blocks(t, m)[0]["fields"].([]any)[0].(map[string]any)["text"]
	if tool != "*Tool*\nx &lt;!channel&gt;" {
		t.Errorf("tool field %q, want the tool escaped", tool)
	}
	if got := statusText(t, m); got != "✅ Approved by alice@example.com" {
		t.Errorf("status = %q", got)
	}
}

func TestForgedSignatureRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	good := form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil))
	now := time.Now().Unix()
	for name, req := range map[string]request{
		"wrong secret":       {body: good, ts: now, sig: sign("not-the-secret", now, good)},
		"body changed":       {body: []byte(strings.Replace(string(good), "U0ALICE", "U0BOB", 1)), ts: now, sig: sign(secret, now, good)},
		"timestamp changed":  {body: good, ts: now - 1, sig: sign(secret, now, good)},
		"no v0 prefix":       {body: good, ts: now, sig: strings.TrimPrefix(sign(secret, now, good), "v0=")},
		"short signature":    {body: good, ts: now, sig: sign(secret, now, good)[:40]},
		"signature not hex":  {body: good, ts: now, sig: "v0=" + strings.Repeat("zz", 32)},
		"signature is blank": {body: good, ts: now, sig: " "},
	} {
		t.Run(name, func(t *testing.T) {
			if status, _ := e.send(t, req); status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", status)
			}
		})
	}
	e.close(t)
	if d := e.decisions(); len(d) != 0 {
		t.Errorf("Decider called for forged requests: %v", d)
	}
	if p := e.slack.Requests(); len(p) != 0 {
		t.Errorf("%d response_url posts for forged requests", len(p))
	}
}

func TestMissingHeadersRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, drop := range []string{"X-Slack-Request-Timestamp", "X-Slack-Signature"} {
		r, _ := http.NewRequest(http.MethodPost, e.srv.URL+Path, strings.NewReader("payload=%7B%7D"))
		r.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(time.Now().Unix(), 10))
		r.Header.Set("X-Slack-Signature", sign(secret, time.Now().Unix(), []byte("payload=%7B%7D")))
		r.Header.Del(drop)
		res, err := e.srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("without %s: status %d, want 401", drop, res.StatusCode)
		}
	}
}

func TestStaleTimestampRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	body := form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil))
	now := time.Now()
	for name, ts := range map[string]time.Time{
		"six minutes old":      now.Add(-6 * time.Minute),
		"six minutes ahead":    now.Add(6 * time.Minute),
		"a day old":            now.Add(-24 * time.Hour),
		"the epoch":            time.Unix(0, 0),
		"far in the future":    now.Add(1000 * time.Hour),
		"just outside, behind": now.Add(-Window - time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			if status, _ := e.send(t, request{body: body, ts: ts.Unix()}); status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", status)
			}
		})
	}
	e.close(t)
	if d := e.decisions(); len(d) != 0 {
		t.Errorf("Decider called for stale requests: %v", d)
	}
}

// TestStaleByOwnClock: the window is measured on the configured clock,
// not only on the machine's (which slack-go uses): a request signed now
// is stale for a handler whose clock is six minutes on.
func TestStaleByOwnClock(t *testing.T) {
	e := newEnv(t, nil, nil)
	body := form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil))

	e.clock.Advance(4 * time.Minute)
	if status, _ := e.send(t, signed(body)); status != http.StatusOK {
		t.Fatalf("four minutes on: status %d, want 200", status)
	}
	e.clock.Advance(2 * time.Minute)
	if status, _ := e.send(t, signed(append(body, '&', 'x', '=', '1'))); status != http.StatusUnauthorized {
		t.Errorf("six minutes on: status %d, want 401", status)
	}
	if d := e.decisions(); len(d) != 1 {
		t.Errorf("%d decisions, want 1 (the request inside the window)", len(d))
	}
}

func TestReplayRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	req := signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil)))
	req.sig = sign(secret, req.ts, req.body)
	if status, _ := e.send(t, req); status != http.StatusOK {
		t.Fatalf("first delivery: status %d, want 200", status)
	}
	if status, _ := e.send(t, req); status != http.StatusUnauthorized {
		t.Errorf("second delivery: status %d, want 401", status)
	}
	// The same signature in capitals verifies too; it is the same request.
	req.sig = "v0=" + strings.ToUpper(strings.TrimPrefix(req.sig, "v0="))
	if status, _ := e.send(t, req); status != http.StatusUnauthorized {
		t.Errorf("delivery with the signature in capitals: status %d, want 401", status)
	}
	e.close(t)
	if d := e.decisions(); len(d) != 1 {
		t.Errorf("%d decisions, want 1", len(d))
	}
	if p := e.slack.Requests(); len(p) != 1 {
		t.Errorf("%d response_url posts, want 1", len(p))
	}
}

// TestReplaySetFull: when the set of seen signatures is full of live ones,
// new requests are refused, not remembered in more memory.
func TestReplaySetFull(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.h.seen = newSeenSet(2)
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusServiceUnavailable} {
		body := form(click("U0ALICE", notify.SlackOpenActionID, strconv.Itoa(i), e.slack.URL+"/r", nil))
		if status, _ := e.send(t, signed(body)); status != want {
			t.Errorf("request %d: status %d, want %d", i, status, want)
		}
	}
}

func TestSeenSetForgetsStale(t *testing.T) {
	s := newSeenSet(2)
	t0 := time.Unix(1_700_000_000, 0)
	if err := s.add("a", t0.Add(Window), t0); err != nil {
		t.Fatal(err)
	}
	if err := s.add("a", t0.Add(Window), t0.Add(time.Minute)); !errors.Is(err, errReplay) {
		t.Errorf("a again: %v, want errReplay", err)
	}
	if err := s.add("b", t0.Add(time.Minute+Window), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.add("c", t0.Add(2*time.Minute+Window), t0.Add(2*time.Minute)); !errors.Is(err, errFull) {
		t.Errorf("c while full: %v, want errFull", err)
	}
	// Once a's window has passed, its place is free.
	later := t0.Add(Window + 30*time.Second)
	if err := s.add("c", later.Add(Window), later); err != nil {
		t.Errorf("c after a expired: %v", err)
	}
	if len(s.expiry) != 2 {
		t.Errorf("%d entries, want 2", len(s.expiry))
	}
}

func TestUnknownUserToldEphemerally(t *testing.T) {
	e := newEnv(t, nil, nil)
	status, _ := e.send(t, signed(form(click("U0MALLORY", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", requestedMessage(t, "c1")))))
	if status != http.StatusOK {
		t.Errorf("status %d, want 200", status)
	}
	m := e.waitPosted(t, 1)[0]
	e.close(t)
	if d := e.decisions(); len(d) != 0 {
		t.Errorf("Decider called for an unknown user: %v", d)
	}
	if m["response_type"] != "ephemeral" || m["replace_original"] != false {
		t.Errorf("response_type %v, replace_original %v; want ephemeral and false", m["response_type"], m["replace_original"])
	}
	if text, _ := m["text"].(string); !strings.Contains(text, "not a toolgate approver") {
		t.Errorf("text %q does not say why", text)
	}
	if _, ok := m["blocks"]; ok {
		t.Errorf("ephemeral answer has blocks: %v", m["blocks"])
	}
}

func TestDeciderErrorToldEphemerally(t *testing.T) {
	e := newEnv(t, func(decision) (Outcome, error) {
		return Outcome{}, errors.New("you cannot approve your own call <@U0ALICE>")
	}, nil)
	e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", requestedMessage(t, "c1")))))
	m := e.waitPosted(t, 1)[0]
	if m["response_type"] != "ephemeral" || m["replace_original"] != false {
		t.Errorf("response_type %v, replace_original %v; want ephemeral and false", m["response_type"], m["replace_original"])
	}
	text, _ := m["text"].(string)
	if !strings.Contains(text, "you cannot approve your own call &lt;@U0ALICE&gt;") {
		t.Errorf("text %q: want the Decider's error, escaped", text)
	}
	e.close(t)
	if n := len(e.slack.Requests()); n != 1 {
		t.Errorf("%d response_url posts, want only the ephemeral one", n)
	}
}

func TestOtherPayloadsIgnored(t *testing.T) {
	e := newEnv(t, nil, nil)
	resp := e.slack.URL + "/r"
	otherApp := click("U0ALICE", "someone_elses_button", "c1", resp, nil)
	noValue := click("U0ALICE", notify.SlackApproveActionID, "", resp, nil)
	for name, body := range map[string][]byte{
		"page link":       form(click("U0ALICE", notify.SlackOpenActionID, "", resp, nil)),
		"other action":    form(otherApp),
		"no value":        form(noValue),
		"view submission": form(map[string]any{"type": "view_submission", "user": map[string]any{"id": "U0ALICE"}}),
		"shortcut":        form(map[string]any{"type": "shortcut", "callback_id": "toolgate_approve", "user": map[string]any{"id": "U0ALICE"}}),
		"interactive_message": form(map[string]any{
			"type": "interactive_message", "user": map[string]any{"id": "U0ALICE"},
			"actions": []any{map[string]any{"name": "toolgate_approve", "value": "c1", "type": "button"}}, "response_url": resp,
		}),
	} {
		t.Run(name, func(t *testing.T) {
			if status, b := e.send(t, signed(body)); status != http.StatusOK || b != "" {
				t.Errorf("answer %d %q, want 200 and no body", status, b)
			}
		})
	}
	e.close(t)
	if d := e.decisions(); len(d) != 0 {
		t.Errorf("Decider called: %v", d)
	}
	if n := len(e.slack.Requests()); n != 0 {
		t.Errorf("%d response_url posts, want none", n)
	}
	if !strings.Contains(e.logs.String(), "slack interaction ignored") {
		t.Errorf("ignored interactions not logged at debug:\n%s", e.logs.String())
	}
}

func TestUnreadablePayload(t *testing.T) {
	e := newEnv(t, nil, nil)
	for name, body := range map[string]string{
		"no payload field": "other=1",
		"payload not JSON": "payload=%7Bnot",
		"bad form":         "payload=%zz",
	} {
		t.Run(name, func(t *testing.T) {
			if status, _ := e.send(t, signed([]byte(body))); status != http.StatusBadRequest {
				t.Errorf("status %d, want 400", status)
			}
		})
	}
}

func TestBodyTooLargeRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	p := click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil)
	p["padding"] = strings.Repeat("x", MaxBodyBytes)
	body := form(p)
	if status, _ := e.send(t, signed(body)); status != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", status)
	}

	// Without a Content-Length the reader's bound refuses it too.
	req := signed(body)
	r, _ := http.NewRequest(http.MethodPost, e.srv.URL+Path, struct{ *strings.Reader }{strings.NewReader(string(body))})
	r.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(req.ts, 10))
	r.Header.Set("X-Slack-Signature", sign(secret, req.ts, body))
	res, err := e.srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: status %d, want 413", res.StatusCode)
	}
	e.close(t)
	if d := e.decisions(); len(d) != 0 {
		t.Errorf("Decider called: %v", d)
	}
}

// TestDeclaredTooLargeRefusedUnread: a body declared too large is refused
// before a byte of it is waited for.
func TestDeclaredTooLargeRefusedUnread(t *testing.T) {
	e := newEnv(t, nil, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ts := time.Now().Unix()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"+
		"X-Slack-Request-Timestamp: %d\r\nX-Slack-Signature: %s\r\n\r\npayload=",
		Path, MaxBodyBytes+1, ts, sign(secret, ts, nil))
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body is still coming: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", res.StatusCode)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, nil, nil)
	res, err := e.srv.Client().Get(e.srv.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d, Allow %q; want 405 and POST", res.StatusCode, res.Header.Get("Allow"))
	}
}

// TestResponseURLNotAllowed: a response_url off Slack's hosts is never
// posted to, and the click decides nothing.
func TestResponseURLNotAllowed(t *testing.T) {
	e := newEnv(t, nil, func(c *Config) { c.AllowResponseURL = nil }) // the default: Slack only
	status, _ := e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil))))
	if status != http.StatusBadRequest {
		t.Errorf("status %d, want 400", status)
	}
	e.close(t)
	if d := e.decisions(); len(d) != 0 {
		t.Errorf("Decider called: %v", d)
	}
	if n := len(e.slack.Requests()); n != 0 {
		t.Errorf("%d posts to a host that is not Slack's", n)
	}
}

func TestSlackResponseURL(t *testing.T) {
	for raw, want := range map[string]bool{
		"https://hooks.slack.com/actions/T0/1/x":     true,
		"https://HOOKS.SLACK.COM/actions/T0/1/x":     true,
		"https://slack.com/x":                        true,
		"https://hooks.slack.com:443/actions/T0/1/x": true,
		"http://hooks.slack.com/actions/T0/1/x":      false,
		"https://hooks.slack.com:8443/x":             false,
		"https://evilslack.com/x":                    false,
		"https://hooks.slack.com.evil.example/x":     false,
		"https://user:pw@hooks.slack.com/x":          false,
		"https://127.0.0.1/x":                        false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := SlackResponseURL(u); got != want {
			t.Errorf("SlackResponseURL(%s) = %v, want %v", raw, got, want)
		}
	}
}

// TestResponseURLNotLogged: response_url is a credential to post into the
// channel; no log line holds it, even when posting to it fails.
func TestResponseURLNotLogged(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.slack.Close() // every post fails
	e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/actions/SECRETPATH", nil))))
	e.close(t)
	logs := e.logs.String()
	if !strings.Contains(logs, "slack answer not delivered") {
		t.Errorf("failed post not logged:\n%s", logs)
	}
	if strings.Contains(logs, "SECRETPATH") {
		t.Errorf("logs hold the response_url:\n%s", logs)
	}
}

// TestInFlightBounded: posts to a stuck response_url are bounded; past the
// bound answers are dropped and logged, and Close gives up when told to.
func TestInFlightBounded(t *testing.T) {
	release := make(chan struct{})
	stuck := testkit.NewUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	e := newEnv(t, nil, func(c *Config) {
		c.AllowResponseURL = func(*url.URL) bool { return true }
	})
	for i := range MaxInFlight + 2 {
		id := "c" + strconv.Itoa(i)
		if status, _ := e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, id, stuck.URL+"/r", nil)))); status != http.StatusOK {
			t.Fatalf("click %d: status %d", i, status)
		}
	}
	testkit.WaitFor(t, "the posts in flight", func() bool { return len(stuck.Requests()) == MaxInFlight })
	if n := strings.Count(e.logs.String(), "too many in flight"); n != 2 {
		t.Errorf("%d answers dropped, want 2", n)
	}
	if d := e.decisions(); len(d) != MaxInFlight+2 {
		t.Errorf("%d decisions, want %d: a dropped answer does not undo the decision", len(d), MaxInFlight+2)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.h.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v after its context ended", took)
	}
	if len(stuck.Requests()) != MaxInFlight {
		t.Errorf("%d posts, want %d", len(stuck.Requests()), MaxInFlight)
	}
}

func TestCloseWaitsForPosts(t *testing.T) {
	slow := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		time.Sleep(200 * time.Millisecond)
	})
	e := newEnv(t, nil, func(c *Config) { c.AllowResponseURL = func(*url.URL) bool { return true } })
	e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", slow.URL+"/r", nil))))
	e.close(t)
	if strings.Count(e.logs.String(), "slack answer delivered") != 1 {
		t.Errorf("Close returned before the post finished:\n%s", e.logs.String())
	}
	// After Close nothing more is posted.
	e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c2", slow.URL+"/r", nil))))
	if !strings.Contains(e.logs.String(), "shutting down") {
		t.Errorf("answer after Close not dropped:\n%s", e.logs.String())
	}
}

func TestNewValidates(t *testing.T) {
	decide := func(context.Context, string, string, bool) (Outcome, error) { return Outcome{}, nil }
	users := map[string]string{"U1": "alice"}
	for name, cfg := range map[string]Config{
		"no secret":      {Users: users, Decide: decide},
		"no users":       {SigningSecret: "s", Decide: decide},
		"no decider":     {SigningSecret: "s", Users: users},
		"empty user ID":  {SigningSecret: "s", Users: map[string]string{"": "alice"}, Decide: decide},
		"empty approver": {SigningSecret: "s", Users: map[string]string{"U1": ""}, Decide: decide},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	h, err := New(Config{SigningSecret: "s", Users: users, Decide: decide})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	users["U2"] = "mallory"
	if _, ok := h.users["U2"]; ok {
		t.Error("New did not copy Users")
	}
	_ = h.Close(context.Background())
}
