package approvals

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/toolgate/toolgate/pending"
)

const (
	// linkDecider is decided_by for decisions made through a link: the link
	// proves the token, not who holds it (see the package doc).
	linkDecider = "link"

	viaLink = "link"
	viaAPI  = "api"

	maxBodyBytes    = 64 << 10
	maxCommentChars = 2000
	maxCallIDBytes  = 128

	// decideTimeout bounds a Decide that no longer depends on the client.
	decideTimeout = 10 * time.Second
)

// decide records a decision through the store (whose first decision wins),
// writes the audit record and tells OnDecision. The store's error comes
// back unchanged for classify.
func (h *Handler) decide(r *http.Request, id string, to pending.State, by, comment, via string) (pending.Call, error) {
	// Once sent, a decision is recorded or refused whole: an approver who
	// closes the tab must not cut the store call off halfway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), decideTimeout)
	defer cancel()
	c, err := h.store.Decide(ctx, id, pending.Decision{To: to, By: by, Comment: comment})
	if err != nil {
		return pending.Call{}, err
	}
	at := c.DecidedAt
	if at.IsZero() {
		at = h.now()
	}
	h.audit(ctx, r, c, via, at)
	if h.onDecision != nil {
		h.onDecision(c)
	}
	return c, nil
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
	if id == "" || len(id) > maxCallIDBytes || strings.IndexFunc(id, notIDRune) >= 0 {
		return "", pending.ErrNotFound
	}
	return id, nil
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
