package main

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sourceListener caps the connections one source holds open on a
// listener (limits.max_connections_per_source).
//
// The listener's own cap (connLimits) bounds what all callers hold
// together, and at it new connections wait in the kernel's backlog in
// arrival order: one host that keeps opening connections and never
// finishes their headers fills the places and slows everyone else down
// while it lasts. With this cap, a connection whose source already holds
// its share is closed as soon as it is accepted, before a byte is read, so
// the places and the backlog go to the other sources.
//
// A source is the peer's IP address, an IPv6 one too: a /64 is often a
// whole subnet or a node's pods (in cloud networks and in Kubernetes),
// whose hosts would share one budget. Behind a load balancer or a NAT every
// caller has the same source, so the cap is off unless set, and only the
// proxy listener has it (app.go).
type sourceListener struct {
	net.Listener
	name    string
	max     int
	log     *slog.Logger
	refused prometheus.Counter

	mu       sync.Mutex
	open     map[netip.Addr]int
	lastWarn time.Time // at most one warning a minute
}

func newSourceListener(ln net.Listener, name string, maxPerSource int, log *slog.Logger, refused prometheus.Counter) *sourceListener {
	return &sourceListener{Listener: ln, name: name, max: maxPerSource, log: log, refused: refused, open: map[netip.Addr]int{}}
}

// Accept returns the next connection whose source holds fewer than max;
// the others it closes at once.
func (l *sourceListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src, ok := sourceOf(c.RemoteAddr())
		if !ok {
			return c, nil // not an IP peer (a Unix socket): nothing to count by
		}
		if l.take(src) {
			return &sourceConn{Conn: c, l: l, src: src}, nil
		}
		l.refused.Inc()
		_ = c.Close()
	}
}

// take counts one more connection of src, unless it holds max already.
func (l *sourceListener) take(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[src] >= l.max {
		if now := time.Now(); now.Sub(l.lastWarn) >= time.Minute {
			l.lastWarn = now
			l.log.Warn("connections from one source past its share of the listener: closing new ones at once",
				"listener", l.name, "source", src.String(), "max_connections_per_source", l.max)
		}
		return false
	}
	l.open[src]++
	return true
}

func (l *sourceListener) release(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[src]--; l.open[src] <= 0 {
		delete(l.open, src) // the map holds only sources with connections open
	}
}

// sourceOf is the source a connection counts towards: the peer's address
// (an IPv4-mapped IPv6 one as IPv4; a link-local one with its zone).
func sourceOf(a net.Addr) (netip.Addr, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Addr{}, false
	}
	ip = ip.Unmap()
	if ip.Is6() {
		ip = ip.WithZone(ta.Zone)
	}
	return ip, true
}

// sourceConn gives its source's place back when it closes, once however
// often it is closed (net/http and the connection cap may both close it).
type sourceConn struct {
	net.Conn
	l    *sourceListener
	src  netip.Addr
	once sync.Once
}

func (c *sourceConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.src) })
	return err
}
