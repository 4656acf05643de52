package approvals

import (
	"net/http"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// inboxScan bounds how many waiting calls the inbox reads from the store
// per request: an inbox is for people, and a page of thousands helps none.
const inboxScan = 1000

// showInbox serves GET /approvals: the waiting calls the signed-in
// approver may decide, newest first. Without identity there is no inbox:
// nobody is signed in to have one.
func (h *Handler) showInbox(w http.ResponseWriter, r *http.Request) error {
	if h.identity == nil {
		return errNoRoute
	}
	who, err := h.pageApprover(r)
	if err != nil {
		return err
	}
	calls, err := h.store.List(r.Context(), pending.Waiting, inboxScan)
	if err != nil {
		return err
	}
	now := h.now()
	items := make([]inboxItem, 0, len(calls))
	for _, c := range calls {
		info := callinfo.Decode(c.Info)
		if !mayDecide(c, info, who) || !c.ExpiresAt.After(now) {
			continue
		}
		it := inboxItemOf(c, now)
		it.Progress = progress(c, info)
		items = append(items, it)
	}
	sortInbox(items)
	h.renderInbox(w, inboxData{Approver: who.Name, Items: items})
	return nil
}
