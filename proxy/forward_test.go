package proxy

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestForwardOneWrite: a forwarded call with a body leaves toolgate in one
// write, headers and body together, so the upstream is woken once. (Go's
// ReverseProxy hands the transport a body it cannot tell is in memory,
// and the transport then writes the headers on their own.)
func TestForwardOneWrite(t *testing.T) {
	var writes atomic.Int64
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{conn, &writes}, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	env := newTestServer(t, allowAll, func(c *Config) { c.Upstreams[0].Transport = tr })
	const calls = 5
	body := `{"path":"notes.txt","content":"` + strings.Repeat("x", 300) + `"}`
	for range calls {
		res := post(t, env.url+"/tools/Read", body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d, want 200", res.StatusCode)
		}
	}
	reqs := env.upstream.Requests()
	if len(reqs) != calls {
		t.Fatalf("upstream received %d calls, want %d", len(reqs), calls)
	}
	for i, r := range reqs {
		if string(r.Body) != body {
			t.Fatalf("call %d: upstream received %q, want %q", i, r.Body, body)
		}
	}
	if got := writes.Load(); got != calls {
		t.Fatalf("%d writes to the upstream for %d calls, want one each", got, calls)
	}
}
