// Package notify announces parked calls to webhooks: a CloudEvents 1.0
// event, a Slack Block Kit message or a Microsoft Teams Adaptive Card, each
// optionally signed the Standard Webhooks way (docs/http-api.md, notifications).
//
// It never delays or changes a decision. [Notifier.Notify] only enqueues;
// a few goroutines per target deliver, each call's events in order,
// retrying with backoff for a bounded time, and a full queue drops the
// event (counted) rather than block the caller. A lost notification costs
// an approver a message, not safety: the call stays listed on the
// approvals page and API, and expires fail-closed if nobody decides
// (docs/parked-calls.md, expiry; docs/security.md, R03).
//
// What it does not do: it decides nothing, receives no Slack or Teams
// interactions, and keeps nothing durable. Its links lead to the approval
// page, where the decision is a POST, so link previewers cannot approve;
// the Approve and Reject buttons of [Options.SlackInteractive] are posted
// by Slack, signed, to the approvals listener, which decides. Events
// still queued when the process dies are lost. What it offers instead is
// [Options.OnSettled]: it tells the caller which events every target
// attempted, so the caller can record that durably and announce the
// others again (cmd/toolgate does so with the store; docs/security.md,
// R04).
package notify

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/logurl"
)

// Event types, used as the CloudEvents "type" attribute.
const (
	TypeRequested = "dev.toolgate.approval.requested"
	TypeResolved  = "dev.toolgate.approval.resolved"
)

// Formats a [Target] may ask for.
const (
	FormatCloudEvents = "cloudevents"
	FormatSlack       = "slack"
	FormatTeams       = "teams"
)

// Results passed to [Options.OnDelivery].
const (
	// ResultDelivered: the receiver answered 2xx.
	ResultDelivered = "delivered"
	// ResultRetry: an attempt failed and another will follow.
	ResultRetry = "retry"
	// ResultFailed: the event was given up after at least one attempt
	// (permanent 4xx, attempts or time used up, or shutdown mid-delivery).
	ResultFailed = "failed"
	// ResultDropped: the event was never attempted (queue full, Notify
	// after Close, unknown event type, or still queued when Close gave up).
	ResultDropped = "dropped"
	// ResultSkipped: the call was resolved before its requested event was
	// sent to the target; neither event is sent there (unsent.go). It
	// settles as delivered would.
	ResultSkipped = "skipped"
)

// Event is one announcement.
type Event struct {
	// Type is TypeRequested or TypeResolved; Notify drops anything else.
	Type   string
	CallID string

	Tool, Upstream, Subject string
	// Method and Path are the HTTP request the call sends once approved:
	// its method, and its path with the query ("/tools/write_note?mode=x").
	// MCPMethod is an MCP call's JSON-RPC method (tools/call). Messages
	// show them: a plain HTTP call has no tool, and a REST tool call's
	// query is sent beside its arguments.
	Method, Path, MCPMethod string
	// ToolTarget is the policy input's tool.target (the normalised path or
	// resource the call acts on); empty when the tool has none.
	ToolTarget string
	// TargetsBeyond: the call names more targets than ToolTarget (another
	// target argument, an array, a value toolgate cannot read as a path);
	// chat messages say so, as ToolTarget alone would mislead.
	TargetsBeyond bool
	// Arguments are the exact arguments (a JSON object); may be nil. Bytes
	// that are not JSON are sent as a JSON string in CloudEvents data.
	Arguments json.RawMessage
	Reasons   []string
	RuleIDs   []string
	// Headers are the request headers the call will send upstream once
	// approved that its agent chose (not toolgate's own), credentials'
	// values hidden; nil for a call parked before toolgate listed them,
	// whose messages then say nothing of headers.
	Headers *Headers
	// OtherParams are the other members of an MCP tool call's params
	// that approving sends beside its arguments (_meta, inputResponses,
	// requestState, ...), with their values; nil (or listing none) when
	// there are none, or for a call parked before toolgate listed them.
	OtherParams *Params

	// ApprovalURL is the signed GET link to the approval page (requested
	// only). It is a capability: it is sent to the targets and never logged.
	ApprovalURL string
	StatusURL   string
	ExpiresAt   time.Time

	// Outcome is approved | rejected | expired | cancelled (resolved only).
	Outcome            string
	DecidedBy, Comment string // resolved only
	// Approvals, resolved only, are the approvals a call that took several
	// approvers received, in order.
	Approvals []Approval

	// Time is when it happened; Notify fills in the current time if zero.
	Time time.Time
}

// Headers are the request headers a parked call sends.
type Headers struct {
	// List is sorted by name; a header sent twice is listed twice.
	List []Header
	// Omitted counts the headers sent past the display bounds: not listed.
	Omitted int
}

// Header is one header line. A Hidden one is a credential: its Value is
// empty and Size its length.
type Header struct {
	Name, Value string
	Hidden      bool
	Size        int
}

// Params are the other members of an MCP tool call's params.
type Params struct {
	// List is sorted by name.
	List []Param
	// Omitted counts the members sent past the display bounds: not listed.
	Omitted int
}

// Param is one member of params. Value is its value as compact JSON;
// empty when the call's record did not keep it (too large), and then
// Size is its length in bytes.
type Param struct {
	Name, Value string
	Size        int
}

// Approval is one approver's approval of a call that took several.
type Approval struct {
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Comment string    `json:"comment"`
}

// id is the event's CloudEvents id and Standard Webhooks webhook-id. The
// requested event's id is the call ID (docs/http-api.md, notifications); the
// resolved event needs another one because CloudEvents ids are unique per
// source, so it is "<call id>.resolved". Both are derived, not random, so a
// duplicate announcement of the same event (two replicas;
// docs/security.md, R04) carries the same id and a receiver can deduplicate
// on it. A call can be resolved twice: approved, then expired or lost
// before it ran; the second end is another event, "<call id>.resolved.<outcome>".
func (e *Event) id() string {
	switch {
	case e.Type != TypeResolved:
		return e.CallID
	case e.DecidedBy != "" && e.Outcome != "approved" && e.Outcome != "rejected":
		return e.CallID + ".resolved." + e.Outcome
	}
	return e.CallID + ".resolved"
}

// Target is one webhook.
type Target struct {
	// URL is an absolute http or https URL. Slack and Teams put their
	// credential in it, so it is never logged or put into errors; logs
	// name a target by its index and host.
	URL string
	// Format is "cloudevents" (the default when empty), "slack" or "teams".
	Format string
	// Secret, when set, signs every request the Standard Webhooks way. A
	// "whsec_" prefix means the rest is the base64 of the key (use this
	// form with Standard Webhooks libraries, which base64-decode); anything
	// else is used as the raw key bytes. Empty: unsigned.
	Secret string
	// Lanes is how many events this target is sent at once; 0 takes
	// Options.Lanes.
	Lanes int
}

// Options configures a [Notifier]. Zero values mean the defaults below.
type Options struct {
	Targets []Target
	// Client sends the requests. Nil: a client of the Notifier's own,
	// whose attempts Timeout bounds, that follows only 307/308 redirects
	// to the same scheme and host (a redirect elsewhere, or one that
	// would turn the POST into a GET, is answered as the 3xx it is: a
	// permanent failure), and that sends to a plain-HTTP receiver on
	// connections of its own rather than through http.DefaultTransport
	// (whose proxy it still honours, but not a dialer set on it: give a
	// Client for that).
	Client *http.Client
	// Timeout bounds each attempt, the receiver's answer read included,
	// when Client is nil; default 10s. A given Client's own Timeout
	// applies instead.
	Timeout time.Duration
	// MaxAttempts bounds the attempts per event and target; default 8.
	MaxAttempts int
	// MaxElapsed bounds the time from an event's first attempt, waits and
	// attempts included; default 10m. An event that would need longer fails.
	MaxElapsed time.Duration
	// BaseBackoff is the first retry's wait ceiling; default 1s. Each retry
	// doubles it, capped at 1m, and waits a random time up to it (full
	// jitter). A 429 or 503 with Retry-After (seconds or HTTP date) waits
	// exactly that instead; if that passes MaxElapsed the event fails now.
	BaseBackoff time.Duration
	// QueueSize is each target's queue length; default 1024. Notify drops
	// an event for a target whose queue is full. The queue is split over
	// the target's lanes, each holding QueueSize/lanes events (rounded up).
	QueueSize int
	// Lanes is how many events each target is sent at once, unless the
	// target says otherwise (Target.Lanes); default 4. A call's events
	// share a lane and go one after another, so each target receives them
	// in order; events of different calls may arrive in any order.
	Lanes int
	// Logger receives delivery logs; nil discards them. At info level and
	// above they carry the call ID, target index, format and host; never a
	// secret, a target URL or the approval link.
	Logger *slog.Logger
	// OnDelivery, if set, is called once per attempt outcome, for metrics:
	// result is one of the Result constants, target the index in Targets.
	// It is called from Notify (for drops) and from delivery goroutines, so
	// it must be safe for concurrent use and fast.
	OnDelivery func(target int, format string, result string)
	// SlackInteractive adds Approve and Reject buttons (action IDs
	// SlackApproveActionID and SlackRejectActionID, value the call ID) to
	// the requested message of every "slack" target, beside the link to
	// the approval page. Slack posts clicks to the interactivity URL of the
	// app that owns the incoming webhook, so set it only when that app
	// points at the approvals listener's Slack handler. False: link only.
	SlackInteractive bool
	// OnSettled, if set, is called once per event when every target has
	// finished with it: delivered is true when every target received it,
	// false when at least one gave it up after attempting it
	// (ResultFailed). An event some target dropped (never attempted), or
	// abandoned when Close gave up on it, does not settle: OnSettled is not
	// called for it, so a caller that records settled events can announce
	// the others again (from another replica, once this one stopped).
	// With no targets an event settles at once, delivered. It is called from Notify and from
	// delivery goroutines, so it must be safe for concurrent use, and it
	// delays that target's next delivery while it runs. e's slices are
	// shared: read them only.
	OnSettled func(e Event, delivered bool)
}

// Defaults for zero Options fields.
const (
	DefaultMaxAttempts = 8
	DefaultMaxElapsed  = 10 * time.Minute
	DefaultBaseBackoff = time.Second
	DefaultQueueSize   = 1024
	DefaultLanes       = 4
	DefaultTimeout     = 10 * time.Second
	maxBackoff         = time.Minute
)

// Notifier delivers events to its targets. It is safe for concurrent use.
// Create it with [New] and stop it with [Notifier.Close].
type Notifier struct {
	opts    Options
	log     *slog.Logger
	client  *http.Client
	ownHTTP bool // the client is ours, so Close may close its idle connections
	// timeout bounds each attempt with the Notifier's own client, which
	// has no Timeout of its own (defaultClient): Options.Timeout.
	timeout time.Duration

	mu      sync.RWMutex // guards closed against Notify sending on a closed queue
	closed  bool
	workers []*worker
	seed    maphash.Seed // spreads calls over a target's lanes

	// inflight counts, by event id, the events Notify took that some
	// target has not finished with (InFlight); bounded by the queues.
	inflightMu sync.Mutex
	inflight   map[string]int

	stop context.CancelFunc // aborts in-flight deliveries when Close gives up
	wg   sync.WaitGroup
}

// New validates opts and starts a delivery goroutine for each lane of each
// target. Errors name the target by index and never contain its URL or
// secret.
func New(opts Options) (*Notifier, error) {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.MaxElapsed <= 0 {
		opts.MaxElapsed = DefaultMaxElapsed
	}
	if opts.BaseBackoff <= 0 {
		opts.BaseBackoff = DefaultBaseBackoff
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Lanes <= 0 {
		opts.Lanes = DefaultLanes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	workers := make([]*worker, 0, len(opts.Targets))
	allLanes := 0
	for i, t := range opts.Targets {
		lanes := cmp.Or(t.Lanes, opts.Lanes)
		allLanes += max(lanes, 0)
		w, err := newWorker(i, t, lanes, (opts.QueueSize+lanes-1)/lanes)
		if err != nil {
			return nil, fmt.Errorf("notify: targets[%d]: %w", i, err)
		}
		workers = append(workers, w)
	}

	n := &Notifier{opts: opts, log: log, client: opts.Client, workers: workers, seed: maphash.MakeSeed(), inflight: make(map[string]int)}
	if n.client == nil {
		urls := make([]*url.URL, len(workers))
		for i, w := range workers {
			urls[i] = w.req.URL
		}
		n.client, n.ownHTTP, n.timeout = defaultClient(allLanes, urls), true, cmp.Or(max(opts.Timeout, 0), DefaultTimeout)
	}
	ctx, stop := context.WithCancel(context.Background())
	n.stop = stop
	for _, w := range workers {
		w.n = n
		for _, lane := range w.lanes {
			n.wg.Add(1)
			go w.run(ctx, lane)
		}
	}
	return n, nil
}

func newWorker(index int, t Target, lanes, laneSize int) (*worker, error) {
	if lanes < 1 {
		return nil, fmt.Errorf("lanes: %d is less than 1", lanes)
	}
	u, err := url.Parse(t.URL)
	if err != nil {
		// url.Error repeats the URL, which may hold a webhook credential.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("url: must be an absolute http or https URL")
	}
	if u.Host == "" {
		return nil, errors.New("url: has no host")
	}
	format := t.Format
	if format == "" {
		format = FormatCloudEvents
	}
	if format != FormatCloudEvents && format != FormatSlack && format != FormatTeams {
		return nil, fmt.Errorf("format %q: want cloudevents, slack or teams", format)
	}
	key, err := parseSecret(t.Secret)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, t.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("url: %w", logurl.WithoutURL(err))
	}
	w := &worker{index: index, req: req, host: u.Host, format: format, key: key, lanes: make([]chan queued, lanes)}
	for i := range w.lanes {
		w.lanes[i] = make(chan queued, laneSize)
	}
	return w, nil
}

// Notify enqueues e for every target and returns at once; it never blocks
// on the network or on a full queue. Delivery happens later, each call's
// events in order per target. Notify copies e's slices, so the caller may
// reuse them. An event of unknown Type, or one sent after Close, is
// dropped and counted.
func (n *Notifier) Notify(e Event) {
	if e.Type != TypeRequested && e.Type != TypeResolved {
		n.log.Error("notification of unknown type dropped", "call_id", e.CallID, "type", e.Type)
		for _, w := range n.workers {
			n.report(w, ResultDropped)
		}
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}

	if len(n.workers) == 0 {
		if n.opts.OnSettled != nil {
			n.opts.OnSettled(e, true) // nobody to tell: settled, vacuously
		}
		return
	}

	// A read lock: sends never block (select with default), so Close's
	// write lock waits for at most a few non-blocking sends.
	n.mu.RLock()
	defer n.mu.RUnlock()
	copied := false
	// The settlement is made at the first enqueue, so an event every
	// target drops (a storm against stuck receivers) costs nothing more.
	var s *settlement
	dropped := false
	drop := func() {
		if s != nil {
			s.done(n, &e, ResultDropped)
		} else {
			dropped = true
		}
	}
	size := eventSize(&e)
	for i, w := range n.workers {
		lane := w.lane(e.CallID)
		switch {
		case n.closed:
			n.report(w, ResultDropped)
			drop()
			continue
		case e.Type == TypeResolved && w.unsent.supersede(e.CallID):
			// Its requested event, still queued, is skipped too: this
			// target never heard of the call.
			n.report(w, ResultSkipped)
			if s == nil {
				s = n.settlement(&e, len(n.workers)-i, dropped)
			}
			s.done(n, &e, ResultSkipped)
			continue
		case len(lane) == cap(lane):
			// Full: drop before copying anything, so a storm against a
			// stuck receiver costs the caller as little as possible.
			w.dropped(e)
			drop()
			continue
		case w.queuedBytes.Add(size) > MaxQueuedBytes:
			// Full by bytes: events of large calls (a megabyte of
			// arguments each) fill memory long before the lanes fill.
			w.queuedBytes.Add(-size)
			w.dropped(e)
			drop()
			continue
		}
		if !copied {
			e.Arguments = bytes.Clone(e.Arguments)
			e.Reasons = slices.Clone(e.Reasons)
			e.RuleIDs = slices.Clone(e.RuleIDs)
			copied = true
		}
		if s == nil {
			s = n.settlement(&e, len(n.workers)-i, dropped)
		}
		q := queued{e: e, s: s, size: size}
		if e.Type == TypeRequested {
			q.skip = w.unsent.add(e.CallID)
		}
		select {
		case lane <- q:
		default:
			if q.skip != nil {
				w.unsent.take(e.CallID, q.skip)
			}
			w.queuedBytes.Add(-size)
			w.dropped(e)
			drop()
		}
	}
}

// MaxQueuedBytes bounds the size of the events a target has queued or in
// delivery, as Options.QueueSize bounds their number: past it, Notify
// drops, as for a full queue (a waiting call is announced again later).
// An event counts its arguments, reasons, headers and other params, and
// 1 KiB for the rest.
const MaxQueuedBytes = 64 << 20

// eventSize is what e counts against MaxQueuedBytes.
// QueuedSize is what e counts against a target's MaxQueuedBytes.
func (e *Event) QueuedSize() int64 { return eventSize(e) }

func eventSize(e *Event) int64 {
	// The target is an argument's value, as long as the arguments
	// allow; the reasons and rule IDs are the policy's.
	n := 1024 + len(e.Arguments) + len(e.Path) + len(e.ToolTarget)
	for _, r := range e.Reasons {
		n += len(r)
	}
	for _, r := range e.RuleIDs {
		n += len(r)
	}
	if h := e.Headers; h != nil {
		for _, hd := range h.List {
			n += len(hd.Name) + len(hd.Value) + 32
		}
	}
	if p := e.OtherParams; p != nil {
		for _, m := range p.List {
			n += len(m.Name) + len(m.Value) + 32
		}
	}
	return int64(n)
}

// Close stops accepting events and waits until every queued event has
// been delivered or given up, or until ctx ends. If ctx ends first, the
// deliveries in flight are aborted (counted failed), what is still queued
// is counted dropped, and Close returns ctx's error once every delivery
// goroutine has exited. Close may be called more than once.
func (n *Notifier) Close(ctx context.Context) error {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		for _, w := range n.workers {
			for _, lane := range w.lanes {
				close(lane) // the lanes drain what is left, then exit
			}
		}
	}
	n.mu.Unlock()

	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		n.stop()
		<-done // prompt: the workers' requests and waits watch the same context
		err = fmt.Errorf("notify: closing: %w", ctx.Err())
	}
	n.stop()
	if n.ownHTTP {
		n.client.CloseIdleConnections()
	}
	return err
}

func (n *Notifier) report(w *worker, result string) {
	if n.opts.OnDelivery != nil {
		n.opts.OnDelivery(w.index, w.format, result)
	}
}

// beyondNote is what a chat message adds to its target when the call names
// more targets than that one.
func beyondNote(e *Event) string {
	switch {
	case !e.TargetsBeyond:
		return ""
	case e.ToolTarget == "":
		return " (targets in the arguments)"
	}
	return " (and other targets: see the arguments)"
}
