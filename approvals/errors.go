package approvals

import (
	"errors"
	"log/slog"
	"net/http"
	"os"

	"github.com/toolgate/toolgate/pending"
)

// httpError is a refusal whose status is known where it is made.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

var (
	errNoRoute         = &httpError{http.StatusNotFound, "no such page"}
	errUnauthenticated = &httpError{http.StatusUnauthorized, "missing or unknown approver key"}
	errSelfApproval    = &httpError{http.StatusForbidden, "an approver cannot approve their own call (rejecting it is allowed)"}
	errCrossOrigin     = &httpError{http.StatusForbidden, "cross-origin form posts are refused; open the approval link and decide on its page"}
	errContentType     = &httpError{http.StatusUnsupportedMediaType, "the form must be sent as application/x-www-form-urlencoded"}
)

func badRequest(msg string) error { return &httpError{http.StatusBadRequest, msg} }

// unreadable is the error for a body that could not be read: 408 when it
// did not arrive in time (the listener's body deadline), 400 otherwise.
func unreadable(err error, msg string) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &httpError{http.StatusRequestTimeout, "the request body did not arrive in time"}
	}
	return badRequest(msg)
}

// answer is what a failed request is told.
type answer struct {
	status int
	msg    string
	call   *pending.Call // the call as it now stands (409 only)
}

// classify turns an error into its answer. It is the one place where errors
// become statuses. Anything it does not recognise came from the store (an
// outage, a timeout) and is 503: a decision that was not recorded must
// never look like a success (docs/security.md, R06).
func classify(err error, method string) answer {
	var (
		he  *httpError
		se  *pending.StateError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &he):
		return answer{status: he.status, msg: he.msg}
	case errors.Is(err, ErrTokenExpired):
		return answer{status: http.StatusForbidden, msg: "this approval link has expired"}
	case errors.Is(err, ErrTokenInvalid):
		return answer{status: http.StatusForbidden, msg: "this approval link is not valid for this call"}
	case errors.Is(err, pending.ErrNotFound):
		return answer{status: http.StatusNotFound, msg: "unknown call (it may have expired, or the store lost it)"}
	case errors.As(err, &se):
		c := se.Call
		return answer{status: http.StatusConflict, msg: "this call is no longer waiting for a decision", call: &c}
	case errors.Is(err, pending.ErrConflict):
		return answer{status: http.StatusConflict, msg: "this call is no longer waiting for a decision"}
	case errors.As(err, &mbe):
		return answer{status: http.StatusRequestEntityTooLarge, msg: "request body too large"}
	case method == http.MethodPost:
		return answer{status: http.StatusServiceUnavailable, msg: "decision not recorded, try again"}
	default:
		return answer{status: http.StatusServiceUnavailable, msg: "the approval store is unavailable, try again"}
	}
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
