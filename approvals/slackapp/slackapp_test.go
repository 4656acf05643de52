package slackapp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	want := []string{"header", "section", "rich_text", "section", "context", "section:" + statusBlockID}
	if diff := cmp.Diff(want, blockTypes(blocks(t, m))); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	if got := statusText(t, m); got != "✅ Approved by alice@example.com" {
		t.Errorf("status = %q", got)
	}
	all := string(e.slack.Requests()[0].Body)
	// The reasons stay rich text, their list and styles as sent.
	for _, keep := range []string{"Approval needed: write_note", `*Caller*\nagent-42`, `"rich_text_list"`, `"style":"bullet"`, `{"type":"text","text":"writing notes needs a human"}`, `"bold":true`, "Call ID c1"} {
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
	want := []string{"header", "section", "rich_text", "section", "context", "section:" + statusBlockID, "actions:" + notify.SlackActionsBlockID}
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
	want = []string{"header", "section", "rich_text", "section", "context", "section:" + statusBlockID}
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
	if tool != "*Tool*\n`x &lt;!channel&gt;`" {
		t.Errorf("tool field %q, want the tool escaped, as code", tool)
	}
	if got := statusText(t, m); got != "✅ Approved by alice@example.com" {
		t.Errorf("status = %q", got)
	}
}

// TestRebuiltMessageOffersNoApprove: a partial approval of a call whose
// message Slack did not send back rebuilds it from a summary, which shows
// neither the target nor the arguments: it keeps Reject, not Approve.
func TestRebuiltMessageOffersNoApprove(t *testing.T) {
	e := newEnv(t, func(d decision) (Outcome, error) {
		return Outcome{CallID: d.callID, Tool: "write_note", State: "waiting", Approvals: 1, Needed: 2}, nil
	}, nil)
	e.send(t, signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil))))
	m := e.waitPosted(t, 1)[0]
	var ids []string
	for _, b := range blocks(t, m) {
		for _, el := range asSlice(b["elements"]) {
			if id, ok := el.(map[string]any)["action_id"].(string); ok {
				ids = append(ids, id)
			}
		}
	}
	if !slices.Equal(ids, []string{notify.SlackRejectActionID}) {
		t.Errorf("buttons %v, want Reject alone", ids)
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
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
