package approvals

import (
	"errors"
	"mime"
	"net/http"
	"net/url"
	"slices"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// page adapts a handler of the HTML pages: a returned error becomes an
// error page with the status classify gives it, and a browser without an
// identity, where one is needed and can be had, is sent to sign in.
func (h *Handler) page(fn func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return h.pageVia(viaLink, fn)
}

// pageVia is page for pages whose refusals are logged as via.
func (h *Handler) pageVia(via string, fn func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			if h.signIn(w, r, err) {
				return
			}
			a := classify(err, r.Method)
			h.logRefusal(r, a, err, via)
			h.writeErrorPage(w, a)
		}
	}
}

// pageAuthority is what lets a page request see or decide a call: the
// link token, or for a signed-in approver the form's token, and who that
// approver is (nil without identity).
type pageAuthority struct {
	who   *signin.Approver
	token string // the link token, when the page was opened by a link
}

// authorise checks a page request's authority over c: a link token that
// is good for c (token, when the request carries one), or else a
// signed-in approver who may decide c (listing it in the inbox means
// exactly this). Without identity only the link token counts.
func (h *Handler) authorise(c pending.Call, who *signin.Approver, tokens []string) (pageAuthority, error) {
	switch {
	case len(tokens) == 1:
		if err := h.signer.Check(tokens[0], c, h.now()); err != nil {
			return pageAuthority{}, err
		}
		return pageAuthority{who: who, token: tokens[0]}, nil
	case len(tokens) > 1 || who == nil:
		return pageAuthority{}, ErrTokenInvalid
	}
	info := callinfo.Decode(c.Info)
	if c.State == pending.Waiting && !mayDecide(c, info, who) && !approvedBy(c, who.Name) {
		// An approver's own call is still theirs to reject, from the page
		// as from its link, when they could decide it otherwise.
		if _, err := eligible(c, info, who, pending.Rejected); err != nil || !ownCall(who.Name, c) {
			return pageAuthority{}, errNotEligible
		}
	}
	if c.State != pending.Waiting {
		// A decided call is shown to whoever could have decided it.
		if _, err := eligible(c, info, who, pending.Rejected); err != nil {
			return pageAuthority{}, err
		}
	}
	return pageAuthority{who: who}, nil
}

// showPage serves GET and HEAD /approvals/{id}, with ?token=T from a link
// or, for a signed-in approver, without. It only reads: previewers and
// mail scanners fetch every link (docs/security.md, F09 and INV-6).
func (h *Handler) showPage(w http.ResponseWriter, r *http.Request) error {
	id, err := callID(r)
	if err != nil {
		return err
	}
	who, err := h.pageApprover(r)
	if err != nil {
		return err
	}
	c, err := h.store.Get(r.Context(), id)
	if err != nil {
		return err
	}
	auth, err := h.authorise(c, who, r.URL.Query()["token"])
	if err != nil {
		return err
	}
	h.render(w, http.StatusOK, h.pageFor(c, auth, "", ""))
	return nil
}

// pageFor is the page of c for an approver with auth: the form while c
// waits and they may decide it, else c as it stands, with message.
func (h *Handler) pageFor(c pending.Call, auth pageAuthority, title, message string) pageData {
	data := pageData{Title: "Approval requested", Call: h.view(c)}
	if auth.who != nil {
		data.Approver = auth.who.Name
		data.SignOut = h.signOutURL()
	}
	info := callinfo.Decode(c.Info)
	switch {
	case c.State != pending.Waiting:
		data.Title = "Approval request"
		data.Message = "This call is no longer waiting for a decision."
	case auth.who != nil && approvedBy(c, auth.who.Name):
		data.Message = "Your approval is counted. The call waits for more approvers (" + progress(c, info) + ")."
		data.Tone = "ok"
	case auth.who != nil && ownCall(auth.who.Name, c):
		// Nobody approves their own call; withdrawing it is theirs to do.
		data.Message = "This is your own call: you cannot approve it, but you may reject it."
		data.Tone = "warn"
		h.offerForm(&data, c, auth)
		data.RejectOnly, data.Remember = true, false
	case auth.who != nil && !mayDecide(c, info, auth.who):
		data.Message = "You cannot approve this call: it names other approvers."
		data.Tone = "warn"
	case auth.who == nil && info.NamesApprovers():
		data.Message = errNeedsIdentity.msg
		data.Tone = "warn"
	case auth.who == nil && needed(c) > 1:
		data.Message = "This call needs approvals from several named approvers (" + progress(c, info) + "): approve it signed in, by API key or in Slack. This link can only reject it."
		data.Tone = "warn"
		h.offerForm(&data, c, auth)
		data.RejectOnly, data.Remember = true, false
	default:
		h.offerForm(&data, c, auth)
		data.Remember = h.grants != nil && len(info.Approvers) == 0 && !info.HookAsked && !info.MustAsk && grantable(c)
	}
	if title != "" {
		data.Title, data.Message = title, message
	}
	return data
}

// offerForm puts the decision form on data, with the authority it posts:
// the link token, or the form token of a signed-in approver.
func (h *Handler) offerForm(data *pageData, c pending.Call, auth pageAuthority) {
	data.Forms, data.Lifetimes = true, grantLifetimes
	data.Token = auth.token
	if auth.token == "" && auth.who != nil {
		data.CSRF = h.signer.FormToken(auth.who.Name, c.ID)
	}
	// Relative, so the form posts back to this page's path even when a
	// proxy in front serves the listener under a prefix; "./" keeps an ID
	// with a colon from reading as a URL scheme. The link token stays in
	// the URL, so the page after the decision can be reloaded (and shows
	// the outcome).
	data.Action = "./" + url.PathEscape(c.ID)
	if auth.token != "" {
		data.Action += "?token=" + url.QueryEscape(auth.token)
	}
}

// decideByLink serves POST /approvals/{id}: the page's form.
func (h *Handler) decideByLink(w http.ResponseWriter, r *http.Request) error {
	id, err := callID(r)
	if err != nil {
		return err
	}
	form, err := h.readForm(w, r)
	if err != nil {
		return err
	}
	who, err := h.pageApprover(r)
	if err != nil {
		return err
	}
	c, err := h.store.Get(r.Context(), id)
	if err != nil {
		return err
	}
	auth, err := h.formAuthority(c, who, form)
	if err != nil {
		return err
	}
	// The decision is validated only after the token: without a good token
	// nobody learns anything about the form.
	to, comment, err := formDecision(form, "remember", "lifetime")
	if err != nil {
		return err
	}
	via := viaLink
	if who != nil {
		via = who.Via
	}
	info := callinfo.Decode(c.Info)
	var rm *remember
	if scope := form.Get("remember"); scope != "" && to == pending.Approved {
		rm = &remember{Scope: scope, Lifetime: form.Get("lifetime")}
		if !slices.Contains(grantLifetimes, rm.Lifetime) {
			// The page offers a few lifetimes; the API takes others.
			return badRequest("lifetime must be one of the page's choices")
		}
	}
	life, err := h.checkRemember(rm, c, info, to)
	if err != nil {
		return err
	}
	decided, err := h.decide(r.Context(), r.RemoteAddr, decision{call: c, info: info, who: who, to: to, comment: comment, via: via})
	if err != nil {
		return err
	}
	granted := ""
	if rm != nil && decided.State == pending.Approved {
		by := linkDecider
		if who != nil {
			by = who.Name
		}
		if g, err := h.grant(r.Context(), decided, info, by, rm, life); err == nil {
			granted = " Later calls in the same scope that send the same headers and params are allowed until " + g.ExpiresAt.UTC().Format(timeLayout) + " (grant " + g.ID + ")."
		} else {
			granted = " The grant could not be stored: later calls will ask again."
		}
	}
	title, message, tone := "Rejected", "The call was rejected; it will not be forwarded.", "bad"
	switch decided.State {
	case pending.Approved:
		title, message, tone = "Approved", "The call was approved; it will be forwarded once."+granted, "ok"
	case pending.Waiting:
		title, tone = "Approval counted", "ok"
		message = "Your approval is counted; the call waits for more approvers (" + progress(decided, info) + ")."
	}
	data := h.pageFor(decided, auth, title, message)
	data.Tone = tone
	h.render(w, http.StatusOK, data)
	return nil
}

// readForm reads the body of a page's form. Only the body counts
// (PostForm, not Form): the link's ?token= is not a form field.
func (h *Handler) readForm(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	// The token is the real authority; refusing cross-site posts and any
	// body a cross-site page could send without a form (JSON, text) is
	// defence in depth (docs/security.md, F10).
	if err := h.csrf.Check(r); err != nil {
		return nil, errCrossOrigin
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, errContentType
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return nil, err
		}
		return nil, unreadable(err, "the form could not be read")
	}
	return r.PostForm, nil
}

// formDecision reads a page form's decision and comment; a field sent
// twice (of those and of more) is refused rather than guessed.
func formDecision(form url.Values, more ...string) (pending.State, string, error) {
	if err := fieldsOnce(form, append([]string{"decision", "comment"}, more...)...); err != nil {
		return "", "", err
	}
	to, err := parseDecision(form.Get("decision"))
	if err != nil {
		return "", "", err
	}
	comment := form.Get("comment")
	if err := checkComment(comment); err != nil {
		return "", "", err
	}
	return to, comment, nil
}

// fieldsOnce refuses a form that sends one of fields twice.
func fieldsOnce(form url.Values, fields ...string) error {
	for _, f := range fields {
		if len(form[f]) > 1 {
			return badRequest("a form field was sent twice")
		}
	}
	return nil
}

// formAuthority checks a form's authority over c: its link token, or for
// a signed-in approver the form token made for them and c.
func (h *Handler) formAuthority(c pending.Call, who *signin.Approver, form url.Values) (pageAuthority, error) {
	if err := fieldsOnce(form, "token", "csrf"); err != nil {
		return pageAuthority{}, err
	}
	tokens, forms := form["token"], form["csrf"]
	switch {
	case len(tokens) == 1 && len(forms) == 0:
		if err := h.signer.Check(tokens[0], c, h.now()); err != nil {
			return pageAuthority{}, err
		}
		return pageAuthority{who: who, token: tokens[0]}, nil
	case len(forms) == 1 && len(tokens) == 0 && who != nil:
		if !h.signer.CheckFormToken(forms[0], who.Name, c.ID) {
			return pageAuthority{}, errCSRF
		}
		return pageAuthority{who: who}, nil
	case len(forms) > 0:
		return pageAuthority{}, errCSRF
	}
	return pageAuthority{}, ErrTokenInvalid
}

// writeErrorPage answers a refused page request. A 409 shows the call as
// it now stands, so a late approver sees who decided and how.
func (h *Handler) writeErrorPage(w http.ResponseWriter, a answer) {
	data := pageData{Title: titleFor(a), Message: a.msg, Tone: "bad"}
	if a.call != nil {
		data.Tone = "warn"
		data.Call = h.view(*a.call)
		if a.call.State == pending.Waiting {
			// The store refused a waiting call: its expiry passed, and the
			// sweeper has not marked it yet.
			data.Call.Status, data.Call.StatusClass = statusText(pending.Expired), "bad"
		}
	}
	if a.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate approvals"`)
	}
	h.render(w, a.status, data)
}
