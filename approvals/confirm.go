package approvals

import (
	"net/http"
	"net/url"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// The confirmation page: an ask whose reasons name only the requester
// ("approvers": {"requester": true}) may be confirmed by the caller's own
// human. The proxy hands the requester's MCP client a link to this page
// (URL elicitation, a task's input request); the client's answer to the
// elicitation decides nothing, since a client may answer it by itself.
// Only a POST from this page does, with the link's confirmation token
// (Signer.ConfirmToken: another purpose than approval links, the same
// binding to one call, its exact request and its expiry). GET and HEAD
// only read, as for approval links.
//
// A confirmation is recorded as decided_by "requester:<subject>" and counts
// only towards requirements that name nobody but the requester (eligible).

// RequesterPrefix starts the decided_by of a requester's confirmation.
const RequesterPrefix = "requester:"

// requester is the approver a confirmation page decides as: the call's
// own subject.
func requester(c pending.Call) *signin.Approver {
	return &signin.Approver{Name: RequesterPrefix + c.Subject, Via: viaRequester}
}

// errNotRequesters: the call names approvers other than the requester; its
// requester cannot confirm it.
var errNotRequesters = &httpError{
	status: http.StatusForbidden, title: "Not yours to confirm",
	msg: "this call names its approvers: only they can approve it, not its requester",
}

// confirmCall reads the call a confirmation request is about and checks
// its token (exactly one).
func (h *Handler) confirmCall(r *http.Request, tokens []string) (pending.Call, error) {
	id, err := callID(r)
	if err != nil {
		return pending.Call{}, err
	}
	c, err := h.store.Get(r.Context(), id)
	if err != nil {
		return pending.Call{}, err
	}
	if len(tokens) != 1 {
		return pending.Call{}, ErrTokenInvalid
	}
	if err := h.signer.CheckConfirm(tokens[0], c, h.now()); err != nil {
		return pending.Call{}, err
	}
	if _, err := eligible(c, callinfo.Decode(c.Info), requester(c), pending.Approved); err != nil {
		return pending.Call{}, errNotRequesters
	}
	if h.requesterSignIn {
		who, err := h.pageApprover(r)
		if err != nil {
			return pending.Call{}, err
		}
		if nameKey(who.Name) != nameKey(c.Subject) {
			return pending.Call{}, errNotTheRequester
		}
	}
	return c, nil
}

// errNotTheRequester: with RequesterSignIn, the signed-in approver is not
// the call's requester.
var errNotTheRequester = &httpError{
	status: http.StatusForbidden, title: "Not your call",
	msg: "only the call's requester, signed in, may confirm it here; its approvers decide it on its approval page",
}

// showConfirm serves GET and HEAD /confirm/{id}?token=T.
func (h *Handler) showConfirm(w http.ResponseWriter, r *http.Request) error {
	tokens := r.URL.Query()["token"]
	c, err := h.confirmCall(r, tokens)
	if err != nil {
		if h.signIn(w, r, err) {
			return nil
		}
		return err
	}
	h.render(w, http.StatusOK, h.confirmPage(c, tokens[0], "", ""))
	return nil
}

// decideConfirm serves POST /confirm/{id}: the confirmation page's form.
func (h *Handler) decideConfirm(w http.ResponseWriter, r *http.Request) error {
	form, err := h.readForm(w, r)
	if err != nil {
		return err
	}
	if err := fieldsOnce(form, "token"); err != nil {
		return err
	}
	c, err := h.confirmCall(r, form["token"])
	if err != nil {
		return err
	}
	to, comment, err := formDecision(form)
	if err != nil {
		return err
	}
	decided, err := h.decide(r.Context(), r.RemoteAddr, decision{
		call: c, info: callinfo.Decode(c.Info), who: requester(c), to: to, comment: comment, via: viaRequester,
	})
	if err != nil {
		return err
	}
	title, message, tone := "Declined", "You declined the call; it will not be forwarded.", "bad"
	switch decided.State {
	case pending.Approved:
		title, message, tone = "Confirmed", "You confirmed the call; it will be forwarded once.", "ok"
	case pending.Waiting:
		// Another requirement names approvers: they decide the rest.
		title, tone = "Confirmation counted", "ok"
		message = "Your confirmation is counted; the call waits for its approvers (" + progress(decided, callinfo.Decode(decided.Info)) + ")."
	}
	data := h.confirmPage(decided, form.Get("token"), title, message)
	data.Tone = tone
	h.render(w, http.StatusOK, data)
	return nil
}

// confirmPage is c's confirmation page: the form while c waits, else c as
// it stands.
func (h *Handler) confirmPage(c pending.Call, token, title, message string) pageData {
	data := pageData{Title: "Confirmation requested", Call: h.view(c), Confirm: true}
	switch {
	case c.State == pending.Waiting && approvedBy(c, requester(c).Name):
		data.Message = "Your confirmation is counted; the call waits for its approvers."
	case c.State == pending.Waiting:
		data.Forms, data.Token = true, token
		data.Action = "./" + url.PathEscape(c.ID) + "?token=" + url.QueryEscape(token)
		data.Message = "Your agent asks to make this call. Confirm it if you meant it; it waits until you or an approver decide, or until it expires."
	default:
		data.Title = "Confirmation request"
		data.Message = "This call is no longer waiting for a decision."
	}
	if title != "" {
		data.Title, data.Message = title, message
	}
	return data
}
