package proxy

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/policy"
)

// DecisionLogger receives the record of every decided call: the decision
// log (README, decision logs). It is called on every call's path, so it must not
// block; masking, encoding and writing are the implementation's, off that
// path. cmd/toolgate wires OPA's decision-log plugin behind it.
type DecisionLogger interface {
	LogDecision(context.Context, DecisionRecord)
}

// DecisionRecord is one decided call.
type DecisionRecord struct {
	CallID string
	Time   time.Time
	// Input is a copy of the policy input the call was decided on: the
	// logger may keep it. Its maps are shared and never changed.
	Input    policy.Input
	Decision policy.Decision
	// Err is the policy error when the policy could not decide (the call is
	// then denied).
	Err     error
	Elapsed time.Duration
	// RemoteAddr is the agent's address as the listener saw it.
	RemoteAddr string
	// TraceID and SpanID are the request's span, when it is traced.
	TraceID, SpanID string
	// DryRun: the call is forwarded whatever the decision (Upstream.DryRun).
	DryRun bool
	// Hook is what the PreToolUse hooks said (allow, ask, deny, none; ""
	// when none was asked); when one rewrote the arguments, UpdatedBy
	// names it and the digests are of the arguments before and after.
	Hook, UpdatedBy, ArgsDigest, UpdatedArgsDigest string
	// HeaderBytes and ArgumentBytes are what Input holds beyond its fixed
	// part: the request's headers, and its arguments as parsed (what the
	// body was counted as against the body budget). A logger that queues
	// records bounds its queue by them.
	HeaderBytes, ArgumentBytes int64
}

// headerBytes is about what h holds: its names and values.
func headerBytes(h http.Header) int64 {
	var n int
	for k, vs := range h {
		n += len(k)
		for _, v := range vs {
			n += len(v) + 16
		}
	}
	return int64(n)
}

// logDecision hands the decision of c to the decision log, if there is one.
// ctx is the decision's context (its span, if traced, names the event);
// it may already be done.
func (s *Server) logDecision(ctx context.Context, r *http.Request, c *call, elapsed time.Duration, evalErr error) {
	dl := s.cfg.DecisionLog
	if dl == nil {
		return
	}
	rec := DecisionRecord{
		CallID: c.id, Time: s.cfg.Now(), Input: *c.input, Decision: c.decision,
		Err: evalErr, Elapsed: elapsed, RemoteAddr: r.RemoteAddr, DryRun: c.up.DryRun,
		HeaderBytes: headerBytes(r.Header), ArgumentBytes: max(c.bodyHeld, int64(len(c.body))) + int64(len(r.URL.RawQuery)),
	}
	if h := c.hooks; h != nil {
		rec.Hook, rec.UpdatedBy, rec.ArgsDigest, rec.UpdatedArgsDigest = h.Decision, h.UpdatedBy, h.ArgsDigest, h.UpdatedArgsDigest
	}
	// The call goes on after this; the record must not see later changes.
	if t := rec.Input.Tool; t != nil {
		tc := *t
		rec.Input.Tool = &tc
	}
	if m := rec.Input.MCP; m != nil {
		mc := *m
		rec.Input.MCP = &mc
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		rec.TraceID, rec.SpanID = sc.TraceID().String(), sc.SpanID().String()
	}
	dl.LogDecision(r.Context(), rec)
}
