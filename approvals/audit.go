package approvals

import (
	"context"
	"log/slog"
	"time"

	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/pending"
)

// AuditVias are the ways a decision is made, as AuditRecord.Via names
// them: a bare link, the API, the identity source of a signed-in approver
// (header, oidc), a Slack click, or the requester's own confirmation.
var AuditVias = []string{viaLink, viaAPI, signin.ViaHeader, signin.ViaOIDC, viaSlack, viaRequester}

// AuditRecord is the audit record of one approval decision: who decided
// which call, how, when and with what comment.
type AuditRecord struct {
	CallID    string
	Outcome   string // "approved" or "rejected": the decision made
	DecidedBy string // an approver's name, or "link" (a link without identity)
	Comment   string
	Via       string // one of AuditVias
	At        time.Time
	// Groups are the approver's groups when they were known.
	Groups []string
	// Progress, for a call that takes several approvals, says how far it
	// is after this one ("1 of 2 approvals"); Partial is true while the
	// call still waits for more.
	Progress string
	Partial  bool
	Tool     string
	Upstream string
	Subject  string
	// RemoteAddr is the approver's address as the listener saw it.
	RemoteAddr string
}

// audit writes the audit record of a decision: to Config.Audit when set
// (the decision log, beside the call's decision event), else to the
// Logger as a record with msg "approval".
func (h *Handler) audit(ctx context.Context, remote string, c pending.Call, d decision, by string, at time.Time) {
	outcome := string(d.to)
	rec := AuditRecord{
		CallID: c.ID, Outcome: outcome, DecidedBy: by, Comment: d.comment, Via: d.via, At: at,
		Tool: c.Tool, Upstream: c.Upstream, Subject: c.Subject, RemoteAddr: remote,
		Progress: progress(c, d.info), Partial: c.State == pending.Waiting,
	}
	if d.who != nil {
		rec.Groups = d.who.Groups
	}
	if h.auditTo != nil {
		h.auditTo(ctx, rec)
		return
	}
	LogAudit(ctx, h.log, rec)
}

// LogAudit writes rec to log as a record with msg "approval": where audit
// records go when no decision log takes them.
func LogAudit(ctx context.Context, log *slog.Logger, rec AuditRecord) {
	log.LogAttrs(ctx, slog.LevelInfo, "approval",
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
		slog.Any("groups", rec.Groups),
		slog.String("progress", rec.Progress),
		slog.Bool("partial", rec.Partial),
	)
}
