package main

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/approvals/signin"
	"github.com/toolgate/toolgate/approvals/slackapp"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/lifecycle"
	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/proxy"
)

// parking is everything around parked calls: the store, approval links,
// the approvals listener and notifications.
type parking struct {
	store    pending.Store
	signer   *approvals.Signer
	notifier *notify.Notifier
	handler  http.Handler
	// handoff is shared by the approvals listener and the proxy's held
	// requests: an approval made here claims the call for its request
	// held here in the same step.
	handoff *lifecycle.Handoff
	public  string
	// proxyPublic is the proxy listener as agents reach it (the base of
	// status URLs; empty: they are relative).
	proxyPublic string
	// onLink, if set, receives the approval link of every parked call
	// (the quickstart prints it).
	onLink func(callID, link string)
	log    *slog.Logger
	// announcing: there are notification targets, so requested and
	// resolved events are recorded once settled, and sent again if not.
	announcing bool
	// announced records settled requested events, resolutions settled
	// resolved events, in batches.
	announced   *announcements[string]
	resolutions *announcements[pending.End]

	// sealed is the store's remembered grants, sealed (grants.go); nil
	// without grants.
	sealed pending.Grants

	approvalsTotal *prometheus.CounterVec
	waitSeconds    prometheus.Histogram
	reannounced    *prometheus.CounterVec
}

// Re-announcement of events that did not settle (dropped by a full
// queue, or lost with a replica): every reannounceEvery, the calls
// waiting at least reannounceAfter and not recorded as announced, and the
// ends reached at least reannounceAfter ago and not recorded as resolved,
// are notified again, as many as the notification queues have room for.
// Variables so that tests can shorten them; notifyQueueSize is notify's
// QueueSize (0: its default).
var (
	reannounceEvery = 5 * time.Second
	reannounceAfter = 15 * time.Second
	notifyQueueSize = 0
)

const (
	// reannounceScan bounds the calls one round lists.
	reannounceScan = 4096
	// announcedTimeout bounds recording a batch of settled announcements.
	announcedTimeout = 2 * time.Second
	// minEventBytes is what the smallest event counts against a queue's
	// bytes (notify's MaxQueuedBytes): with less room, a round sends
	// nothing.
	minEventBytes = 1 << 10
)

// confirmURL is the link to c's confirmation page, which the proxy hands
// the requester's MCP client.
func (p *parking) confirmURL(c pending.Call) string { return p.signer.ConfirmURL(p.public, c) }

// newParking opens the store and the notifier; a.Close closes them, the
// notifier first.
func newParking(cfg *config.Config, reg *prometheus.Registry, a *app) (*parking, error) {
	if cfg.Pending.Store == "redis" {
		useRedisLog(a.log)
	}
	st, closeStore, err := openStore(cfg)
	if err != nil {
		return nil, err
	}
	a.onClose("store", 0, func(context.Context) error { closeStore(); return nil })
	p := &parking{
		store: st, handoff: lifecycle.NewHandoff(st), public: cfg.PublicURL, proxyPublic: cfg.ProxyPublicURL, log: a.log,
		announcing: len(cfg.Approvals.Notify) > 0,
	}
	secrets := approvalSecrets(cfg)
	if p.signer, err = approvals.NewSigner(secrets[0], secrets[1:]...); err != nil {
		return nil, err
	}
	p.sealed = sealedGrants(st, secrets, a.log, reg)
	p.approvalsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_approvals_total",
		Help: "Parked calls that ended, by outcome (approved, rejected, expired, cancelled, unknown).",
	}, []string{"outcome"})
	p.waitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "toolgate_approval_wait_seconds",
		Help: "Time from parking a call to its approval or rejection.", Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 900, 1800, 3600, 14400},
	})
	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_notifications_total",
		Help: "Notification deliveries by format and result (delivered, retry, failed, dropped).",
	}, []string{"format", "result"})
	p.reannounced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_notifications_reannounced_total",
		Help: "Events sent again because they did not reach every target (dropped, or lost with a replica), by event: requested or resolved.",
	}, []string{"event"})
	p.reannounced.WithLabelValues("requested")
	p.reannounced.WithLabelValues("resolved")
	waiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolgate_calls_waiting",
		Help: "Parked calls waiting for a decision.",
	}, func() float64 {
		ctx, cancel := contextTimeout(time.Second)
		defer cancel()
		n, err := st.Count(ctx, pending.Waiting)
		if err != nil {
			return -1
		}
		return float64(n)
	})
	reg.MustRegister(p.approvalsTotal, p.waitSeconds, deliveries, p.reannounced, waiting)
	// Series exist at zero from the start, so rates and alerts over them
	// need no special case for "never happened yet".
	for _, s := range []pending.State{pending.Approved, pending.Rejected, pending.Expired, pending.Cancelled, pending.Unknown} {
		p.approvalsTotal.WithLabelValues(string(s))
	}
	// Every format's, configured or not: the family is there to alert on
	// even when nothing is notified.
	for _, format := range []string{notify.FormatCloudEvents, notify.FormatSlack, notify.FormatTeams} {
		for _, result := range []string{notify.ResultDelivered, notify.ResultRetry, notify.ResultFailed, notify.ResultDropped, notify.ResultSkipped} {
			deliveries.WithLabelValues(format, result)
		}
	}

	targets := make([]notify.Target, 0, len(cfg.Approvals.Notify))
	for _, n := range cfg.Approvals.Notify {
		targets = append(targets, notify.Target{URL: n.URL, Format: n.Format, Secret: n.Secret.Reveal(), Lanes: n.Concurrency})
	}
	nopts := notify.Options{
		Targets: targets, Logger: a.log, QueueSize: notifyQueueSize, SlackInteractive: cfg.Approvals.Slack != nil,
		OnDelivery: func(_ int, format, result string) { deliveries.WithLabelValues(format, result).Inc() },
	}
	if p.announcing {
		// Opened before the notifier, so closed after it: what its last
		// deliveries settle is recorded too.
		p.announced = newAnnouncements(st, a.log, announcedDelay)
		a.onClose("announcements", announcedTimeout, p.announced.Close)
		p.resolutions = newResolutions(st, a.log, announcedDelay)
		a.onClose("resolutions", announcedTimeout, p.resolutions.Close)
		nopts.OnSettled = p.settled
	}
	p.notifier, err = notify.New(nopts)
	if err != nil {
		return nil, err
	}
	a.onClose("notifier", 2*time.Second, p.notifier.Close)
	if p.handler, err = p.listener(cfg, reg, a); err != nil {
		return nil, err
	}
	return p, nil
}

// listener builds the approvals listener's handler: the pages, the inbox
// and the API, with the approvers' identity when configured, and Slack's
// interactions when configured.
func (p *parking) listener(cfg *config.Config, reg *prometheus.Registry, a *app) (http.Handler, error) {
	approvers := make([]approvals.Approver, 0, len(cfg.Approvals.Approvers))
	for _, ap := range cfg.Approvals.Approvers {
		approvers = append(approvers, approvals.Approver{Name: ap.Name, Key: ap.Key.Reveal(), Groups: ap.Groups})
	}
	var who signin.Authenticator
	if id := cfg.Approvals.Identity; id != nil {
		var err error
		o := id.Options(cfg.PublicURL)
		o.OIDC.Logger = a.log
		if who, err = signin.New(o); err != nil {
			return nil, err
		}
	}
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_approval_decisions_total",
		Help: "Approvers' decisions by decision (approved, rejected), how they were made (link, api, header, oidc, slack, requester) and whether the call still waits for more approvers (partial).",
	}, []string{"decision", "via", "partial"})
	reg.MustRegister(decisions)
	for _, via := range approvals.AuditVias {
		decisions.WithLabelValues(string(pending.Approved), via, "false")
		decisions.WithLabelValues(string(pending.Approved), via, "true")
		decisions.WithLabelValues(string(pending.Rejected), via, "false") // the first rejection decides
	}
	audit := a.dlog.forApprovals()
	h, err := approvals.New(approvals.Config{
		Store: p.store, Signer: p.signer, Approvers: approvers, Identity: who, PublicURL: cfg.PublicURL, Grants: p.grants(),
		RequesterSignIn: cfg.Approvals.RequesterSignIn,
		Logger:          a.log, OnDecision: p.resolved, Decide: p.handoff.Decide,
		Audit: func(ctx context.Context, rec approvals.AuditRecord) {
			decisions.WithLabelValues(rec.Outcome, rec.Via, strconv.FormatBool(rec.Partial)).Inc()
			if audit != nil {
				audit(ctx, rec)
			} else {
				approvals.LogAudit(ctx, a.log, rec)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	sc := cfg.Approvals.Slack
	if sc == nil {
		return h, nil
	}
	scfg := slackapp.Config{SigningSecret: sc.SigningSecret.Reveal(), Users: sc.Users, Decide: h.DecideAs, Logger: a.log}
	if n, ok := p.store.(pending.Nonces); ok {
		scfg.FirstUse = n.FirstUse // a replay is one on every replica
	}
	slack, err := slackapp.New(scfg)
	if err != nil {
		return nil, err
	}
	a.onClose("slack interactions", 5*time.Second, slack.Close)
	mux := http.NewServeMux()
	mux.Handle("POST "+slackapp.Path, slack)
	mux.Handle("/", h)
	return mux, nil
}

// grants is the store's remembered grants, sealed: both stores keep them.
func (p *parking) grants() pending.Grants { return p.sealed }

// listings is where the replicas share what MCP tools/list answers told:
// a Redis store, which all of them read. The memory store is this
// process's alone, and the proxy already keeps the listings it relayed.
func (p *parking) listings() pending.Listings {
	if rs, ok := p.store.(*pending.RedisStore); ok {
		return rs
	}
	return nil
}

// parked announces a newly parked call.
func (p *parking) parked(c pending.Call) {
	link := p.signer.ApprovalURL(p.public, c)
	if p.onLink != nil {
		p.onLink(c.ID, link)
	}
	p.announce(c, link)
}

// announce sends the requested event of c, whose approval link is link.
func (p *parking) announce(c pending.Call, link string) {
	p.notifier.Notify(p.event(notify.TypeRequested, c, link))
}

// settled records that an event reached every target, or was given up
// by them after being attempted: it is not sent again.
func (p *parking) settled(e notify.Event, _ bool) {
	switch e.Type {
	case notify.TypeRequested:
		p.announced.add(e.CallID)
	case notify.TypeResolved:
		p.resolutions.add(pending.End{ID: e.CallID, State: pending.State(e.Outcome)})
	}
}

// reannounce sends again, every every until ctx ends, the requested
// events of the calls waiting at least after, and the resolved events of
// the ends reached at least after ago, that are not recorded as settled:
// dropped by a full queue, or lost with a replica that stopped. An event
// this replica still has queued or in delivery is skipped. Receivers see
// the same event id again and can deduplicate.
func (p *parking) reannounce(ctx context.Context, every, after time.Duration) {
	if !p.announcing {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.reannounceOnce(ctx, after)
		p.reresolveOnce(ctx, after)
	}
}

// reannounceOnce announces again the calls due for it (resend).
func (p *parking) reannounceOnce(ctx context.Context, after time.Duration) {
	defer p.announced.round()()
	resend(ctx, p, "requested",
		func(ctx context.Context, limit int, maxBytes int64) ([]pending.Call, error) {
			return p.store.Unannounced(ctx, after, limit, maxBytes)
		},
		func(c pending.Call) bool { return p.announced.queuedFor(c.ID) || !p.notifier.RoomFor(c.ID) },
		func(c pending.Call) notify.Event {
			return p.event(notify.TypeRequested, c, p.signer.ApprovalURL(p.public, c))
		})
}

// reresolveOnce sends again the resolved events due for it (resend). Each
// is built from its call as it stands and the end it owes (an approved
// call may have run since), so it is the event first sent, with its id.
func (p *parking) reresolveOnce(ctx context.Context, after time.Duration) {
	defer p.resolutions.round()()
	resend(ctx, p, "resolved",
		func(ctx context.Context, limit int, maxBytes int64) ([]pending.Owed, error) {
			return p.store.Unresolved(ctx, after, limit, maxBytes)
		},
		func(o pending.Owed) bool { return p.resolutions.queuedFor(o.End) || !p.notifier.RoomFor(o.ID) },
		func(o pending.Owed) notify.Event {
			c := o.Call
			c.State = o.State
			return p.event(notify.TypeResolved, c, "")
		})
}

// resend sends again, of the events of a kind (requested, resolved) due
// for it, as many as the queues have room for: a burst that outran the
// queues goes out as fast as the receivers take it. list returns what is
// due; the oldest may be the ones still queued from the last round, so
// the round lists that many more. An item settled but not yet recorded,
// or whose lane is full (skip), or whose event is still in flight waits
// for a later round; the event of an item is built only when it may be
// sent. The queues' room is counted in bytes too: a round reads no more
// calls than they could take, and sends none they would drop, so a
// backlog of large calls against a stuck receiver is not read, built and
// dropped again every round (a few hundred calls of a megabyte held a
// replica at a gigabyte).
func resend[T any](ctx context.Context, p *parking, kind string, list func(context.Context, int, int64) ([]T, error), skip func(T) bool, event func(T) notify.Event) {
	room, roomBytes := p.notifier.Room(), p.notifier.RoomBytes()
	if room <= 0 || roomBytes < minEventBytes {
		return // the queues are full: what is in them goes first
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	items, err := list(ctx, min(room+p.notifier.Pending(), reannounceScan), roomBytes)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("could not list the notifications to send again", "event", kind, "error", err)
		}
		return
	}
	n := 0
	for _, it := range items {
		if n == room {
			break
		}
		if skip(it) {
			continue
		}
		e := event(it)
		if size := e.QueuedSize(); size > notify.MaxQueuedBytes {
			// No queue ever takes it (max_body_bytes above the queues'
			// bytes): given up as settled, lest it be listed first, and
			// alone, in every round, and the calls behind it never.
			p.log.Warn("notification larger than a target may queue: not sent", "event", kind, "call_id", e.CallID, "bytes", size)
			p.settled(e, false)
			continue
		} else if size > p.notifier.RoomBytes() {
			continue // it would be dropped now: a later round sends it
		}
		// Asked again after InFlight: an event that settles in between
		// is recorded before it leaves flight (notify's settlement), so
		// in this order it is seen as one or the other, never neither,
		// and is not sent a second time.
		if p.notifier.InFlight(e) || skip(it) {
			continue
		}
		p.notifier.Notify(e)
		p.reannounced.WithLabelValues(kind).Inc()
		n++
	}
	if n > 0 {
		p.log.Info("notifications sent again: they did not reach every target", "event", kind, "events", n)
	}
}

// resolved records and announces how a parked call ended.
func (p *parking) resolved(c pending.Call) {
	p.approvalsTotal.WithLabelValues(string(c.State)).Inc()
	if (c.State == pending.Approved || c.State == pending.Rejected) && !c.DecidedAt.IsZero() {
		p.waitSeconds.Observe(c.DecidedAt.Sub(c.CreatedAt).Seconds())
	}
	p.notifier.Notify(p.event(notify.TypeResolved, c, ""))
}

// notifyHeaders is a call's headers as notifications show them; nil for a
// call parked before toolgate listed them.
func notifyHeaders(h *callinfo.Headers) *notify.Headers {
	if h == nil {
		return nil
	}
	out := &notify.Headers{List: make([]notify.Header, 0, len(h.List)), Omitted: h.Omitted}
	for _, hd := range h.List {
		out.List = append(out.List, notify.Header{Name: hd.Name, Value: hd.Value, Hidden: hd.Hidden, Size: hd.Size})
	}
	return out
}

// notifyParams is an MCP call's other params as notifications show them;
// nil when it sends none.
func notifyParams(op *callinfo.Params) *notify.Params {
	if op.Count() == 0 {
		return nil
	}
	out := &notify.Params{List: make([]notify.Param, 0, len(op.List)), Omitted: op.Omitted}
	for _, m := range op.List {
		out.List = append(out.List, notify.Param{Name: m.Name, Value: string(m.Value), Size: m.Size})
	}
	return out
}

func (p *parking) event(typ string, c pending.Call, link string) notify.Event {
	info := callinfo.Decode(c.Info)
	var approvals []notify.Approval
	if len(c.Quorum) > 0 {
		for _, a := range c.Approvals {
			approvals = append(approvals, notify.Approval{By: a.By, At: a.At.UTC(), Comment: a.Comment})
		}
	}
	return notify.Event{
		Approvals: approvals,
		Type:      typ, CallID: c.ID, Tool: info.Tool, Method: info.Method, Path: info.Path, MCPMethod: info.MCPMethod, ToolTarget: info.Target, TargetsBeyond: info.TargetsBeyond, Upstream: c.Upstream, Subject: c.Subject,
		Arguments: info.Arguments, Reasons: info.Reasons, RuleIDs: info.RuleIDs, Headers: notifyHeaders(info.Headers), OtherParams: notifyParams(info.OtherParams), ApprovalURL: link,
		StatusURL: proxy.StatusURL(p.proxyPublic, c.ID), ExpiresAt: c.ExpiresAt, Outcome: string(c.State),
		DecidedBy: c.DecidedBy, Comment: c.Comment, Time: time.Now(),
	}
}
