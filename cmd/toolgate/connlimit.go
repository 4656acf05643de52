package main

import (
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
)

// connLimits caps the connections each listener holds open at once.
//
// A connection costs memory before anything is known of its caller: one
// still sending its headers holds them (up to the servers' MaxHeaderBytes,
// ~100 KB a connection all told) for up to ReadHeaderTimeout, and an idle
// keep-alive one its buffers for up to IdleTimeout. Without a cap, anyone
// who can reach a port decides how much memory toolgate uses. At the cap a
// listener stops accepting: new connections wait in the kernel's backlog
// until one closes, and the slow ones close within ReadHeaderTimeout. Each
// listener has its own cap, so a flood of the agents' port does not lock
// approvers out of theirs.
type connLimits struct {
	max   int
	log   *slog.Logger
	open  *prometheus.GaugeVec
	limit *prometheus.GaugeVec
}

func newConnLimits(max int, log *slog.Logger, reg prometheus.Registerer) *connLimits {
	c := &connLimits{
		max: max, log: log,
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolgate_connections_open",
			Help: "Connections a listener (proxy, approvals, admin) holds open now, idle keep-alive ones included.",
		}, []string{"listener"}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolgate_connections_limit",
			Help: "The most connections a listener holds open at once (limits.max_connections); past it, new ones wait.",
		}, []string{"listener"}),
	}
	reg.MustRegister(c.open, c.limit)
	return c
}

// apply caps ln and returns it with the ConnState hook srv must use to
// count its connections.
func (c *connLimits) apply(name string, ln net.Listener) (net.Listener, func(net.Conn, http.ConnState)) {
	c.limit.WithLabelValues(name).Set(float64(c.max))
	gauge := c.open.WithLabelValues(name)
	var open atomic.Int64
	var warned atomic.Int64 // unix nanoseconds of the last warning
	state := func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			gauge.Inc()
			if open.Add(1) < int64(c.max) {
				return
			}
			// At most one warning a minute: a flood must not also
			// flood the log.
			now, last := time.Now().UnixNano(), warned.Load()
			if now-last >= int64(time.Minute) && warned.CompareAndSwap(last, now) {
				c.log.Warn("listener at its connection cap: new connections wait until one closes",
					"listener", name, "max_connections", c.max)
			}
		case http.StateClosed, http.StateHijacked:
			gauge.Dec()
			open.Add(-1)
		}
	}
	return netutil.LimitListener(ln, c.max), state
}
