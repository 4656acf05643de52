package approvals

import (
	"errors"
	"log/slog"
	"net/http"
	"os"

	"github.com/toolgate/toolgate/pending"
)

// httpError is a refusal whose status is known where it is made. title
// heads the error page; "" leaves the status's usual title.
type httpError struct {
	status int
	title  string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

var (
	errNoRoute         = &httpError{status: http.StatusNotFound, title: "Page not found", msg: "no such page"}
	errUnauthenticated = &httpError{status: http.StatusUnauthorized, msg: "missing or unknown approver key"}
	errUnknownGrant    = &httpError{status: http.StatusNotFound, title: "Unknown grant", msg: "unknown grant (it may have expired or been revoked, or, during an upgrade, have been made by another release: revoke it there)"}
	errSelfApproval    = &httpError{
		status: http.StatusForbidden, title: "You cannot approve your own call",
		msg: "an approver cannot approve their own call (rejecting it is allowed)",
	}
	errCrossOrigin = &httpError{
		status: http.StatusForbidden, title: "Request refused",
		msg: "cross-origin form posts are refused; open the approval link and decide on its page",
	}
	errContentType = &httpError{
		status: http.StatusUnsupportedMediaType, title: "Request refused",
		msg: "the form must be sent as application/x-www-form-urlencoded",
	}

	// Approver identity (signed-in approvers, calls that name their approvers).
	errSignInRequired = &httpError{status: http.StatusUnauthorized, title: "Sign-in needed", msg: "sign in to decide this call"}
	errNotEligible    = &httpError{
		status: http.StatusForbidden, title: "Not one of this call's approvers",
		msg: "this call names its approvers, and you are not one of them",
	}
	errNeedsIdentity = &httpError{
		status: http.StatusForbidden, title: "Sign-in needed",
		msg: "this call names its approvers: only a signed-in approver can decide it",
	}
	errQuorumNeedsIdentity = &httpError{
		status: http.StatusForbidden, title: "Sign-in needed",
		msg: "this call needs approvals from several named approvers: approve it signed in, by API key or in Slack; this link can only reject it",
	}
	errCSRF = &httpError{
		status: http.StatusForbidden, title: "Form expired",
		msg: "the form could not be verified; reload the page and decide again",
	}
)

func badRequest(msg string) error {
	return &httpError{status: http.StatusBadRequest, title: "Request not understood", msg: msg}
}

// unreadable is the error for a body that could not be read: 408 when it
// did not arrive in time (the listener's body deadline), 400 otherwise.
func unreadable(err error, msg string) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &httpError{status: http.StatusRequestTimeout, title: "Request too slow", msg: "the request body did not arrive in time"}
	}
	return badRequest(msg)
}

// answer is what a failed request is told.
type answer struct {
	status int
	title  string // the error page's heading (titleFor)
	msg    string
	call   *pending.Call // the call as it now stands (409 only)
}

// classify turns an error into its answer. It is the one place where errors
// become statuses and titles. Anything it does not recognise came from the
// store (an outage, a timeout) and is 503: a decision that was not recorded
// must never look like a success (docs/security.md, R06).
func classify(err error, method string) answer {
	var (
		he  *httpError
		se  *pending.StateError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &he):
		return answer{status: he.status, title: he.title, msg: he.msg}
	case errors.Is(err, ErrTokenExpired):
		return answer{status: http.StatusForbidden, title: "Link expired", msg: "this approval link has expired"}
	case errors.Is(err, ErrTokenInvalid):
		return answer{status: http.StatusForbidden, title: "Link not valid", msg: "this approval link is not valid for this call"}
	case errors.Is(err, pending.ErrNotFound):
		return answer{status: http.StatusNotFound, title: "Unknown call", msg: "unknown call (it may have expired, or the store lost it)"}
	case errors.Is(err, pending.ErrDamaged):
		// Not the store being away: "try again" would not help.
		return answer{status: http.StatusInternalServerError, title: "Call unreadable", msg: "the store holds this call in a form toolgate cannot read; it cannot be decided and will not run"}
	case errors.As(err, &se):
		c := se.Call
		return answer{status: http.StatusConflict, title: "Already decided", msg: "this call is no longer waiting for a decision", call: &c}
	case errors.Is(err, pending.ErrConflict):
		return answer{status: http.StatusConflict, title: "Already decided", msg: "this call is no longer waiting for a decision"}
	case errors.As(err, &mbe):
		return answer{status: http.StatusRequestEntityTooLarge, title: "Request too large", msg: "request body too large"}
	case errors.Is(err, pending.ErrNotReplicated):
		// Made on the Redis primary, not yet on enough replicas: it
		// stands unless a failover loses it, so "try again" would mislead.
		return answer{
			status: http.StatusServiceUnavailable, title: "Decision not confirmed",
			msg: "the decision was recorded but not yet confirmed by the store's replicas; it stands unless a failover loses it: reload the call before deciding again",
		}
	case errors.As(err, new(*outcomeUnknown)):
		// The store may have recorded it and lost its reply: "try again"
		// could decide twice what the approver meant once.
		return answer{
			status: http.StatusServiceUnavailable, title: "Decision outcome unknown",
			msg: "the approval store did not answer: the decision may or may not have been recorded; reload the call before deciding again",
		}
	case method == http.MethodPost:
		return answer{status: http.StatusServiceUnavailable, title: "Try again", msg: "decision not recorded, try again"}
	default:
		return answer{status: http.StatusServiceUnavailable, title: "Try again", msg: "the approval store is unavailable, try again"}
	}
}

// titleFor is the heading of a's error page: the title classify gave it,
// else the status's name. A 403 is never called "Link not valid" unless the
// link is what failed.
func titleFor(a answer) string {
	if a.title != "" {
		return a.title
	}
	if t := http.StatusText(a.status); t != "" {
		return t
	}
	return "Error"
}

// logRefusal records a refused request: client mistakes at Info, store
// failures at Error. Repeated 403s are how a guessed or leaked link shows.
func (h *Handler) logRefusal(r *http.Request, a answer, err error, via string) {
	level := slog.LevelInfo
	if a.status >= 500 {
		level = slog.LevelError
	}
	h.log.Log(r.Context(), level, "approval request refused", "call_id", callIDParam(r), "via", via,
		"method", r.Method, "status", a.status, "error", err.Error(), "remote_addr", r.RemoteAddr)
}
