package approvals

import (
	"errors"
	"mime"
	"net/http"
	"net/url"

	"github.com/toolgate/toolgate/pending"
)

// page adapts a handler of the HTML pages: a returned error becomes an
// error page with the status classify gives it.
func (h *Handler) page(fn func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			a := classify(err, r.Method)
			h.logRefusal(r, a, err, viaLink)
			h.writeErrorPage(w, a)
		}
	}
}

// showPage serves GET and HEAD /approvals/{id}?token=T. It only reads:
// previewers and mail scanners fetch every link (docs/security.md, F09 and
// INV-6).
func (h *Handler) showPage(w http.ResponseWriter, r *http.Request) error {
	id, err := callID(r)
	if err != nil {
		return err
	}
	tokens := r.URL.Query()["token"]
	c, err := h.store.Get(r.Context(), id)
	if err != nil {
		return err
	}
	if len(tokens) != 1 {
		return ErrTokenInvalid
	}
	if err := h.signer.Check(tokens[0], c, h.now()); err != nil {
		return err
	}
	data := pageData{Title: "Approval requested", Call: h.view(c)}
	if c.State == pending.Waiting {
		data.Forms = true
		data.Token = tokens[0]
		// Relative, so the form posts back to this page's path even when a
		// proxy in front serves the listener under a prefix; "./" keeps an
		// ID with a colon from reading as a URL scheme.
		data.Action = "./" + url.PathEscape(id)
	} else {
		data.Title = "Approval request"
		data.Message = "This call is no longer waiting for a decision."
	}
	h.render(w, http.StatusOK, data)
	return nil
}

// decideByLink serves POST /approvals/{id}: the form of the page.
func (h *Handler) decideByLink(w http.ResponseWriter, r *http.Request) error {
	id, err := callID(r)
	if err != nil {
		return err
	}
	// The token is the real authority; refusing cross-site posts and any
	// body a cross-site page could send without a form (JSON, text) is
	// defence in depth (docs/security.md, F10).
	if err := h.csrf.Check(r); err != nil {
		return errCrossOrigin
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return errContentType
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return err
		}
		return unreadable(err, "the form could not be read")
	}
	// Only the body counts (PostForm, not Form): the link's ?token= is not
	// a form field, and a field sent twice is refused rather than guessed.
	form := r.PostForm
	c, err := h.store.Get(r.Context(), id)
	if err != nil {
		return err
	}
	if len(form["token"]) != 1 {
		return ErrTokenInvalid
	}
	if err := h.signer.Check(form.Get("token"), c, h.now()); err != nil {
		return err
	}
	// The decision is validated only after the token: without a good token
	// nobody learns anything about the form.
	if len(form["decision"]) > 1 || len(form["comment"]) > 1 {
		return badRequest("a form field was sent twice")
	}
	to, err := parseDecision(form.Get("decision"))
	if err != nil {
		return err
	}
	comment := form.Get("comment")
	if err := checkComment(comment); err != nil {
		return err
	}
	decided, err := h.decide(r, id, to, linkDecider, comment, viaLink)
	if err != nil {
		return err
	}
	data := pageData{Title: "Rejected", Message: "The call was rejected; it will not be forwarded.", Tone: "bad", Call: h.view(decided)}
	if decided.State == pending.Approved {
		data.Title, data.Message, data.Tone = "Approved", "The call was approved; it will be forwarded once.", "ok"
	}
	h.render(w, http.StatusOK, data)
	return nil
}

// writeErrorPage answers a refused page request. A 409 shows the call as
// it now stands, so a late approver sees who decided and how.
func (h *Handler) writeErrorPage(w http.ResponseWriter, a answer) {
	data := pageData{Title: errorTitle(a.status), Message: a.msg, Tone: "bad"}
	if a.call != nil {
		data.Tone = "warn"
		data.Call = h.view(*a.call)
		if a.call.State == pending.Waiting {
			// The store refused a waiting call: its expiry passed, and the
			// sweeper has not marked it yet.
			data.Call.Status, data.Call.StatusClass = statusText(pending.Expired), "bad"
		}
	}
	h.render(w, a.status, data)
}

func errorTitle(status int) string {
	switch status {
	case http.StatusForbidden:
		return "Link not valid"
	case http.StatusNotFound:
		return "Unknown call"
	case http.StatusConflict:
		return "Already decided"
	case http.StatusServiceUnavailable:
		return "Try again"
	}
	return http.StatusText(status)
}
