package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCloudEventsRequested(t *testing.T) {
	e := requested("c1")
	req := deliverOne(t, "", "", e) // "" is the default format

	if got, want := req.Header.Get("Content-Type"), "application/cloudevents+json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	want := map[string]any{
		"specversion":     "1.0",
		"type":            "dev.toolgate.approval.requested",
		"source":          "toolgate",
		"id":              "c1",
		"time":            "2026-11-29T21:15:02Z",
		"datacontenttype": "application/json",
		"subject":         "c1",
		"data": map[string]any{
			"call_id":      "c1",
			"tool":         "write_note",
			"upstream":     "notes",
			"subject":      "agent-42",
			"method":       "POST",
			"path":         "/tools/write_note",
			"target":       "notes/today.txt",
			"arguments":    map[string]any{"path": "notes/today.txt", "content": "hello"},
			"reasons":      []any{"writing notes needs a human"},
			"rule_ids":     []any{"notes.write"},
			"approval_url": e.ApprovalURL,
			"status_url":   e.StatusURL,
			"expires_at":   "2026-11-29T21:30:00Z",
		},
	}
	if diff := cmp.Diff(want, decode(t, req.Body)); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
}

func TestCloudEventsResolved(t *testing.T) {
	req := deliverOne(t, FormatCloudEvents, "", resolved("c1", "approved", "alice"))
	got := decode(t, req.Body)
	if got["id"] != "c1.resolved" || got["type"] != TypeResolved || got["subject"] != "c1" {
		t.Errorf("id, type, subject = %v, %v, %v; want c1.resolved, %s, c1", got["id"], got["type"], got["subject"], TypeResolved)
	}
	data := got["data"].(map[string]any)
	for k, want := range map[string]any{"outcome": "approved", "decided_by": "alice", "comment": "looks fine", "call_id": "c1"} {
		if data[k] != want {
			t.Errorf("data.%s = %v, want %v", k, data[k], want)
		}
	}
	if _, ok := data["approval_url"]; ok {
		t.Errorf("resolved event has approval_url %v; the link decides nothing any more", data["approval_url"])
	}
	if _, ok := data["approvals"]; ok {
		t.Errorf("a call one approval decided has approvals %v", data["approvals"])
	}

	// A call that took two approvers names both.
	e := resolved("c1", "approved", "bob")
	e.Approvals = []Approval{{By: "alice", At: testTime, Comment: "first"}, {By: "bob", At: testTime.Add(time.Second)}}
	data = decode(t, deliverOne(t, FormatCloudEvents, "", e).Body)["data"].(map[string]any)
	want := []any{
		map[string]any{"by": "alice", "at": "2026-11-29T21:15:02Z", "comment": "first"},
		map[string]any{"by": "bob", "at": "2026-11-29T21:15:03Z", "comment": ""},
	}
	if diff := cmp.Diff(want, data["approvals"]); diff != "" {
		t.Errorf("approvals (-want +got):\n%s", diff)
	}
}

// TestResolvedTwice: a call approved and then expired (or lost) before it
// ran ends twice; the second end is another event, with another id.
func TestResolvedTwice(t *testing.T) {
	for outcome, want := range map[string]string{
		"approved": "c1.resolved", "rejected": "c1.resolved", "expired": "c1.resolved.expired", "unknown": "c1.resolved.unknown",
	} {
		got := decode(t, deliverOne(t, FormatCloudEvents, "", resolved("c1", outcome, "alice")).Body)["id"]
		if got != want {
			t.Errorf("%s after an approval: id %v, want %s", outcome, got, want)
		}
	}
	e := resolved("c1", "expired", "")
	if got := decode(t, deliverOne(t, FormatCloudEvents, "", e).Body)["id"]; got != "c1.resolved" {
		t.Errorf("expired while waiting: id %v, want c1.resolved (its only end)", got)
	}
}

func TestCloudEventsSparse(t *testing.T) {
	// Unknown fields are present as null or empty, never missing.
	req := deliverOne(t, FormatCloudEvents, "", Event{Type: TypeRequested, CallID: "c2"})
	data := decode(t, req.Body)["data"].(map[string]any)
	want := map[string]any{
		"call_id": "c2", "tool": "", "upstream": "", "subject": "", "method": "", "path": "", "arguments": nil,
		"reasons": []any{}, "rule_ids": []any{}, "approval_url": "", "status_url": "", "expires_at": nil,
	}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
}

// slackBody is the part of a Slack message the tests look at.
type slackBody struct {
	Text        string `json:"text"`
	UnfurlLinks *bool  `json:"unfurl_links"`
	Blocks      []struct {
		Type string `json:"type"`
		Text *struct {
			Type, Text string
			Verbatim   bool
		} `json:"text"`
		Fields []struct {
			Type, Text string
			Verbatim   bool
		} `json:"fields"`
		Elements []map[string]any `json:"elements"`
	} `json:"blocks"`
}

func decodeSlack(t *testing.T, body []byte) slackBody {
	t.Helper()
	var m slackBody
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("Slack body: %v\n%s", err, body)
	}
	return m
}

func TestSlackRequested(t *testing.T) {
	e := requested("c1")
	req := deliverOne(t, FormatSlack, "", e)
	if got := req.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	m := decodeSlack(t, req.Body)

	if !strings.Contains(m.Text, "write_note") {
		t.Errorf("fallback text %q does not name the tool", m.Text)
	}
	if m.UnfurlLinks == nil || *m.UnfurlLinks {
		t.Errorf("unfurl_links = %v, want false", m.UnfurlLinks)
	}
	var types []string
	var all strings.Builder
	buttons := 0
	for _, b := range m.Blocks {
		types = append(types, b.Type)
		if b.Text != nil {
			all.WriteString(b.Text.Text + "\n")
		}
		for _, f := range b.Fields {
			all.WriteString(f.Text + "\n")
		}
		for _, s := range richTexts(b.Elements) {
			all.WriteString(s + "\n")
		}
		if b.Type != "actions" {
			continue
		}
		for _, el := range b.Elements {
			buttons++
			if el["type"] != "button" || el["url"] != e.ApprovalURL {
				t.Errorf("action element %v: want a button with url %q", el, e.ApprovalURL)
			}
			if _, ok := el["action_id"]; ok {
				t.Errorf("button %v has an action_id: buttons must be plain links", el)
			}
		}
	}
	if buttons != 1 {
		t.Errorf("%d buttons, want 1 link to the approval page", buttons)
	}
	if diff := cmp.Diff([]string{"header", "section", "rich_text", "section", "context", "actions"}, types); diff != "" {
		t.Errorf("block types (-want +got):\n%s", diff)
	}
	for _, want := range []string{
		"*Tool*\n`write_note`", "*Upstream*\nnotes", "*Caller*\nagent-42",
		"*Target*\n`notes/today.txt`", "writing notes needs a human", "Rules: notes.write",
		"```\n{\n  \"path\": \"notes/today.txt\",\n  \"content\": \"hello\"\n}\n```",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("message lacks %q:\n%s", want, all.String())
		}
	}
	ctx := m.Blocks[4].Elements[0]["text"].(string)
	if !strings.Contains(ctx, "<!date^1795987800^") || !strings.Contains(ctx, "Call ID c1") {
		t.Errorf("context %q lacks the expiry date or the call ID", ctx)
	}
}

func TestSlackEscapesUntrustedText(t *testing.T) {
	e := requested("c1")
	e.Tool = "x <!channel>"
	e.Subject = "<https://evil.example|Approve here>"
	e.Reasons = []string{"a & b\n*Approved by admin*"}
	e.Arguments = json.RawMessage("{\"s\":\"```<https://evil.example|Approve>```\"}")
	m := decodeSlack(t, deliverOne(t, FormatSlack, "", e).Body)

	for _, b := range m.Blocks {
		texts := []string{}
		if b.Text != nil && b.Type != "header" { // a header is plain_text: nothing to escape
			if b.Text.Type != "mrkdwn" || !b.Text.Verbatim {
				t.Errorf("%s text is %s verbatim=%v, want verbatim mrkdwn", b.Type, b.Text.Type, b.Text.Verbatim)
			}
			texts = append(texts, b.Text.Text)
		}
		for _, f := range b.Fields {
			if !f.Verbatim {
				t.Errorf("field %q is not verbatim", f.Text)
			}
			texts = append(texts, f.Text)
		}
		for _, s := range texts {
			if strings.Contains(s, "<h") || strings.Contains(s, "<!channel") {
				t.Errorf("unescaped link or mention in %q", s)
			}
			if strings.Count(s, "```") > 2 {
				t.Errorf("arguments close the code block early: %q", s)
			}
		}
	}
	if !strings.Contains(m.Text, "&lt;!channel&gt;") {
		t.Errorf("fallback text %q: want the mention escaped", m.Text)
	}
	// Rich text is shown as written: nothing to escape, one line a reason.
	if why := richTexts(m.Blocks[2].Elements); !slices.Contains(why, "a & b *Approved by admin*") {
		t.Errorf("reasons %q: want the reason as written, on one line", why)
	}
}

// richTexts is the text of every text element in rich text elements, in
// order.
func richTexts(elements []map[string]any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "text" {
				s, _ := v["text"].(string)
				out = append(out, s)
			}
			walk(v["elements"])
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for _, e := range elements {
		walk(e)
	}
	return out
}

func TestSlackTruncatesArguments(t *testing.T) {
	e := requested("c1")
	e.Arguments = json.RawMessage(`{"content":"` + strings.Repeat("<", 10000) + `"}`)
	m := decodeSlack(t, deliverOne(t, FormatSlack, "", e).Body)
	args := m.Blocks[3].Text.Text
	if n := len([]rune(args)); n > 3000 {
		t.Errorf("arguments section is %d characters; Slack allows 3000", n)
	}
	if !strings.Contains(args, "Truncated:") || !strings.Contains(args, "approval page") {
		t.Errorf("arguments section lacks the truncation note:\n%.200s…", args)
	}
}

func TestSlackResolved(t *testing.T) {
	for _, tt := range []struct{ outcome, by, want string }{
		{"approved", "alice", "approved by alice"},
		{"rejected", "bob", "rejected by bob"},
		{"expired", "", "expired"},
		{"cancelled", "agent-42", "cancelled by agent-42"},
	} {
		t.Run(tt.outcome, func(t *testing.T) {
			m := decodeSlack(t, deliverOne(t, FormatSlack, "", resolved("c1", tt.outcome, tt.by)).Body)
			if !strings.Contains(m.Text, tt.want) {
				t.Errorf("text = %q, want it to contain %q", m.Text, tt.want)
			}
			for _, b := range m.Blocks {
				if b.Type == "actions" {
					t.Errorf("resolved message has buttons")
				}
			}
		})
	}
}

func TestTeamsRequested(t *testing.T) {
	e := requested("c1")
	req := deliverOne(t, FormatTeams, "", e)
	var m struct {
		Type        string `json:"type"`
		Attachments []struct {
			ContentType string `json:"contentType"`
			Content     struct {
				Type    string           `json:"type"`
				Version string           `json:"version"`
				Body    []map[string]any `json:"body"`
				Actions []map[string]any `json:"actions"`
			} `json:"content"`
		} `json:"attachments"`
	}
	if err := json.Unmarshal(req.Body, &m); err != nil {
		t.Fatalf("Teams body: %v\n%s", err, req.Body)
	}
	if m.Type != "message" || len(m.Attachments) != 1 {
		t.Fatalf("type %q with %d attachments, want message with 1", m.Type, len(m.Attachments))
	}
	a := m.Attachments[0]
	if a.ContentType != "application/vnd.microsoft.card.adaptive" || a.Content.Type != "AdaptiveCard" || a.Content.Version != "1.4" {
		t.Errorf("attachment %q / %q / %q, want an Adaptive Card 1.4", a.ContentType, a.Content.Type, a.Content.Version)
	}
	want := []map[string]any{{"type": "Action.OpenUrl", "title": "Review & approve", "url": e.ApprovalURL, "style": "positive"}}
	if diff := cmp.Diff(want, a.Content.Actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	var facts map[string]string
	var runs []string
	for _, b := range a.Content.Body {
		switch b["type"] {
		case "FactSet":
			facts = map[string]string{}
			for _, f := range b["facts"].([]any) {
				f := f.(map[string]any)
				facts[f["title"].(string)] = f["value"].(string)
			}
		case "RichTextBlock":
			runs = append(runs, b["inlines"].([]any)[0].(map[string]any)["text"].(string))
		}
	}
	wantFacts := map[string]string{
		"Tool": `write\_note`, "Upstream": "notes", "Caller": "agent-42", "Target": "notes/today.txt",
		"Expires": "2026-11-29 21:30:00 UTC", "Call ID": "c1", "Request": `POST /tools/write\_note`,
	}
	if diff := cmp.Diff(wantFacts, facts); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
	wantRuns := []string{"• writing notes needs a human\nRules: notes.write", "{\n  \"path\": \"notes/today.txt\",\n  \"content\": \"hello\"\n}"}
	if diff := cmp.Diff(wantRuns, runs); diff != "" {
		t.Errorf("rich text (-want +got):\n%s", diff)
	}
}

func TestTeamsEscapesFacts(t *testing.T) {
	e := requested("c1")
	e.Subject = "[Approve](https://evil.example)"
	body := string(deliverOne(t, FormatTeams, "", e).Body)
	if strings.Contains(body, "[Approve](https") {
		t.Errorf("markdown link survived in the card:\n%s", body)
	}
	if !strings.Contains(body, `\\[Approve\\]\\(https://evil.example\\)`) {
		t.Errorf("want the subject backslash-escaped:\n%s", body)
	}
}

func TestTeamsResolved(t *testing.T) {
	body := string(deliverOne(t, FormatTeams, "", resolved("c1", "rejected", "bob")).Body)
	for _, want := range []string{`Rejected"`, "rejected by bob", "looks fine"} {
		if !strings.Contains(body, want) {
			t.Errorf("card lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "Action.OpenUrl") {
		t.Errorf("resolved card has an action:\n%s", body)
	}
}

func TestCloudEventsInvalidArguments(t *testing.T) {
	e := requested("c1")
	e.Arguments = json.RawMessage(`{"unterminated`)
	data := decode(t, deliverOne(t, FormatCloudEvents, "", e).Body)["data"].(map[string]any)
	if got := data["arguments"]; got != `{"unterminated` {
		t.Errorf("arguments = %#v, want the raw bytes as a string", got)
	}
}

// withHeaders is requested(id) sending the usual headers, a credential
// and a header that changes what the call does.
func withHeaders(id string) Event {
	e := requested(id)
	e.Headers = &Headers{List: []Header{
		{Name: "Accept", Value: "*/*"},
		{Name: "Content-Type", Value: "application/json"},
		{Name: "X-Api-Key", Hidden: true, Size: 17},
		{Name: "X-Target-Override", Value: "/etc/shadow"},
	}}
	return e
}

func TestSlackHeaders(t *testing.T) {
	m := decodeSlack(t, renderSlack(t, withHeaders("c1"), false))
	var types []string
	for _, b := range m.Blocks {
		types = append(types, b.Type)
	}
	if diff := cmp.Diff([]string{"header", "section", "rich_text", "section", "section", "context", "actions"}, types); diff != "" {
		t.Fatalf("block types (-want +got):\n%s", diff)
	}
	want := "*Headers sent (4)*\n```\nX-Api-Key: (hidden: 17 bytes)\nX-Target-Override: /etc/shadow\n```\n_Also the usual: Accept, Content-Type._"
	if got := m.Blocks[4].Text; got == nil || got.Text != want || !got.Verbatim {
		t.Errorf("headers section = %+v, want verbatim %q", got, want)
	}

	// Only the usual headers, or none: one line in the context.
	for _, tt := range []struct {
		headers *Headers
		want    string
	}{
		{&Headers{List: []Header{{Name: "Accept", Value: "*/*"}, {Name: "Accept", Value: "text/plain"}, {Name: "User-Agent", Value: "x"}}}, "Headers sent: 3, all usual: Accept, User-Agent"},
		{&Headers{List: []Header{}}, "Headers sent: none of the agent's"},
	} {
		e := requested("c1")
		e.Headers = tt.headers
		m := decodeSlack(t, renderSlack(t, e, false))
		if len(m.Blocks) != 6 {
			t.Errorf("%d blocks, want 6 (no headers section)", len(m.Blocks))
		}
		if ctx := m.Blocks[4].Elements[0]["text"].(string); !strings.Contains(ctx, tt.want) {
			t.Errorf("context %q lacks %q", ctx, tt.want)
		}
	}

	// Unlisted headers are said to be sent, even with only the usual listed.
	e := requested("c1")
	e.Headers = &Headers{List: []Header{{Name: "Accept", Value: "*/*"}}, Omitted: 3}
	m = decodeSlack(t, renderSlack(t, e, false))
	if len(m.Blocks) != 7 || m.Blocks[4].Text == nil {
		t.Fatalf("%d blocks, want 7 with a headers section", len(m.Blocks))
	}
	if got := m.Blocks[4].Text.Text; !strings.Contains(got, "*Headers sent (4)*") || !strings.Contains(got, "3 more headers are sent that neither this message nor the approval page lists.") {
		t.Errorf("headers section %q does not count the unlisted headers", got)
	}
}

func TestSlackHeadersEscapedAndBounded(t *testing.T) {
	e := requested("c1")
	e.Headers = &Headers{List: []Header{{Name: "X-Note", Value: "```<!channel> <https://evil.example|Approve>```"}}}
	for i := range 40 {
		e.Headers.List = append(e.Headers.List, Header{Name: fmt.Sprintf("X-Pad-%02d", i), Value: strings.Repeat("<", 300)})
	}
	m := decodeSlack(t, renderSlack(t, e, false))
	if len(m.Blocks) != 7 || m.Blocks[4].Text == nil {
		t.Fatalf("%d blocks, want 7 with a headers section", len(m.Blocks))
	}
	section := m.Blocks[4].Text.Text
	if strings.Contains(section, "<!channel") || strings.Contains(section, "<h") || strings.Count(section, "```") != 2 {
		t.Errorf("a header escapes its code block, links or mentions:\n%.300s", section)
	}
	if n := len([]rune(section)); n > 3000 || !strings.Contains(section, "Truncated: the approval page lists them all.") {
		t.Errorf("headers section of %d characters (Slack allows 3000), truncation noted: %v", n, strings.Contains(section, "Truncated"))
	}
}

func TestTeamsHeaders(t *testing.T) {
	body := teamsMessage(new(withHeaders("c1"))).Attachments[0].Content.Body
	got, _ := json.Marshal(body[len(body)-3:])
	want := `[{"spacing":"Medium","text":"Headers sent (4)","type":"TextBlock","weight":"Bolder","wrap":true},` +
		`{"inlines":[{"fontType":"Monospace","text":"X-Api-Key: (hidden: 17 bytes)\nX-Target-Override: /etc/shadow","type":"TextRun"}],"type":"RichTextBlock"},` +
		`{"isSubtle":true,"size":"Small","text":"Also the usual: Accept, Content-Type.","type":"TextBlock","wrap":true}]`
	if string(got) != want {
		t.Errorf("headers in the card:\n got %s\nwant %s", got, want)
	}

	e := requested("c1")
	e.Headers = &Headers{List: []Header{{Name: "Content-Type", Value: "application/json"}}}
	body = teamsMessage(&e).Attachments[0].Content.Body
	if last := body[len(body)-1].(map[string]any); last["text"] != "Headers sent: 1, all usual: Content-Type" {
		t.Errorf("usual headers only: last block %v", last)
	}
	// A call parked before headers were listed: nothing said.
	if n, m := len(teamsMessage(new(requested("c1"))).Attachments[0].Content.Body), len(body); n != m-1 {
		t.Errorf("%d blocks without headers, %d with: want one less", n, m)
	}
}

func TestCloudEventsHeaderNames(t *testing.T) {
	e := withHeaders("c1")
	e.Headers.List = append(e.Headers.List, Header{Name: "X-Target-Override", Value: "/root"})
	data := decode(t, deliverOne(t, FormatCloudEvents, "", e).Body)["data"].(map[string]any)
	if diff := cmp.Diff([]any{"Accept", "Content-Type", "X-Api-Key", "X-Target-Override"}, data["header_names"]); diff != "" {
		t.Errorf("header_names (-want +got):\n%s", diff)
	}
	if strings.Contains(fmt.Sprint(data), "/etc/shadow") {
		t.Errorf("the event carries header values: %v", data)
	}
}

// withParams is requested(id) sending _meta and inputResponses beside its
// arguments, as an MCP tool call may.
func withParams(id string) Event {
	e := requested(id)
	e.OtherParams = &Params{List: []Param{
		{Name: "_meta", Value: `{"acme/overwrite_path":"/etc/passwd"}`},
		{Name: "inputResponses", Value: `{"confirm":{"action":"accept"}}`},
	}}
	return e
}

// TestSlackOtherParams: an MCP tool call that sends other members of
// params shows each with its value after the arguments, in a code block;
// a value the call's record did not keep by its size, and members past
// the record's bounds are counted.
func TestSlackOtherParams(t *testing.T) {
	m := decodeSlack(t, renderSlack(t, withParams("c1"), false))
	plain := decodeSlack(t, renderSlack(t, requested("c1"), false))
	if len(m.Blocks) != len(plain.Blocks)+1 {
		t.Fatalf("%d blocks, want %d: one more than without", len(m.Blocks), len(plain.Blocks)+1)
	}
	want := "*Other parameters sent (2)*\n```\n" +
		`_meta: {"acme/overwrite_path":"/etc/passwd"}` + "\n" +
		`inputResponses: {"confirm":{"action":"accept"}}` + "\n```"
	if got := m.Blocks[4].Text; got == nil || got.Text != want || !got.Verbatim || !strings.HasPrefix(m.Blocks[3].Text.Text, "*Arguments*") {
		t.Errorf("block after the arguments = %+v, want verbatim %q", got, want)
	}

	e := withParams("c1")
	e.OtherParams.List = append(e.OtherParams.List, Param{Name: "requestState", Size: 20000})
	e.OtherParams.Omitted = 2
	m = decodeSlack(t, renderSlack(t, e, false))
	want = "*Other parameters sent (5)*\n```\n" +
		`_meta: {"acme/overwrite_path":"/etc/passwd"}` + "\n" +
		`inputResponses: {"confirm":{"action":"accept"}}` + "\n" +
		"requestState: (value not shown: 20000 bytes)\n```\n" +
		"_2 more parameters are sent that neither this message nor the approval page lists._"
	if got := m.Blocks[4].Text; got == nil || got.Text != want {
		t.Errorf("other parameters section = %+v, want %q", got, want)
	}
}

func TestTeamsOtherParams(t *testing.T) {
	body := teamsMessage(new(withParams("c1"))).Attachments[0].Content.Body
	got, _ := json.Marshal(body[len(body)-2:])
	want := `[{"spacing":"Medium","text":"Other parameters sent (2)","type":"TextBlock","weight":"Bolder","wrap":true},` +
		`{"inlines":[{"fontType":"Monospace","text":"_meta: {\"acme/overwrite_path\":\"/etc/passwd\"}\ninputResponses: {\"confirm\":{\"action\":\"accept\"}}","type":"TextRun"}],"type":"RichTextBlock"}]`
	if string(got) != want {
		t.Errorf("other parameters in the card:\n got %s\nwant %s", got, want)
	}
	if n, m := len(teamsMessage(new(requested("c1"))).Attachments[0].Content.Body), len(body); n != m-2 {
		t.Errorf("%d blocks without other parameters, %d with: want two less", n, m)
	}

	e := withParams("c1")
	e.OtherParams.List = append(e.OtherParams.List, Param{Name: "requestState", Size: 1})
	e.OtherParams.Omitted = 1
	body = teamsMessage(&e).Attachments[0].Content.Body
	got, _ = json.Marshal(body[len(body)-3:])
	want = `[{"spacing":"Medium","text":"Other parameters sent (4)","type":"TextBlock","weight":"Bolder","wrap":true},` +
		`{"inlines":[{"fontType":"Monospace","text":"_meta: {\"acme/overwrite_path\":\"/etc/passwd\"}\ninputResponses: {\"confirm\":{\"action\":\"accept\"}}\nrequestState: (value not shown: 1 byte)","type":"TextRun"}],"type":"RichTextBlock"},` +
		`{"isSubtle":true,"size":"Small","text":"1 more parameter is sent that neither this message nor the approval page lists.","type":"TextBlock","wrap":true}]`
	if string(got) != want {
		t.Errorf("other parameters in the card:\n got %s\nwant %s", got, want)
	}
}

// TestOtherParamsEscapedAndBounded: other params' names and values cannot
// close the Slack code block, link or mention; a long value is cut with
// "…", many members are cut to the section's bound, and the whole message,
// with long arguments and headers besides, stays within Slack's and
// Teams' limits.
func TestOtherParamsEscapedAndBounded(t *testing.T) {
	const evil = "```<!channel> <https://evil.example|Approve>```"
	e := requested("c1")
	e.Arguments = json.RawMessage(`{"content":"` + strings.Repeat(`\"`, 10000) + `"}`)
	e.Headers = &Headers{}
	for i := range 60 {
		e.Headers.List = append(e.Headers.List, Header{Name: fmt.Sprintf("X-Pad-%02d", i), Value: strings.Repeat(`\`, 1000)})
	}
	e.OtherParams = &Params{List: []Param{
		{Name: "a" + evil, Value: `"` + evil + `"`},
		{Name: "b_long", Value: `"` + strings.Repeat("<", 5000) + `"`},
		{Name: "c_break", Value: "\"one\u2028Approved by admin\u0085two\""},
	}, Omitted: 3}
	for i := range 29 {
		e.OtherParams.List = append(e.OtherParams.List, Param{Name: fmt.Sprintf("p%02d", i), Value: `"` + strings.Repeat("`", 2000) + `"`})
	}

	body := renderSlack(t, e, true)
	m := decodeSlack(t, body)
	var section string
	for _, b := range m.Blocks {
		if b.Text == nil {
			continue
		}
		if n := len([]rune(b.Text.Text)); n > 3000 {
			t.Errorf("%s block of %d characters (Slack allows 3000): %.100s", b.Type, n, b.Text.Text)
		}
		if strings.HasPrefix(b.Text.Text, "*Other parameters sent (35)*") {
			section = b.Text.Text
		}
	}
	if section == "" {
		t.Fatalf("no other parameters section in %s", body)
	}
	if strings.Contains(section, "<!channel") || strings.Contains(section, "<h") || strings.Count(section, "```") != 2 {
		t.Errorf("a param escapes its code block, links or mentions:\n%.400s", section)
	}
	for _, want := range []string{
		"a`\u200b`\u200b`\u200b&lt;!channel&gt; &lt;https://evil.example|Approve&gt;",
		"b_long: \"" + strings.Repeat("&lt;", 298) + "…\n",
		"c_break: \"one Approved by admin two\"\n",
		"\n_Truncated: approving sends them whole; the approval page shows their values._",
		"\n_3 more parameters are sent that neither this message nor the approval page lists._",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("other parameters section lacks %q:\n%s", want, section)
		}
	}
	if strings.Contains(section, "p28") {
		t.Errorf("the section shows every member: not bounded")
	}

	card, _ := encodeJSON(teamsMessage(&e))
	if len(card) > 28000 {
		t.Errorf("Teams card of %d bytes; Teams allows ~28 KB", len(card))
	}
	cardBody := teamsMessage(&e).Attachments[0].Content.Body
	var run string
	for i, el := range cardBody {
		if b, _ := el.(map[string]any); b["text"] == "Other parameters sent (35)" {
			rich := cardBody[i+1].(map[string]any)
			run = rich["inlines"].([]any)[0].(map[string]any)["text"].(string)
			if note := cardBody[i+2].(map[string]any)["text"]; note != "Truncated: approving sends them whole; the approval page shows their values." {
				t.Errorf("after the other parameters: %v, want the truncation note", note)
			}
		}
	}
	if len(run) > paramsLimit || !strings.HasPrefix(run, "a"+evil+`: "`+evil+`"`+"\nb_long: \""+strings.Repeat("<", 298)+"…\n") {
		t.Errorf("other parameters text run of %d bytes (limit %d):\n%.300s", len(run), paramsLimit, run)
	}
}

// TestOtherParams: a call without other parameters, or listing none, gets
// the message it got before; CloudEvents data names them as param_names,
// never with their values.
func TestOtherParams(t *testing.T) {
	plain := renderSlack(t, requested("c1"), false)
	plainTeams, _ := encodeJSON(teamsMessage(new(requested("c1"))))
	e := requested("c1")
	e.OtherParams = &Params{List: []Param{}}
	if got := renderSlack(t, e, false); !bytes.Equal(got, plain) {
		t.Errorf("Slack message of a call listing no other parameters:\n got %s\nwant %s", got, plain)
	}
	if got, _ := encodeJSON(teamsMessage(&e)); !bytes.Equal(got, plainTeams) {
		t.Errorf("Teams message of a call listing no other parameters:\n got %s\nwant %s", got, plainTeams)
	}

	e = withParams("c1")
	e.OtherParams.List = append(e.OtherParams.List, Param{Name: "x<!channel>", Value: `1`})
	e.OtherParams.Omitted = 1
	data := decode(t, deliverOne(t, FormatCloudEvents, "", e).Body)["data"].(map[string]any)
	if diff := cmp.Diff([]any{"_meta", "inputResponses", "x<!channel>", "…"}, data["param_names"]); diff != "" {
		t.Errorf("param_names (-want +got):\n%s", diff)
	}
	if strings.Contains(fmt.Sprint(data), "/etc/passwd") {
		t.Errorf("the event carries param values: %v", data)
	}
	for _, e := range []Event{requested("c1"), {Type: TypeRequested, CallID: "c1", OtherParams: &Params{List: []Param{}}}} {
		data = decode(t, deliverOne(t, FormatCloudEvents, "", e).Body)["data"].(map[string]any)
		if _, has := data["param_names"]; has {
			t.Errorf("a call without other parameters has param_names: %v", data)
		}
	}
}

// TestChatRevealsHiddenCharacters: a right-to-left override or a
// zero-width space in an argument, a header value, another param or a
// reason (which may quote an argument), and a filler that shows as nothing, is
// spelled out in Slack and Teams messages, as on the approval page: a
// chat message must not show an approver a disguise of what will run.
func TestChatRevealsHiddenCharacters(t *testing.T) {
	e := requested("c1")
	e.Arguments = json.RawMessage("{\"path\":\"notes/today.txt\",\"content\":\"pay\u202egnp.exe\"}")
	e.Headers = &Headers{List: []Header{{Name: "X-Note", Value: "a\u200bb"}}}
	e.OtherParams = &Params{List: []Param{{Name: "task", Value: "\"t\u2066x\""}}}
	// A reason that quotes an argument, and a filler that shows as nothing.
	e.Reasons = []string{"note: harmless read \u202eFDP.exe", "config\u115f.yaml"}
	for _, format := range []string{FormatSlack, FormatTeams} {
		body, _, err := render(format, &e, false)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		// The bodies are JSON: a revealed \u202e is written \\u202e there,
		// the character itself \u202e or raw.
		var text strings.Builder
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				text.WriteString(v + "\n")
			case []any:
				for _, x := range v {
					walk(x)
				}
			case map[string]any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		var doc any
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		walk(doc)
		shown := text.String()
		for _, want := range []string{`pay\u202egnp.exe`, `a\u200bb`, `t\u2066x`, `read \u202eFDP.exe`, `config\u115f.yaml`} {
			if !strings.Contains(shown, want) {
				t.Errorf("%s: the message does not spell out %s", format, want)
			}
		}
		if strings.ContainsAny(shown, "\u202e\u200b\u2066\u115f") {
			t.Errorf("%s: the message holds a hidden character itself", format)
		}
	}
}

// TestChatSaysHeaderValueCut: a header value cut short in a chat message
// says so, as a cut list does: the part cut may be what matters.
func TestChatSaysHeaderValueCut(t *testing.T) {
	e := requested("c1")
	e.Headers = &Headers{List: []Header{{Name: "X-Custom", Value: strings.Repeat("a", 199) + "; rm -rf /"}}}
	for _, format := range []string{FormatSlack, FormatTeams} {
		body, _, err := render(format, &e, false)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if !strings.Contains(string(body), "Truncated: the approval page lists them all.") {
			t.Errorf("%s: a header value cut short is not said to be: %s", format, body)
		}
	}
}
