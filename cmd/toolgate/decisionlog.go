package main

import (
	"context"
	"crypto/rand"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
)

// decisionLog is the decision log (log.decisions): the proxy's decisions
// and the approvals' audit records, one stream, through OPA's decision-log
// plugin. A nil *decisionLog (console off, no service) logs nothing.
type decisionLog struct {
	l      *decisionlog.Logger
	engine *policy.Engine
}

func newDecisionLog(ctx context.Context, cfg *config.Config, engine *policy.Engine, reg prometheus.Registerer, log *slog.Logger) (*decisionLog, error) {
	d := cfg.Log.Decisions
	if !d.ConsoleOn() && d.Service.URL == "" {
		return nil, nil
	}
	opts := decisionlog.Options{
		Policy:       engine.Compiled,
		MaskDecision: d.MaskDecision,
		DropDecision: d.DropDecision,
		Arguments:    cfg.Log.Arguments,
		// Like OPA's labels.id: one per process, so events from replicas
		// can be told apart.
		InstanceID: rand.Text(),
		Labels:     map[string]string{"toolgate_version": version},
		Registerer: reg,
		Logger:     log,
	}
	if d.ConsoleOn() {
		// The decision log is an audit stream: log.level does not hide it.
		opts.Console = alwaysOn{log.Handler()}
		if h, ok := log.Handler().(logHandler); ok {
			opts.ConsoleWriter = h.out
		}
	}
	if s := d.Service; s.URL != "" {
		opts.Service = decisionlog.Service{
			URL: s.URL, Resource: s.Resource, Token: s.Token.Reveal(), Timeout: s.Timeout.Std(),
			BufferBytes: s.BufferBytes.Int64(), MinDelay: s.MinDelay.Std(), MaxDelay: s.MaxDelay.Std(),
		}
	}
	l, err := decisionlog.New(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &decisionLog{l: l, engine: engine}, nil
}

// LogDecision implements proxy.DecisionLogger.
func (d *decisionLog) LogDecision(ctx context.Context, r proxy.DecisionRecord) {
	d.l.LogDecision(ctx, decisionlog.Decision{
		ID: r.CallID, Time: r.Time, Input: r.Input, Result: r.Decision, Err: r.Err,
		Revision: d.engine.Revision(), Elapsed: r.Elapsed, RequestedBy: r.RemoteAddr,
		TraceID: r.TraceID, SpanID: r.SpanID, DryRun: r.DryRun,
		Hook: r.Hook, UpdatedBy: r.UpdatedBy, ArgsDigest: r.ArgsDigest, UpdatedArgsDigest: r.UpdatedArgsDigest,
		HeaderBytes: r.HeaderBytes, ArgumentBytes: r.ArgumentBytes,
	})
}

// forProxy is the proxy's DecisionLog: a nil interface when there is none.
func (d *decisionLog) forProxy() proxy.DecisionLogger {
	if d == nil {
		return nil
	}
	return d
}

// forApprovals is the approvals handler's Audit hook; nil leaves the audit
// records in the ordinary log.
func (d *decisionLog) forApprovals() func(context.Context, approvals.AuditRecord) {
	if d == nil {
		return nil
	}
	return func(ctx context.Context, a approvals.AuditRecord) {
		d.l.LogAudit(ctx, decisionlog.Audit{
			CallID: a.CallID, Outcome: a.Outcome, DecidedBy: a.DecidedBy, Comment: a.Comment, Via: a.Via,
			At: a.At, Tool: a.Tool, Upstream: a.Upstream, Subject: a.Subject, RequestedBy: a.RemoteAddr,
			Groups: a.Groups, Progress: a.Progress, Partial: a.Partial,
		})
	}
}

// close writes what is queued and, with a service, uploads what is
// buffered until ctx ends.
func (d *decisionLog) close(ctx context.Context) {
	if d != nil {
		d.l.Close(ctx)
	}
}

// alwaysOn passes every record to h whatever h's level.
type alwaysOn struct{ slog.Handler }

func (alwaysOn) Enabled(context.Context, slog.Level) bool { return true }
