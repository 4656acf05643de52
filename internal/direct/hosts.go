package direct

import (
	"net/http"
	"net/url"
)

// Hosts is a RoundTripper for a client that talks to a few known servers
// (the notifier's webhook receivers): a request to one of the plain-HTTP
// servers it was built with goes out on a Transport of this package, kept
// for that server; any other request (https, a server behind an HTTP
// proxy, a host it was not given) goes through the net/http Transport it
// wraps.
type Hosts struct {
	fallback *http.Transport
	// plain holds a Transport for each plain-HTTP server's host, as its
	// URL spells it: a request to the same server spelled otherwise
	// (with or without :80) takes the fallback.
	plain map[string]*Transport
}

// NewHosts routes the plain-HTTP servers among servers that Addr gives an
// address for (fallback's Proxy sends them through no proxy) to Transports
// of their own, one for each host, with no timeout of their own: the
// request's context bounds it. The Proxy is asked here, once.
func NewHosts(fallback *http.Transport, servers []*url.URL) *Hosts {
	h := &Hosts{fallback: fallback, plain: map[string]*Transport{}}
	// A host goes direct only if every server on it may: a Proxy that
	// looks beyond the host (at the path) may send one server of a host
	// through a proxy and not another, and requests are routed by host.
	excluded := map[string]bool{}
	for _, u := range servers {
		addr := Addr(u, fallback)
		switch {
		case addr == "":
			if u.Scheme == "http" {
				excluded[u.Host] = true
			}
		case h.plain[u.Host] == nil:
			h.plain[u.Host] = New(addr, 0)
		}
	}
	for host := range excluded {
		delete(h.plain, host)
	}
	return h
}

// RoundTrip sends req on the Transport of its server, or through the
// fallback.
func (h *Hosts) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" {
		if t := h.plain[req.URL.Host]; t != nil {
			return t.RoundTrip(req)
		}
	}
	return h.fallback.RoundTrip(req)
}

// CloseIdleConnections closes the connections kept for reuse, on every
// Transport and the fallback.
func (h *Hosts) CloseIdleConnections() {
	for _, t := range h.plain {
		t.CloseIdleConnections()
	}
	h.fallback.CloseIdleConnections()
}

// Fallback is the net/http Transport that carries what the plain-HTTP
// Transports do not.
func (h *Hosts) Fallback() *http.Transport { return h.fallback }
