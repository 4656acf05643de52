package decisionlog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	stdstrings "strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/server"
	"github.com/open-policy-agent/opa/v1/storage"
)

// The plugin builds an AST of every event and evaluates the mask and drop
// queries on it before writing it: most of a console event's cost, all of
// it spent for nothing when the policy has no mask or drop rules. Events
// are then written directly, as the same record OPA's console logger
// writes (TestDirectMatchesPlugin holds the two together); with a log
// service configured, or with mask or drop rules in force, every event
// goes through the plugin.

// plainPolicy reports whether c defines nothing at the mask and drop
// paths, by rules or by data.
func plainPolicy(ctx context.Context, c *ast.Compiler, store storage.Store, paths ...string) (bool, error) {
	for _, p := range paths {
		ref, ok := storage.ParsePathEscaped(p)
		if !ok {
			return false, fmt.Errorf("bad decision path %q", p)
		}
		if len(c.GetRules(ref.Ref(ast.DefaultRootDocument))) > 0 {
			return false, nil
		}
		_, err := storage.ReadOne(ctx, store, ref)
		switch {
		case err == nil:
			return false, nil
		case !storage.IsNotFound(err):
			return false, err
		}
	}
	return true, nil
}

// writeDirect writes info to the console as OPA's plugin would: message
// "Decision Log", the event's fields as eventToFields lays them out.
func (l *Logger) writeDirect(ctx context.Context, info *server.Info) {
	h := l.opts.Console
	if h == nil || !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 14)
	str := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	str("type", logs.DecisionLogType)
	str("timestamp", info.Timestamp.UTC().Format(time.RFC3339Nano))
	str("decision_id", info.DecisionID)
	str("trace_id", info.TraceID)
	str("span_id", info.SpanID)
	if labels := l.manager.Labels(); len(labels) > 0 {
		attrs = append(attrs, slog.Any("labels", labels))
	}
	if len(info.Bundles) > 0 {
		b := make(map[string]logs.BundleInfoV1, len(info.Bundles))
		for name, bi := range info.Bundles {
			b[name] = logs.BundleInfoV1{Revision: bi.Revision}
		}
		attrs = append(attrs, slog.Any("bundles", b))
	}
	str("path", info.Path)
	if info.Input != nil {
		attrs = append(attrs, slog.Any("input", *info.Input))
	}
	if info.Results != nil {
		attrs = append(attrs, slog.Any("result", *info.Results))
	}
	if info.Error != nil {
		str("error", info.Error.Error())
	}
	str("requested_by", info.RemoteAddr)
	if info.Metrics != nil {
		if m := info.Metrics.All(); len(m) > 0 {
			attrs = append(attrs, slog.Any("metrics", m))
		}
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "Decision Log", 0)
	r.AddAttrs(attrs...)
	if err := h.Handle(ctx, r); err != nil {
		l.counts.errs.Add(1)
		l.opts.Logger.Error("decision log: event not written", "decision_id", info.DecisionID, "error", fmt.Errorf("console: %w", err))
	}
}

// writeDecision writes a decision event on the direct path, its input and
// result encoded straight from toolgate's types (encode.go).
func (l *Logger) writeDecision(ctx context.Context, d *Decision) {
	h := l.opts.Console
	if h == nil || !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	if l.labels == nil {
		labels, err := json.Marshal(l.manager.Labels())
		if err != nil {
			l.counts.errs.Add(1)
			return
		}
		l.labels = labels
	}
	b, err := appendInput(l.buf[:0], &d.Input, l.opts.Arguments)
	if err != nil {
		l.counts.errs.Add(1)
		l.opts.Logger.Error("decision log: event not written", "decision_id", d.ID, "error", err)
		return
	}
	n := len(b)
	b = appendResult(b, d.Result, d.Err)
	m := len(b)
	b = append(b, `{"timer_rego_query_eval_ns":`...)
	b = strconv.AppendInt(b, d.Elapsed.Nanoseconds(), 10)
	b = append(b, '}')
	k := len(b)
	if d.Revision != "" {
		b = append(b, `{"`+bundleName+`":{"revision":`...)
		b = appendString(b, d.Revision)
		b = append(b, "}}"...)
	}
	l.buf = b
	attrs := make([]slog.Attr, 0, 13)
	str := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	str("type", logs.DecisionLogType)
	str("timestamp", d.Time.UTC().Format(time.RFC3339Nano))
	str("decision_id", d.ID)
	str("trace_id", d.TraceID)
	str("span_id", d.SpanID)
	attrs = append(attrs, slog.Any("labels", l.labels))
	if len(b) > k {
		attrs = append(attrs, slog.Any("bundles", json.RawMessage(b[k:])))
	}
	str("path", PathDecision)
	attrs = append(attrs,
		slog.Any("input", json.RawMessage(b[:n])),
		slog.Any("result", json.RawMessage(b[n:m])))
	str("requested_by", d.RequestedBy)
	attrs = append(attrs, slog.Any("metrics", json.RawMessage(b[m:k])))
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "Decision Log", 0)
	r.AddAttrs(attrs...)
	if err := h.Handle(ctx, r); err != nil {
		l.counts.errs.Add(1)
		l.opts.Logger.Error("decision log: event not written", "decision_id", d.ID, "error", fmt.Errorf("console: %w", err))
	}
}

// maskPath and dropPath are the data paths of the mask and drop rules, as
// the plugin reads its mask_decision and drop_decision settings.
func (l *Logger) maskPath() string { return decisionPath(l.opts.MaskDecision, "/system/log/mask") }
func (l *Logger) dropPath() string { return decisionPath(l.opts.DropDecision, "/system/log/drop") }

func decisionPath(p, def string) string {
	if p == "" {
		return def
	}
	return "/" + stdstrings.TrimPrefix(p, "/")
}
