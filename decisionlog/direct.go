package decisionlog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	if !l.consoleOn(ctx) {
		return
	}
	r := l.newRecord(info.Timestamp, info.DecisionID, info.TraceID, info.SpanID)
	if labels := l.manager.Labels(); len(labels) > 0 {
		r.any("labels", labels)
	}
	if len(info.Bundles) > 0 {
		b := make(map[string]logs.BundleInfoV1, len(info.Bundles))
		for name, bi := range info.Bundles {
			b[name] = logs.BundleInfoV1{Revision: bi.Revision}
		}
		r.any("bundles", b)
	}
	r.str("path", info.Path)
	if info.Input != nil {
		r.any("input", *info.Input)
	}
	if info.Results != nil {
		r.any("result", *info.Results)
	}
	if info.Error != nil {
		r.str("error", info.Error.Error())
	}
	r.str("requested_by", info.RemoteAddr)
	if info.Metrics != nil {
		if m := info.Metrics.All(); len(m) > 0 {
			r.any("metrics", m)
		}
	}
	l.emit(ctx, info.DecisionID, r)
}

// writeDecision writes a decision event on the direct path, its input and
// result encoded straight from toolgate's types (encode.go).
func (l *Logger) writeDecision(ctx context.Context, d *Decision) {
	if !l.consoleOn(ctx) {
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
	in := &d.Input
	if !l.opts.Arguments && !d.redacted {
		redacted := withoutArguments(d.Input) // LogDecision did it, for events it queued
		in = &redacted
	}
	b, err := in.AppendJSON(l.buf[:0], !l.opts.Arguments)
	if err != nil {
		l.counts.errs.Add(1)
		l.opts.Logger.Error("decision log: event not written", "decision_id", d.ID, "error", err)
		return
	}
	n := len(b)
	b = appendResult(b, d)
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
	if w := l.opts.ConsoleWriter; w != nil {
		l.writeLine(ctx, w, d, b, n, m, k)
		return
	}
	r := l.newRecord(d.Time, d.ID, d.TraceID, d.SpanID)
	r.any("labels", l.labels)
	if len(b) > k {
		r.any("bundles", json.RawMessage(b[k:]))
	}
	r.str("path", PathDecision)
	r.any("input", json.RawMessage(b[:n]))
	r.any("result", json.RawMessage(b[n:m]))
	r.str("requested_by", d.RequestedBy)
	r.any("metrics", json.RawMessage(b[m:k]))
	l.emit(ctx, d.ID, r)
}

// writeAudit writes an approval's audit event on the direct path: the
// record writeDirect writes for Audit.info, its input and result encoded
// straight from a (their keys in the order encoding/json sorts a map's),
// and with a ConsoleWriter the line the console handler would write.
func (l *Logger) writeAudit(ctx context.Context, a *Audit) {
	if !l.consoleOn(ctx) {
		return
	}
	if l.auditLabels == nil {
		// As the console handler writes the labels map writeDirect
		// gives it: without HTML escaping; none when there are none.
		l.auditLabels = []byte{}
		if labels := l.manager.Labels(); len(labels) > 0 {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(labels); err != nil {
				l.auditLabels = nil
				l.counts.errs.Add(1)
				return
			}
			l.auditLabels = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		}
	}
	b := append(l.buf[:0], `{"call_id":`...)
	b = appendString(b, a.CallID)
	b = append(b, `,"subject":`...)
	b = appendString(b, a.Subject)
	b = append(b, `,"tool":`...)
	b = appendString(b, a.Tool)
	b = append(b, `,"upstream":`...)
	b = appendString(b, a.Upstream)
	b = append(b, '}')
	n := len(b)
	b = append(b, `{"comment":`...)
	b = appendString(b, a.Comment)
	b = append(b, `,"decided_by":`...)
	b = appendString(b, a.DecidedBy)
	b = append(b, `,"groups":[`...)
	for i, g := range a.Groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, g)
	}
	b = append(b, `],"outcome":`...)
	b = appendString(b, a.Outcome)
	b = append(b, `,"partial":`...)
	b = strconv.AppendBool(b, a.Partial)
	b = append(b, `,"progress":`...)
	b = appendString(b, a.Progress)
	b = append(b, `,"via":`...)
	b = appendString(b, a.Via)
	b = append(b, '}')
	l.buf = b
	if w := l.opts.ConsoleWriter; w != nil {
		l.lineTo(ctx, w)
		line := appendLineHead(l.line, a.At, a.CallID)
		if len(l.auditLabels) > 0 {
			line = append(line, `,"labels":`...)
			line = append(line, l.auditLabels...)
		}
		line = appendField(line, "path", PathApproval)
		line = append(line, `,"input":`...)
		line = append(line, b[:n]...)
		line = append(line, `,"result":`...)
		line = append(line, b[n:]...)
		line = appendField(line, "requested_by", a.RequestedBy)
		l.line = append(line, "}\n"...)
		l.lineAdded(ctx)
		return
	}
	r := l.newRecord(a.At, a.CallID, "", "")
	if len(l.auditLabels) > 0 {
		r.any("labels", json.RawMessage(l.auditLabels))
	}
	r.str("path", PathApproval)
	r.any("input", json.RawMessage(b[:n]))
	r.any("result", json.RawMessage(b[n:]))
	r.str("requested_by", a.RequestedBy)
	l.emit(ctx, a.CallID, r)
}

// appendLineHead appends the start of a console line, as the console
// handler writes it: the time of writing, level, message and type, then
// the event's own time and ID.
func appendLineHead(line []byte, at time.Time, id string) []byte {
	line = append(line, `{"time":"`...)
	line = time.Now().AppendFormat(line, time.RFC3339Nano)
	line = append(line, `","level":"INFO","msg":"Decision Log","type":`...)
	line = appendString(line, logs.DecisionLogType)
	line = append(line, `,"timestamp":`...)
	line = appendString(line, at.UTC().Format(time.RFC3339Nano))
	return appendField(line, "decision_id", id)
}

// writeLine writes a decision as the console handler's JSON line, with
// the fields in the order of the record writeDecision builds; b holds the
// input, result, metrics and bundles JSON at the offsets n, m and k.
func (l *Logger) writeLine(ctx context.Context, w io.Writer, d *Decision, b []byte, n, m, k int) {
	l.lineTo(ctx, w)
	line := appendLineHead(l.line, d.Time, d.ID)
	line = appendField(line, "trace_id", d.TraceID)
	line = appendField(line, "span_id", d.SpanID)
	line = append(line, `,"labels":`...)
	line = append(line, l.labels...)
	if len(b) > k {
		line = append(line, `,"bundles":`...)
		line = append(line, b[k:]...)
	}
	line = appendField(line, "path", PathDecision)
	line = append(line, `,"input":`...)
	line = append(line, b[:n]...)
	line = append(line, `,"result":`...)
	line = append(line, b[n:m]...)
	line = appendField(line, "requested_by", d.RequestedBy)
	line = append(line, `,"metrics":`...)
	line = append(line, b[m:k]...)
	line = append(line, "}\n"...)
	l.line = line
	l.lineAdded(ctx)
}

// lineTo makes w the writer of the batch of lines, writing first what was
// gathered for another.
func (l *Logger) lineTo(ctx context.Context, w io.Writer) {
	if l.lineW != nil && l.lineW != w {
		l.flush(ctx)
	}
	l.lineW = w
}

// lineAdded counts a line appended to the batch, and writes the batch once
// it holds flushBytes.
func (l *Logger) lineAdded(ctx context.Context) {
	l.lines++
	if len(l.line) >= flushBytes {
		l.flush(ctx)
	}
}

// flushBytes is how much of a batch of lines the worker holds before it
// writes them: one write(2) for a batch rather than one per decision,
// which under load cost more than building the line.
const flushBytes = 32 << 10

// flush writes the lines writeLine gathered; the worker calls it after
// each batch of queued events, so a line waits no longer than its batch.
func (l *Logger) flush(ctx context.Context) {
	if len(l.line) == 0 {
		return
	}
	if _, err := l.lineW.Write(l.line); err != nil {
		l.counts.errs.Add(uint64(l.lines))
		l.opts.Logger.ErrorContext(ctx, "decision log: events not written", "events", l.lines, "error", fmt.Errorf("console: %w", err))
	}
	l.line, l.lines = l.line[:0], 0
}

// appendField appends ,"k":"v", left out when v is empty as the record's
// str leaves it out.
func appendField(b []byte, k, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',')
	b = appendString(b, k)
	b = append(b, ':')
	return appendString(b, v)
}

// record is a console record's fields.
type record struct{ attrs []slog.Attr }

// newRecord starts the worker's record with the fields every event opens
// with. There is one record, reused for every event (emit empties it): the
// worker writes one event at a time.
func (l *Logger) newRecord(ts time.Time, id, traceID, spanID string) *record {
	r := &l.rec
	if r.attrs == nil {
		r.attrs = make([]slog.Attr, 0, 14)
	}
	r.str("type", logs.DecisionLogType)
	r.str("timestamp", ts.UTC().Format(time.RFC3339Nano))
	r.str("decision_id", id)
	r.str("trace_id", traceID)
	r.str("span_id", spanID)
	return r
}

// str adds a string field, left out when empty as the plugin does.
func (r *record) str(k, v string) {
	if v != "" {
		r.attrs = append(r.attrs, slog.String(k, v))
	}
}

func (r *record) any(k string, v any) { r.attrs = append(r.attrs, slog.Any(k, v)) }

func (l *Logger) consoleOn(ctx context.Context) bool {
	return l.opts.Console != nil && l.opts.Console.Enabled(ctx, slog.LevelInfo)
}

// emit writes the record as one "Decision Log" line. With a
// ConsoleWriter the line joins the batch the worker writes at once
// (writeLine), rendered by a JSON handler as the console's renders it: an
// approval's audit record would otherwise cost a write(2) of its own.
func (l *Logger) emit(ctx context.Context, id string, r *record) {
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "Decision Log", 0)
	rec.AddAttrs(r.attrs...)
	clear(r.attrs) // the record copied them; the next event starts afresh
	r.attrs = r.attrs[:0]
	h := l.opts.Console
	if w := l.opts.ConsoleWriter; w != nil {
		l.lineTo(ctx, w)
		if l.render == nil {
			l.render = slog.NewJSONHandler((*lineBuffer)(l), nil)
		}
		h = l.render
	}
	n := len(l.line)
	if err := h.Handle(ctx, rec); err != nil {
		l.line = l.line[:n]
		l.counts.errs.Add(1)
		l.opts.Logger.Error("decision log: event not written", "decision_id", id, "error", fmt.Errorf("console: %w", err))
		return
	}
	if h == l.render {
		l.lineAdded(ctx)
	}
}

// lineBuffer appends what a JSON handler writes to the Logger's batch of
// lines.
type lineBuffer Logger

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.line = append(b.line, p...)
	return len(p), nil
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
