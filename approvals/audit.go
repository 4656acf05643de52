package approvals

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// AuditRecord is the audit record of one approval decision: who decided
// which call, how, when and with what comment.
type AuditRecord struct {
	CallID    string
	Outcome   string // "approved" or "rejected"
	DecidedBy string // an approver's name, or "link"
	Comment   string
	Via       string // "link" or "api"
	At        time.Time
	Tool      string
	Upstream  string
	Subject   string
	// RemoteAddr is the approver's address as the listener saw it.
	RemoteAddr string
}

// audit writes the audit record of a decision: to Config.Audit when set
// (the decision log, beside the call's decision event), else to the
// Logger as a record with msg "approval".
func (h *Handler) audit(ctx context.Context, r *http.Request, c pending.Call, via string, at time.Time) {
	rec := AuditRecord{
		CallID: c.ID, Outcome: string(c.State), DecidedBy: c.DecidedBy, Comment: c.Comment, Via: via, At: at,
		Tool: c.Tool, Upstream: c.Upstream, Subject: c.Subject, RemoteAddr: r.RemoteAddr,
	}
	if h.auditTo != nil {
		h.auditTo(ctx, rec)
		return
	}
	h.log.LogAttrs(ctx, slog.LevelInfo, "approval",
		slog.String("call_id", rec.CallID),
		slog.String("outcome", rec.Outcome),
		slog.String("decided_by", rec.DecidedBy),
		slog.String("comment", rec.Comment),
		slog.String("via", rec.Via),
		slog.Time("at", rec.At),
		slog.String("tool", rec.Tool),
		slog.String("upstream", rec.Upstream),
		slog.String("subject", rec.Subject),
		slog.String("remote_addr", rec.RemoteAddr),
	)
}
