package approvals

import (
	"cmp"
	"net/url"
	"slices"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// inboxData is what inbox.html shows (GET /approvals): the waiting calls
// the signed-in approver may decide, newest first.
type inboxData struct {
	Approver string // the signed-in approver's name
	SignOut  string // where to post to sign out; "" when the identity has no sign-out
	Items    []inboxItem
}

// inboxItem is one waiting call in the inbox.
type inboxItem struct {
	ID string
	// Link is the call's page relative to the inbox: the inbox is
	// /approvals (no trailing slash), so "./approvals/ID" resolves to
	// /approvals/ID, and to /prefix/approvals/ID when a proxy in front
	// serves the listener under /prefix. "./" keeps an ID with a colon
	// from reading as a URL scheme.
	Link     string
	Label    string // the MCP method and tool, or the tool (see callView.Label)
	Tool     string
	Method   string // the MCP method, kind mcp only
	Upstream string
	Subject  string
	Target   string
	// TargetsBeyond: the call names more targets than Target.
	TargetsBeyond bool
	Reasons       []string
	Age           string // "3m ago"
	TimeLeft      string // "57m 10s left"
	Progress      string // "1 of 2 approvals"; "" when one approval decides (progress, eligible.go)
	Created       time.Time
}

// inboxItemOf is c as the inbox lists it at now, from its Brief, else its
// Info, else the record's own fields (listedInfo). Progress is left to the
// caller, who knows the call's approvals and quorum.
func inboxItemOf(c pending.Call, now time.Time) inboxItem {
	info, _ := listedInfo(c)
	v := callView{Tool: or(c.Tool, info.Tool), Method: mcpMethod(info), Target: info.Target}
	if info.Method != "" || info.Path != "" {
		v.Request = info.Method + " " + info.Path
	}
	it := inboxItem{
		ID: c.ID, Link: "./approvals/" + url.PathEscape(c.ID), Label: v.Label(),
		Tool: v.Tool, Method: v.Method, Upstream: or(c.Upstream, info.Upstream), Subject: or(c.Subject, info.Subject),
		Target: info.Target, TargetsBeyond: info.TargetsBeyond, Reasons: info.Reasons, Created: c.CreatedAt,
	}
	if !c.CreatedAt.IsZero() {
		it.Age = ago(now.Sub(c.CreatedAt))
	}
	if !c.ExpiresAt.IsZero() {
		it.TimeLeft = timeLeft(c.ExpiresAt.Sub(now))
	}
	return it
}

// sortInbox puts the newest call first; calls parked at the same moment
// keep an order that does not change between reloads.
func sortInbox(items []inboxItem) {
	slices.SortStableFunc(items, func(a, b inboxItem) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
