package approvals

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

const (
	// linkDecider is decided_by for decisions made through a link on a
	// listener without identity: the link proves the token, not who holds
	// it (see the package doc).
	linkDecider = "link"

	// How a decision was made (AuditRecord.Via): the identity source of
	// the approver, or a bare link.
	viaLink = "link"
	viaAPI  = "api"
	viaKey  = "key"
	// viaRequester: the caller's own human, on the confirmation page.
	viaRequester = "requester"

	maxBodyBytes    = 64 << 10
	maxCommentChars = 2000
	maxCallIDBytes  = 128

	// decideTimeout bounds a Decide that no longer depends on the client.
	decideTimeout = 10 * time.Second
)

// decision is a decision about to be made: on which call, by whom (nil:
// a link without identity), how, and through what.
type decision struct {
	call    pending.Call
	info    callinfo.Info
	who     *signin.Approver
	to      pending.State
	comment string
	via     string // for the audit record: link, api, header, oidc, slack
}

// decide checks that d.who may make the decision (eligible), records it
// through the store (whose first decision wins, and which counts each
// approver once), writes the audit record and, when the call left
// waiting, tells OnDecision. The store's error comes back unchanged for
// classify. A call still waiting after an approval is a partial approval:
// more approvers are needed.
func (h *Handler) decide(ctx context.Context, remote string, d decision) (pending.Call, error) {
	counts, err := eligible(d.call, d.info, d.who, d.to)
	if err != nil {
		return pending.Call{}, err
	}
	by := linkDecider
	if d.who != nil {
		by = d.who.Name
	}
	if d.to == pending.Approved && d.call.State == pending.Waiting && approvedBy(d.call, by) {
		return d.call, nil // counted already: nothing to record (the store would change nothing either)
	}
	// Once sent, a decision is recorded or refused whole: an approver who
	// closes the tab must not cut the store call off halfway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), decideTimeout)
	defer cancel()
	c, err := h.record(ctx, d.call.ID, pending.Decision{To: d.to, By: by, Comment: d.comment, Counts: counts})
	if err == nil {
		h.recorded(ctx, remote, c, d, by)
		return c, nil
	}
	if se := (*pending.StateError)(nil); errors.As(err, &se) && se.Ended && h.onDecision != nil {
		// The call was past its expiry, and this refused decision ended
		// it: its end is reported here, as no sweep will.
		h.onDecision(se.Call)
	}
	if storeAway(err) {
		// Asked of a store that did not answer (asked again already, see
		// pending.RedisStore.Decide): the decision may stand all the same.
		return pending.Call{}, &outcomeUnknown{err}
	}
	if errors.Is(err, pending.ErrNotReplicated) {
		// The decision was made on the primary, only not confirmed by the
		// replicas: it is audited and reported as any decision, since it
		// will run unless a failover loses it; the approver still hears
		// that it is unconfirmed.
		if now, gerr := h.store.Get(ctx, d.call.ID); gerr == nil && (now.DecidedBy == by || pending.ApprovedBy(now.Approvals, by)) &&
			(now.State != d.call.State || len(now.Approvals) != len(d.call.Approvals)) {
			if now.State == pending.Executing && d.to == pending.Approved {
				now.State = pending.Approved // claimed with the approval (Config.Decide): what was decided is the approval
			}
			h.recorded(ctx, remote, now, d, by)
		}
	}
	return pending.Call{}, err
}

// outcomeUnknown is a decision sent to a store that did not answer: it
// may have been recorded (its reply lost) or not.
type outcomeUnknown struct{ err error }

func (e *outcomeUnknown) Error() string { return "decision outcome unknown: " + e.err.Error() }
func (e *outcomeUnknown) Unwrap() error { return e.err }

// storeAway reports whether err is the store failing to answer, rather
// than one of its answers (a conflict, an unknown call, a refusal).
func storeAway(err error) bool {
	var se *pending.StateError
	return !errors.As(err, &se) && !errors.Is(err, pending.ErrConflict) && !errors.Is(err, pending.ErrNotFound) &&
		!errors.Is(err, pending.ErrDamaged) && !errors.Is(err, pending.ErrNotReplicated)
}

// recorded audits a decision the store recorded, and reports a call it
// moved out of waiting.
func (h *Handler) recorded(ctx context.Context, remote string, c pending.Call, d decision, by string) {
	at := c.DecidedAt
	if c.State == pending.Waiting || at.IsZero() {
		at = h.now()
	}
	h.audit(ctx, remote, c, d, by, at)
	if h.onDecision != nil && c.State != pending.Waiting {
		h.onDecision(c)
	}
}

// parseDecision reads "approve" or "reject", exactly.
func parseDecision(s string) (pending.State, error) {
	switch s {
	case "approve":
		return pending.Approved, nil
	case "reject":
		return pending.Rejected, nil
	case "":
		return "", badRequest(`missing decision: send "approve" or "reject"`)
	}
	return "", badRequest(`unknown decision: send "approve" or "reject"`)
}

func checkComment(s string) error {
	if !utf8.ValidString(s) {
		return badRequest("the comment is not valid UTF-8")
	}
	if utf8.RuneCountInString(s) > maxCommentChars {
		return badRequest("the comment is longer than 2000 characters")
	}
	return nil
}

// callID is the {id} of the route. An ID that no store could hold is an
// unknown call without asking the store; chi hands over the escaped form,
// so "%2F" and the like end here too.
func callID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "id")
	if !validCallID(id) {
		return "", pending.ErrNotFound
	}
	return id, nil
}

// validCallID reports whether id is one a store could hold: 1 to
// maxCallIDBytes of A-Z a-z 0-9 - _ . :. Every entry point checks it
// before the store sees id, so a Redis key never holds a byte toolgate
// did not mean to put there.
func validCallID(id string) bool {
	return id != "" && len(id) <= maxCallIDBytes && strings.IndexFunc(id, notIDRune) < 0
}

// callIDParam is the route's {id} as sent, for logs.
func callIDParam(r *http.Request) string {
	id := chi.URLParam(r, "id")
	if len(id) > maxCallIDBytes {
		id = id[:maxCallIDBytes]
	}
	return id
}

func notIDRune(r rune) bool {
	return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.' || r == ':')
}
