package main

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
)

// connLimits caps the connections each listener holds open at once.
//
// A connection costs memory before anything is known of its caller: one
// still sending its headers holds them (up to the servers' MaxHeaderBytes,
// ~120 KB a connection all told) for up to ReadHeaderTimeout, and an idle
// keep-alive one its buffers for up to IdleTimeout. Without a cap, anyone
// who can reach a port decides how much memory toolgate uses. At the cap a
// listener stops accepting: new connections wait in the kernel's backlog
// until one closes. Each listener has its own cap, so a flood of the
// agents' port does not lock approvers out of theirs.
//
// A cap alone would let idle connections keep the places: one request
// every two minutes holds a keep-alive connection, credentials or not. So
// near the cap a listener sheds (see shed).
type connLimits struct {
	shedFor time.Duration
	log     *slog.Logger
	open    *prometheus.GaugeVec
	limit   *prometheus.GaugeVec
	sheds   *prometheus.CounterVec
	refused *prometheus.CounterVec // closed at once: their source held its share (connsource.go)
}

// Shedding starts when a listener holds shedAt of its cap and ends when it
// is back under calmAt, but not before shedFor: closing the idle
// connections brings the count down at once, and keep-alives back on at
// once would hand the places straight back to whoever holds them idle.
// While it lasts, what became idle or stale is closed again at most every
// reshedEvery.
const (
	shedAt      = 0.9
	calmAt      = 0.75
	reshedEvery = time.Second
)

// shedFor is a variable so that tests need not wait it out.
var shedFor = 10 * time.Second

// While a listener sheds, a connection it accepted meanwhile that has not
// sent its first request's headers within headerGrace is closed, checked
// every reapEvery: agents send theirs at once, and a flood of connections
// that never do would otherwise keep each place for ReadHeaderTimeout
// (10 s), and agents waiting in the backlog behind them.
const (
	headerGrace = time.Second
	reapEvery   = 250 * time.Millisecond
)

// writeProgress is how long one write of an answer may wait for its
// client (internal/deadline.Writes): a client that stops taking bytes
// would otherwise keep its connection, its place under the cap and, for
// a forwarded answer, the upstream's connection, for as long as it likes.
// A variable so that tests need not wait it out.
var writeProgress = 30 * time.Second

// maxHeaderBytes bounds the request headers of the proxy and the approvals
// listener (a bearer JWT, a session cookie, a proxy's identity headers);
// the admin listener serves probes and scrapes, which need few connections
// and short headers.
//
// One source holds at most adminMaxPerSource of the admin listener's
// places: probes come from the node, scrapes from a monitoring pod, each
// a connection or two at a time, and any pod that can reach the port
// could otherwise hold all 64 with headers sent a line at a time, so that
// the kubelet's probes wait behind it in the backlog and the pod turns
// unready.
const (
	maxHeaderBytes      = 64 << 10
	adminMaxConnections = 64
	adminMaxPerSource   = 16
	adminMaxHeaderBytes = 8 << 10
)

func newConnLimits(log *slog.Logger, reg prometheus.Registerer) *connLimits {
	c := &connLimits{
		shedFor: shedFor, log: log,
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolgate_connections_open",
			Help: "Connections a listener (proxy, approvals, admin) holds open now, idle keep-alive ones included.",
		}, []string{"listener"}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolgate_connections_limit",
			Help: "The most connections a listener holds open at once (limits.max_connections; at most 64 on admin); past it, new ones wait.",
		}, []string{"listener"}),
		sheds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_connections_shed_total",
			Help: "Times a listener near its connection cap closed its idle connections and turned keep-alives off.",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_connections_refused_total",
			Help: "Connections a listener closed as soon as it accepted them, because their source already held limits.max_connections_per_source (only the proxy listener has such a cap).",
		}, []string{"listener"}),
	}
	reg.MustRegister(c.open, c.limit, c.sheds, c.refused)
	return c
}

// apply caps ln for srv at maxConns, and each source at perSource (0: no
// such cap), and returns it limited; it sets srv's ConnState hook to count
// srv's connections.
func (c *connLimits) apply(name string, ln net.Listener, srv *http.Server, maxConns, perSource int) net.Listener {
	c.limit.WithLabelValues(name).Set(float64(maxConns))
	l := &listenerLoad{
		name: name, srv: srv, limits: c, max: maxConns,
		gauge: c.open.WithLabelValues(name), sheds: c.sheds.WithLabelValues(name),
		shedAt: max(int64(float64(maxConns)*shedAt), 1), calmAt: int64(float64(maxConns) * calmAt),
	}
	srv.ConnState = l.state
	refused := c.refused.WithLabelValues(name) // exported, at 0, with no cap too
	if perSource > 0 {
		// Inside the cap: a connection closed for its source never
		// holds one of the listener's places.
		ln = newSourceListener(ln, name, perSource, c.log, refused)
	}
	return netutil.LimitListener(ln, maxConns)
}

// listenerLoad counts one listener's connections and sheds near its cap.
type listenerLoad struct {
	name           string
	srv            *http.Server
	limits         *connLimits
	max            int
	gauge          prometheus.Gauge
	sheds          prometheus.Counter
	shedAt, calmAt int64
	open           atomic.Int64

	mu        sync.Mutex // serialises the keep-alive switch
	shedding  bool
	shedSince time.Time
	lastShed  time.Time
	lastWarn  time.Time // at most one warning a minute: a flood must not flood the log too

	// fresh holds, while shedding, the connections accepted meanwhile
	// that have sent no request's headers yet, with when they came
	// (net.Conn to time.Time); watching says whether the listener sheds
	// (shedding, read without the lock), and tracked how many fresh
	// holds, so that a listener that does not shed pays an atomic load
	// per connection state and takes no lock.
	fresh    sync.Map
	watching atomic.Bool
	tracked  atomic.Int64
}

func (l *listenerLoad) state(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		l.gauge.Inc()
		if l.watching.Load() {
			l.fresh.Store(c, time.Now())
			l.tracked.Add(1)
		}
		if n := l.open.Add(1); n >= l.shedAt {
			l.shed(n)
		}
	case http.StateActive:
		l.forget(c)
	case http.StateClosed, http.StateHijacked:
		l.forget(c)
		l.gauge.Dec()
		if n := l.open.Add(-1); n <= l.calmAt && l.watching.Load() {
			l.calm()
		}
	}
}

// forget takes c out of fresh: it sent its headers, or it is gone.
func (l *listenerLoad) forget(c net.Conn) {
	if l.tracked.Load() > 0 {
		if _, ok := l.fresh.LoadAndDelete(c); ok {
			l.tracked.Add(-1)
		}
	}
}

// reap runs while the listener sheds: it closes the connections accepted
// meanwhile that are past headerGrace without a request, and sheds again
// every reshedEvery (closing what became idle, and the connections from
// before that are 5 s old without one), whether or not new connections
// arrive: at the cap none are accepted. It also asks calm, which a close
// asks too: the connections may all have closed within shedFor.
func (l *listenerLoad) reap() {
	t := time.NewTicker(reapEvery)
	defer t.Stop()
	for range t.C {
		if l.open.Load() <= l.calmAt {
			l.calm()
		}
		l.mu.Lock()
		on := l.shedding
		l.mu.Unlock()
		if !on {
			return
		}
		now := time.Now()
		l.fresh.Range(func(k, v any) bool {
			if now.Sub(v.(time.Time)) > headerGrace {
				_ = k.(net.Conn).Close() // its serving goroutine ends it: StateClosed
			}
			return true
		})
		l.shed(l.open.Load())
	}
}

// shed turns keep-alives off and closes the idle connections, and those
// that have not sent a request's headers within 5 s (net/http's
// SetKeepAlivesEnabled does both): near the cap, the places go to
// connections in use. Answers then close their connections, so agents
// reconnect for each call until the load is back under calmAt. Connections
// held for a decision or a stream are in use and stay.
func (l *listenerLoad) shed(open int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.shedding && now.Sub(l.lastShed) < reshedEvery {
		return
	}
	if !l.shedding {
		l.shedding, l.shedSince = true, now
		l.watching.Store(true)
		go l.reap()
		if now.Sub(l.lastWarn) >= time.Minute {
			l.lastWarn = now
			l.limits.log.Warn("listener near its connection cap: closing idle connections, keep-alives off until the load falls",
				"listener", l.name, "open", open, "max_connections", l.max)
		}
	}
	l.lastShed = now
	l.sheds.Inc()
	l.srv.SetKeepAlivesEnabled(false)
}

// calm turns keep-alives back on once a shedding listener's load is down
// and it has shed for shedFor. Without keep-alives every answer closes
// its connection, so a listener in use gets here soon after.
func (l *listenerLoad) calm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.shedding || time.Since(l.shedSince) < l.limits.shedFor {
		return
	}
	l.shedding = false
	l.watching.Store(false)
	l.srv.SetKeepAlivesEnabled(true)
}
