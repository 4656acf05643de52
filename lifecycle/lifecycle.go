// Package lifecycle runs the life of a parked call: park, hold, claim, run
// once, deliver, sweep and status. It owns the pending.Store and returns
// Outcomes: what became of a call for the request that asked. It never
// writes an answer: the proxy turns Outcomes into bytes in the caller's
// protocol. It knows no HTTP handler and no Rego; sending a claimed call to
// its upstream, and deciding it again first, is its Executor's work.
package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/logthrottle"
	"github.com/toolgate/toolgate/pending"
)

// Executor sends claimed calls to their upstreams. The proxy implements it.
type Executor interface {
	// Execute decides pc again under the policy in force now and, when it
	// is still allowed, sends it once. It returns the state and the result
	// to record: never a retry, whatever happened.
	Execute(ctx context.Context, pc pending.Call) (pending.State, pending.Result)
	// Lease bounds one execution of pc: an executor that has not finished
	// by then is presumed lost, and the call becomes unknown.
	Lease(pc pending.Call) time.Duration
}

// Config configures a Lifecycle. Store and Executor are required.
type Config struct {
	Store    pending.Store
	Executor Executor
	// TTL is how long a call waits for a decision before it expires.
	TTL    time.Duration
	Logger *slog.Logger
	// OnPark is called once for every newly parked call (notifications,
	// metrics); OnResolve for every call this package ends: expired or
	// unknown (the sweeper), cancelled (the caller). Approvers' decisions
	// are the approvals handler's to report.
	OnPark, OnResolve func(pending.Call)
	// Handoff, if set, is shared with the approvals made on this replica
	// (Handoff.Decide), which then hand the calls they approve to the
	// requests held here. It must be for Store, and for this Lifecycle
	// alone.
	Handoff *Handoff
}

// Lifecycle runs parked calls. It is safe for concurrent use.
type Lifecycle struct {
	store    pending.Store
	exec     Executor
	ttl      time.Duration
	log      *slog.Logger
	onPark   func(pending.Call)
	onEnd    func(pending.Call)
	drained  context.Context // done once Drain was called
	drainAll context.CancelFunc
	warned   *logthrottle.Throttle // the sweeper's repeated warnings
	slots    *Handoff              // the requests held here, for approvals made here
	// abandoned are the calls whose park failed and may still land,
	// that the store did not abandon yet (abandon.go).
	abandoned abandons
	// unheld are the runs of approved calls whose requests left
	// (runOrphan), and the recording of results handed to a held request
	// before the store took them (run), which Settle waits for.
	unheld running
}

// running counts runs in flight and says when none is left. Unlike a
// sync.WaitGroup, a run may start while someone waits: an approvals
// handler a forced shutdown did not wait for may still start one.
type running struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed once n is back to 0; nil before the first run
}

// Go runs f as one of the runs.
func (r *running) Go(f func()) {
	r.mu.Lock()
	if r.n == 0 {
		r.idle = make(chan struct{})
	}
	r.n++
	r.mu.Unlock()
	go func() {
		defer r.done()
		f()
	}()
}

func (r *running) done() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n--; r.n == 0 {
		close(r.idle)
	}
}

// Idle is closed once no run is in flight (at once when none is).
func (r *running) Idle() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return r.idle
}

// New builds a Lifecycle.
func New(cfg Config) (*Lifecycle, error) {
	if cfg.Store == nil || cfg.Executor == nil {
		return nil, errors.New("lifecycle: a Store and an Executor are required")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	nop := func(pending.Call) {}
	if cfg.OnPark == nil {
		cfg.OnPark = nop
	}
	if cfg.OnResolve == nil {
		cfg.OnResolve = nop
	}
	if cfg.Handoff == nil {
		cfg.Handoff = NewHandoff(cfg.Store)
	}
	l := &Lifecycle{
		store: cfg.Store, exec: cfg.Executor, ttl: cfg.TTL, log: cfg.Logger, onPark: cfg.OnPark, onEnd: cfg.OnResolve, slots: cfg.Handoff,
		warned: logthrottle.New(sweepWarnEvery),
	}
	cfg.Handoff.orphan = l.runOrphan
	l.drained, l.drainAll = context.WithCancel(context.Background())
	return l, nil
}

// Drain ends every hold and long poll at once (shutdown): held callers
// learn that their call still waits; the calls stay parked.
func (l *Lifecycle) Drain() { l.drainAll() }

// Kind says what became of a call for the request that asked.
type Kind int

const (
	// Waiting: the hold ended before a decision; the call still waits
	// (or is approved or executing) and can be followed.
	Waiting Kind = iota
	// Ended: an approver rejected the call, it expired, or it was
	// cancelled; Call.State says which (and Call.DecidedBy, Call.Comment
	// who rejected it and why). Nothing ran. A rejection or expiry is
	// this request's to learn: it is marked delivered, as a result is.
	Ended
	// Delivered: the call ran and its result is this request's.
	Delivered
	// Taken: the call ran, and its result went to another request; or it
	// was rejected or expired (Call.State), and another request, or a
	// status poll, learnt that first.
	Taken
	// NoResult: the call ended without a result (failed before an answer
	// could be kept, or unknown).
	NoResult
	// KeyReused: the call a retry found (by its Idempotency-Key, or as
	// identical) is another: another tool, other arguments, or other
	// headers (Hold.Same); nothing was parked.
	KeyReused
	// NotParked: the store failed while parking; nothing was parked and
	// nothing will run.
	NotParked
	// StoreFailed: the store failed while holding; the call is not lost.
	StoreFailed
	// Lost: the store no longer knows the call; nothing will run. Call
	// is as last seen: approved or executing, it may have run already.
	Lost
	// Gone: the caller went away; there is nobody to answer.
	Gone
	// TooMany: the store refused to park a new call because its
	// principal, or everyone together, has as many calls waiting or
	// approved as allowed (pending.ErrTooMany); nothing was parked and
	// OnPark was not called. The caller may ask again later.
	TooMany
)

// Outcome is what became of a call for one request.
type Outcome struct {
	Kind Kind
	Call pending.Call
	// Result is the call's result when Kind is Delivered.
	Result pending.Result
	// Err is the store's error when Kind is NotParked, StoreFailed or
	// TooMany.
	Err error
}

// failed classifies a store error met while holding a call.
func (l *Lifecycle) failed(pc pending.Call, err error) Outcome {
	if errors.Is(err, pending.ErrNotFound) {
		return Outcome{Kind: Lost, Call: pc}
	}
	l.log.Error("approval store failed while holding a call", "call_id", pc.ID, "error", err)
	return Outcome{Kind: StoreFailed, Call: pc, Err: err}
}

// conflictCall is the call as it stands when a transition lost a race.
func conflictCall(err error, fallback pending.Call) pending.Call {
	var se *pending.StateError
	if errors.As(err, &se) {
		return se.Call
	}
	return fallback
}

// reportEnded reports the end of a call that a refused transition itself
// ended (it was overdue: pending.StateError.Ended); no Expire will.
func (l *Lifecycle) reportEnded(err error) {
	var se *pending.StateError
	if errors.As(err, &se) && se.Ended {
		l.log.Info("parked call ended", "call_id", se.Call.ID, "state", string(se.Call.State))
		l.onEnd(se.Call)
	}
}
