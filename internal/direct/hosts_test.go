package direct

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
)

// countingFallback is a net/http Transport that counts its dials.
func countingFallback() (*http.Transport, *atomic.Int64) {
	var dials atomic.Int64
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	return tr, &dials
}

func answeringOK(t *testing.T) (*httptest.Server, *url.URL) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return srv, u
}

// countingProxy is an HTTP proxy that answers every request itself and
// counts them.
func countingProxy(t *testing.T) (*url.URL, *atomic.Int64) {
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		proxied.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(proxy.Close)
	pu, _ := url.Parse(proxy.URL)
	return pu, &proxied
}

func get(t *testing.T, rt http.RoundTripper, u string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	res, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
}

// A request to a plain-HTTP server Hosts was given goes out on a
// Transport of this package; one to a server it was not given goes
// through the fallback.
func TestHostsRoutes(t *testing.T) {
	_, given := answeringOK(t)
	other, _ := answeringOK(t)
	fallback, dials := countingFallback()
	h := NewHosts(fallback, []*url.URL{given})
	t.Cleanup(h.CloseIdleConnections)
	get(t, h, given.String()+"/hook")
	if n := dials.Load(); n != 0 {
		t.Errorf("a request to a given plain-HTTP server: the fallback dialled %d times, want 0", n)
	}
	get(t, h, other.URL+"/hook")
	if n := dials.Load(); n != 1 {
		t.Errorf("a request to another server: the fallback dialled %d times, want 1", n)
	}
}

// A server the fallback's Proxy sends through a proxy keeps the fallback,
// and with it the proxy.
func TestHostsKeepFallbackProxy(t *testing.T) {
	_, given := answeringOK(t)
	pu, proxied := countingProxy(t)
	fallback := &http.Transport{Proxy: http.ProxyURL(pu)}
	h := NewHosts(fallback, []*url.URL{given})
	t.Cleanup(h.CloseIdleConnections)
	get(t, h, given.String()+"/hook")
	if n := proxied.Load(); n != 1 {
		t.Errorf("the proxy received %d requests, want 1", n)
	}
}

// Two servers on one host, of which the fallback's Proxy sends only one
// through a proxy (a Proxy that looks at the path): requests are routed
// by host, so the host keeps the fallback for both, and the proxied
// server's requests still reach the proxy.
func TestHostsSharedHostKeepsProxy(t *testing.T) {
	_, server := answeringOK(t)
	pu, proxied := countingProxy(t)
	fallback := &http.Transport{Proxy: func(r *http.Request) (*url.URL, error) {
		if r.URL.Path == "/external" {
			return pu, nil
		}
		return nil, nil
	}}
	external, _ := url.Parse(server.String() + "/external")
	internal, _ := url.Parse(server.String() + "/internal")
	h := NewHosts(fallback, []*url.URL{external, internal})
	t.Cleanup(h.CloseIdleConnections)
	get(t, h, external.String())
	if n := proxied.Load(); n != 1 {
		t.Errorf("the proxy received %d requests for the server its Proxy names it for, want 1", n)
	}
}
