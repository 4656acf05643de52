package approvals

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

func TestInboxItemOf(t *testing.T) {
	info := callinfo.Info{
		Kind: "mcp", Tool: "write_note", Upstream: "notes-mcp", Subject: "agent-42", Target: "notes/today.txt",
		Reasons: []string{"writes need approval"}, Method: "POST", Path: "/mcp", MCPMethod: "tools/call",
	}
	c := pending.Call{
		ID: "CALL:1", State: pending.Waiting, Upstream: "notes-mcp", Subject: "agent-42", Tool: "write_note", Info: info.Encode(),
		CreatedAt: viewNow.Add(-3*time.Minute - 10*time.Second), ExpiresAt: viewNow.Add(56*time.Minute + 50*time.Second),
	}
	got := inboxItemOf(c, viewNow)
	want := inboxItem{
		ID: "CALL:1", Link: "./approvals/CALL:1", Label: "tools/call write_note", Tool: "write_note", Method: "tools/call",
		Upstream: "notes-mcp", Subject: "agent-42", Target: "notes/today.txt", Reasons: []string{"writes need approval"},
		Age: "3m ago", TimeLeft: "56m 50s left", Created: c.CreatedAt,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inboxItemOf (-want +got):\n%s", diff)
	}

	// From a list, the call has a Brief and no Info: the same item.
	briefed := c
	briefed.Info, briefed.Brief = nil, callinfo.BriefOf(info)
	if diff := cmp.Diff(want, inboxItemOf(briefed, viewNow)); diff != "" {
		t.Errorf("inboxItemOf(a call with a Brief) (-want +got):\n%s", diff)
	}
	// A call that names more than its target says so, from a Brief too.
	info.TargetsBeyond = true
	briefed.Brief = callinfo.BriefOf(info)
	if got := inboxItemOf(briefed, viewNow); !got.TargetsBeyond || got.Target != "notes/today.txt" {
		t.Errorf("a call with other targets, from its Brief: %+v", got)
	}

	// With neither, the record's own fields.
	bare := pending.Call{ID: "B", Tool: "write_note", Upstream: "notes-mcp", Subject: "agent-42"}
	if got := inboxItemOf(bare, viewNow); got.Label != "write_note" || got.Upstream != "notes-mcp" || got.Subject != "agent-42" {
		t.Errorf("a call with neither Brief nor Info: %+v", got)
	}

	// A plain HTTP call has no tool: its request line names it.
	plain := pending.Call{ID: "P", Info: callinfo.Info{Kind: "http", Method: "DELETE", Path: "/v1/items/7"}.Encode()}
	if got := inboxItemOf(plain, viewNow); got.Label != "DELETE /v1/items/7" || got.Age != "" || got.TimeLeft != "" {
		t.Errorf("plain HTTP call: label %q, age %q, time left %q", got.Label, got.Age, got.TimeLeft)
	}
}

// The inbox is GET /approvals, and a proxy in front may serve the listener
// under a prefix: the link must reach the call's page in both cases.
func TestInboxLink(t *testing.T) {
	for _, id := range []string{"01JTESTCALL", "urn:x:1", "a.b_c-d"} {
		link := inboxItemOf(pending.Call{ID: id}, viewNow).Link
		for inbox, want := range map[string]string{
			"https://toolgate.example.com/approvals":                      "https://toolgate.example.com/approvals/" + id,
			"https://toolgate.example.com/approvals?x=1":                  "https://toolgate.example.com/approvals/" + id,
			"https://example.com/tools/toolgate/approvals":                "https://example.com/tools/toolgate/approvals/" + id,
			"http://127.0.0.1:8081/approvals":                             "http://127.0.0.1:8081/approvals/" + id,
			"https://toolgate.example.com/prefix/approvals#fragment-here": "https://toolgate.example.com/prefix/approvals/" + id,
		} {
			base, err := url.Parse(inbox)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := url.Parse(link)
			if err != nil {
				t.Fatalf("link %q: %v", link, err)
			}
			if got := base.ResolveReference(ref).String(); got != want {
				t.Errorf("link %q from %s = %s, want %s", link, inbox, got, want)
			}
		}
	}
}

func TestSortInbox(t *testing.T) {
	at := func(m int) time.Time { return viewNow.Add(time.Duration(m) * time.Minute) }
	items := []inboxItem{{ID: "old", Created: at(-30)}, {ID: "b", Created: at(-1)}, {ID: "new", Created: at(0)}, {ID: "a", Created: at(-1)}}
	sortInbox(items)
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	if want := []string{"new", "a", "b", "old"}; !slices.Equal(ids, want) {
		t.Errorf("order %v, want %v", ids, want)
	}
}

func TestInboxPage(t *testing.T) {
	h := newViewHandler(t)
	var items []inboxItem
	for i, tool := range []string{"first_tool", "second_tool", "third_tool"} {
		info := restInfo(`{}`)
		info.Tool, info.Subject = tool, "agent <"+tool+">"
		c := viewCall("CALL"+tool, pending.Waiting, info)
		c.CreatedAt = viewNow.Add(-time.Duration(i+1) * time.Minute)
		items = append(items, inboxItemOf(c, viewNow))
	}
	items[1].Progress = "1 of 2 approvals"
	slices.Reverse(items)
	sortInbox(items)

	rec := httptest.NewRecorder()
	h.renderInbox(rec, inboxData{Approver: "dana@example.com", Items: items})
	if rec.Code != http.StatusOK {
		t.Fatalf("renderInbox = %d", rec.Code)
	}
	body := rec.Body.String()
	first, second, third := strings.Index(body, "first_tool"), strings.Index(body, "second_tool"), strings.Index(body, "third_tool")
	if first < 0 || first > second || second > third {
		t.Errorf("newest first: first_tool at %d, second_tool at %d, third_tool at %d", first, second, third)
	}
	for _, want := range []string{
		"<h1>Waiting for you</h1>", "Signed in as <b>dana@example.com</b>", "3 calls you may decide",
		`<a href="./approvals/CALLfirst_tool">`, "agent &lt;first_tool&gt;", "notes/today.txt",
		"writes under notes/ need approval", "asked 1m ago", "57m 00s left", `<span class="progress">1 of 2 approvals</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("inbox lacks %q", want)
		}
	}
	for _, bad := range []string{"Nothing is waiting", "<script", "agent <"} {
		if strings.Contains(body, bad) {
			t.Errorf("inbox has %q", bad)
		}
	}
	if n := strings.Count(body, "<li><a href="); n != 3 {
		t.Errorf("%d calls listed, want 3", n)
	}
}

func TestInboxPage_RevealsHiddenCharacters(t *testing.T) {
	h := newViewHandler(t)
	info := restInfo(`{}`)
	info.Tool = "write\u202enote"
	rec := httptest.NewRecorder()
	h.renderInbox(rec, inboxData{Items: []inboxItem{inboxItemOf(viewCall("C", pending.Waiting, info), viewNow)}})
	if body := rec.Body.String(); strings.Contains(body, "\u202e") || !strings.Contains(body, `write\u202enote`) {
		t.Errorf("inbox does not spell out U+202E:\n%s", body)
	}
}
