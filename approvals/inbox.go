package approvals

import (
	"errors"
	"net/http"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// inboxScan bounds how many waiting calls the inbox reads from the store
// per request, newest first: an inbox is for people, and a page of
// thousands helps none.
const inboxScan = 500

// showInbox serves GET /approvals: the waiting calls the signed-in
// approver may decide, newest first. Without identity there is no inbox:
// nobody is signed in to have one.
//
// The calls are read with ListBrief: their Briefs, never their requests
// or arguments, so that one page load costs the store a few hundred bytes
// a call however large the calls are.
func (h *Handler) showInbox(w http.ResponseWriter, r *http.Request) error {
	if h.identity == nil {
		return errNoRoute
	}
	who, err := h.pageApprover(r)
	if err != nil {
		return err
	}
	calls, err := h.store.ListBrief(r.Context(), pending.Waiting, inboxScan)
	if err != nil {
		return err
	}
	now := h.now()
	items := make([]inboxItem, 0, len(calls))
	for _, c := range calls {
		if !c.ExpiresAt.After(now) {
			continue
		}
		info, ok := listedInfo(c)
		if !ok {
			// Parked before calls had a Brief (or with approvers too many
			// for one): its approvers are in its Info, so it is read whole
			// rather than listed on a guess of who may decide it.
			full, err := h.store.Get(r.Context(), c.ID)
			if errors.Is(err, pending.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			c.Info = full.Info
			info = callinfo.Decode(c.Info)
		}
		if !mayDecide(c, info, who) {
			continue
		}
		it := inboxItemOf(c, now)
		it.Progress = progress(c, info)
		items = append(items, it)
	}
	sortInbox(items)
	h.renderInbox(w, inboxData{Approver: who.Name, SignOut: h.signOutURL(), Items: items})
	return nil
}

// listedInfo is what a list shows of c and decides its eligibility by:
// its Brief as an Info (without arguments or policy input), else its Info.
// ok is false when c has neither (a call from ListBrief parked without a
// Brief).
func listedInfo(c pending.Call) (info callinfo.Info, ok bool) {
	if b, ok := callinfo.DecodeBrief(c.Brief); ok {
		return b.Info(), true
	}
	if len(c.Info) > 0 {
		return callinfo.Decode(c.Info), true
	}
	return callinfo.Info{}, false
}
