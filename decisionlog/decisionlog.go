// Package decisionlog writes toolgate's decision log through OPA's own
// decision-log plugin (github.com/open-policy-agent/opa/v1/plugins/logs):
// events in OPA's decision-log shape, masked by the user's
// data.system.log.mask rules and dropped by data.system.log.drop, written
// to the console and/or uploaded to an OPA-compatible log service (gzip
// JSON arrays POSTed to <service>/logs, bounded buffer, retries with
// backoff). One event per decided call and one audit event per approval
// decision, correlated by decision_id (the call ID).
//
// toolgate compiles its policy itself (package policy), so the plugin's
// manager is fed each new compiled revision the way OPA's bundle plugin
// feeds it: the revision's data written to the manager's store in a
// transaction carrying the revision's compiler. Mask and drop rules are
// therefore evaluated against exactly the policy that decided the call.
//
// Events are handed to the plugin by one goroutine behind a bounded queue:
// the proxy's hot path only copies the record and enqueues it.
package decisionlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/server"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/logurl"
	"github.com/toolgate/toolgate/policy"
)

// Options configure a Logger.
type Options struct {
	// Policy returns the compiled policy in force; its mask and drop rules
	// apply to every event. *policy.Engine's Compiled method fits.
	Policy func() policy.Compiled
	// Console, if set, receives every event as one record (message
	// "Decision Log"), as OPA's console decision logger writes it. Its
	// Handle must be done with a record when it returns, as slog's text
	// and JSON handlers are: the record's raw JSON values (input, result)
	// are slices of a buffer the next event reuses, so a handler that
	// kept records to write later (a batching exporter) would write the
	// next event's bytes. Such a handler must copy them in Handle.
	Console slog.Handler
	// ConsoleWriter, if set, is where Console's JSON handler writes, whole
	// lines at a time and never interleaved (a locked writer). Toolgate's
	// own decisions are then written to it directly as the line that
	// handler would write: a JSON handler would validate and compact again
	// the input and result it is handed as raw JSON, a third of a console
	// event's cost. Events the plugin writes still go through Console.
	ConsoleWriter io.Writer
	// Service, if its URL is set, receives the events in batches.
	Service Service
	// MaskDecision and DropDecision are the data paths of the mask and drop
	// rules; empty means OPA's defaults, /system/log/mask and /system/log/drop.
	MaskDecision, DropDecision string
	// Arguments keeps tool arguments and query strings in the events
	// (masked by the policy); false removes input.tool.arguments and
	// input.http.query before the event is built.
	Arguments bool
	// InstanceID is labels.id of every event; Labels are added to it.
	InstanceID string
	Labels     map[string]string
	// QueueSize bounds the events waiting for the plugin; a full queue drops
	// the event and counts it. Zero means 10000.
	QueueSize int
	// Registerer receives the decision-log metrics (nil: none).
	Registerer prometheus.Registerer
	// Logger receives the plugin's own reports (upload failures, masks
	// that could not be applied). Nil discards them.
	Logger *slog.Logger
}

// Service is an OPA-compatible decision-log service.
type Service struct {
	URL string
	// Resource is the path under URL events are POSTed to ("" = /logs).
	Resource string
	// Token, if set, is sent as "Authorization: Bearer <token>".
	Token string
	// Timeout bounds the wait for the service's response headers (0 = none).
	Timeout time.Duration
	// BufferBytes bounds the events waiting for upload; past it the oldest
	// are dropped and counted. Zero means unbounded (OPA's default).
	BufferBytes int64
	// MinDelay and MaxDelay bound the pause between uploads; failed uploads
	// back off up to MaxDelay. Whole seconds, at least one.
	MinDelay, MaxDelay time.Duration
}

// Logger writes decision and audit events. It is safe for concurrent use.
type Logger struct {
	opts    Options
	manager *plugins.Manager
	plugin  *logs.Plugin
	queue   chan entry
	stop    chan struct{}
	done    chan struct{}
	closed  atomic.Bool
	// queuedBytes is what the queued events count (MaxQueueBytes).
	queuedBytes atomic.Int64
	counts      *collector
	synced      *ast.Compiler // the revision last given to the manager; worker only
	// direct is true while events may skip the plugin (direct.go): no log
	// service, and no mask or drop rules in the revision synced. Worker only.
	direct bool
	// labels is the events' labels as JSON, and buf the direct path's
	// encoding buffer. auditLabels are the labels as an audit record
	// shows them (writeAudit). Worker only.
	labels      json.RawMessage
	auditLabels []byte
	buf         []byte
	// line holds the direct lines (ConsoleWriter) not yet written: lines
	// of them, for lineW. Worker only.
	line  []byte
	lines int
	lineW io.Writer
	// render writes the other events' records into line, as the console
	// handler would write them (emit). Worker only.
	render slog.Handler
	// rec is the record of the event being written (newRecord). Worker
	// only.
	rec record
}

// entry is one event waiting for the worker.
type entry interface {
	decisionID() string
	info(opts *Options) (*server.Info, error)
	// queuedBytes is what the entry counts against MaxQueueBytes while it
	// waits for the worker.
	queuedBytes(opts *Options) int64
}

// MaxQueueBytes bounds what the events waiting for the worker hold, as
// Options.QueueSize bounds their number: past it an event is dropped and
// counted (reason queue_full). An event counts eventBytes, its request's
// headers, and its parsed arguments when they are logged; a queue of
// events behind a slow sink (a console read slowly) would otherwise hold
// up to QueueSize requests' headers and arguments.
const MaxQueueBytes = 64 << 20

// eventBytes is what an event counts for its fixed part.
const eventBytes = 1024

// New starts a Logger. Close it to flush what is buffered.
func New(ctx context.Context, opts Options) (*Logger, error) {
	if opts.Policy == nil {
		return nil, errors.New("decisionlog: Options.Policy is required")
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 10000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	raw, err := managerConfig(opts)
	if err != nil {
		return nil, err
	}
	pluginHandler := opts.Logger.Handler()
	if u, err := url.Parse(opts.Service.URL); err == nil && opts.Service.URL != "" {
		// The plugin reports a failed upload, and at debug level every
		// one, with the URL posted to: its query and user information
		// may be the service's credentials.
		pluginHandler = logurl.Handler(pluginHandler, u)
	}
	pluginLog := logging.NewLoggerFromSlogHandler(pluginHandler, logging.Info)
	var console logging.Logger = logging.NewNoOpLogger()
	if opts.Console != nil {
		console = logging.NewLoggerFromSlogHandler(opts.Console, logging.Info)
	}
	m, err := plugins.New(raw, opts.InstanceID, inmem.New(),
		plugins.Logger(pluginLog), plugins.ConsoleLogger(console), plugins.WithPrometheusRegister(opts.Registerer))
	if err != nil {
		return nil, fmt.Errorf("decisionlog: %w", err)
	}
	pc, err := logs.NewConfigBuilder().WithBytes(pluginConfig(opts)).WithServices(m.Services()).Parse()
	if err != nil {
		return nil, fmt.Errorf("decisionlog: %w", err)
	}
	counters := metrics.New()
	l := &Logger{
		opts:    opts,
		manager: m,
		plugin:  logs.New(pc, m).WithMetrics(counters),
		queue:   make(chan entry, opts.QueueSize),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		counts:  newCollector(counters),
	}
	if opts.Service.URL != "" {
		m.Register(uploadPluginName, &uploadClient{token: opts.Service.Token, whole: wholeUpload(opts.Service.Timeout)})
	}
	m.Register(logs.Name, l.plugin)
	if err := m.Start(ctx); err != nil {
		return nil, fmt.Errorf("decisionlog: %w", err)
	}
	if r := opts.Registerer; r != nil {
		if err := r.Register(l.counts); err != nil {
			m.Stop(ctx)
			return nil, fmt.Errorf("decisionlog: %w", err)
		}
	}
	go l.run()
	return l, nil
}

// Close stops taking events, hands the queued ones to the plugin and stops
// it; with a service configured the plugin uploads what it buffered until
// ctx ends.
func (l *Logger) Close(ctx context.Context) {
	if l.closed.Swap(true) {
		return
	}
	close(l.stop)
	select {
	case <-l.done:
	case <-ctx.Done():
	}
	// The plugin's Stop waits for an upload under way, which its client's
	// timeout bounds (wholeUpload), not ctx: past ctx it is left to finish alone (the
	// process is exiting), so that closing ends when the caller said.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		l.manager.Stop(ctx)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
	}
}

// enqueue hands e to the worker without ever blocking the caller.
func (l *Logger) enqueue(e entry) {
	if l.closed.Load() {
		l.counts.queueFull.Add(1)
		return
	}
	size := e.queuedBytes(&l.opts)
	if l.queuedBytes.Add(size) > MaxQueueBytes {
		l.queuedBytes.Add(-size)
		l.counts.queueFull.Add(1)
		return
	}
	select {
	case l.queue <- e:
	default:
		l.queuedBytes.Add(-size)
		l.counts.queueFull.Add(1)
	}
}

// run is the worker: it builds each event and gives it to the plugin.
//
// It takes events in batches: after one, it writes whatever else is
// queued, then pauses drainInterval before it waits again. Under load a
// wake-up per call (a futex and a context switch) cost more than writing
// the event, and a write per few calls (each pause's) still cost more than
// the lines it wrote; idle, it sleeps on the queue and never wakes.
func (l *Logger) run() {
	defer close(l.done)
	ctx := context.Background()
	pause := time.NewTimer(drainInterval)
	pause.Stop()
	drain := func() {
		for {
			select {
			case e := <-l.queue:
				l.log(ctx, e)
			default:
				return
			}
		}
	}
	for {
		select {
		case e := <-l.queue:
			l.log(ctx, e)
			drain()
			l.flush(ctx)
		case <-l.stop:
			drain()
			l.flush(ctx)
			return
		}
		pause.Reset(drainInterval)
		select {
		case <-pause.C:
		case <-l.stop:
			drain()
			l.flush(ctx)
			return
		}
	}
}

// drainInterval is how often the worker takes the queued events: a
// decision's line is written at most this long after the call was decided.
// Allow and deny records may wait this long in memory (the approval
// evidence is the store's); at 5 ms a call at a time paid ~6 µs of write
// and wake-up for each MCP call's line.
const drainInterval = 20 * time.Millisecond

func (l *Logger) log(ctx context.Context, e entry) {
	defer l.queuedBytes.Add(-e.queuedBytes(&l.opts))
	if err := l.sync(ctx); err != nil {
		l.counts.errs.Add(1)
		l.opts.Logger.Error("decision log: cannot load the policy's mask rules; event not logged", "error", err)
		return
	}
	if d, ok := e.(*Decision); ok && l.direct {
		l.writeDecision(ctx, d)
		return
	}
	if a, ok := e.(*Audit); ok && l.direct {
		l.writeAudit(ctx, a)
		return
	}
	info, err := e.info(&l.opts)
	if err == nil {
		if l.direct {
			l.writeDirect(ctx, info)
			return
		}
		err = l.plugin.Log(ctx, info)
	}
	if err != nil {
		l.counts.errs.Add(1)
		l.opts.Logger.Error("decision log: event not logged", "decision_id", e.decisionID(), "error", err)
	}
}
