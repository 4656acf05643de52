package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// countingUpstream is an upstream that counts the connections it accepts
// and records the Accept-Encoding of each request.
type countingUpstream struct {
	*httptest.Server
	conns    atomic.Int64
	mu       sync.Mutex
	encoding [][]string
}

func newCountingUpstream(t *testing.T, idle time.Duration) *countingUpstream {
	t.Helper()
	u := &countingUpstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.encoding = append(u.encoding, r.Header.Values("Accept-Encoding"))
		u.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	u.Config.IdleTimeout = idle
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// plainClient sends what it is given: no Accept-Encoding of its own.
var plainClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

func callOK(t *testing.T, env *testEnv) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, env.url+"/files", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer agent-key")
	res, err := plainClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("status %d body %q", res.StatusCode, body)
	}
}

// Allowed calls to a plain-HTTP upstream share its connections, and the
// upstream receives the headers the policy saw: no Accept-Encoding the
// agent did not send.
func TestDirectReusesConnections(t *testing.T) {
	up := newCountingUpstream(t, 0)
	env := newTestServer(t, allowAll, func(c *Config) { c.Upstreams[0].URL, _ = url.Parse(up.URL) })
	for range 5 {
		callOK(t, env)
	}
	if n := up.conns.Load(); n != 1 {
		t.Errorf("5 calls in turn opened %d upstream connections, want 1", n)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	for i, v := range up.encoding {
		if len(v) != 0 {
			t.Errorf("call %d reached the upstream with Accept-Encoding %q, which the agent did not send", i, v)
		}
	}
}

// A connection the upstream closed while it sat idle (its keep-alive
// timeout) is found closed before it is used: the next call goes out on a
// new one instead of failing.
func TestDirectRedialsAfterUpstreamClosedIdle(t *testing.T) {
	up := newCountingUpstream(t, 30*time.Millisecond)
	env := newTestServer(t, allowAll, func(c *Config) { c.Upstreams[0].URL, _ = url.Parse(up.URL) })
	callOK(t, env)
	deadline := time.Now().Add(5 * time.Second)
	for up.conns.Load() == 1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // past the upstream's idle timeout
		callOK(t, env)
	}
	if up.conns.Load() < 2 {
		t.Fatal("the upstream never closed its idle connection")
	}
}

// Bytes an upstream sends beyond its answer are never read as the next
// call's answer: the connection they came on is not used again, whether
// they came with the answer or later, while it sat idle.
func TestDirectNeverReadsUnaskedBytesAsAnAnswer(t *testing.T) {
	const forged = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"
	for name, later := range map[string]bool{"with the answer": false, "while idle": true} {
		t.Run(name, func(t *testing.T) {
			addr, accepted := testkit.RawServer(t, func(c net.Conn) {
				testkit.ReadRequests(c, func(*http.Request) {
					if later {
						_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
						time.Sleep(20 * time.Millisecond)
						_, _ = io.WriteString(c, forged)
						return
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"+forged)
				})
			})
			env := newTestServer(t, allowAll, func(c *Config) { c.Upstreams[0].URL, _ = url.Parse("http://" + addr) })
			for range 3 {
				callOK(t, env)
				time.Sleep(50 * time.Millisecond)
			}
			if n := accepted.Load(); n != 3 {
				t.Errorf("3 calls opened %d connections, want 3: a connection with bytes left on it was used again", n)
			}
		})
	}
}

// An upstream that toolgate reaches through net/http's Transport (https
// here) does not get the Accept-Encoding the Transport adds on its own
// either.
func TestTransportAddsNoAcceptEncoding(t *testing.T) {
	var got []string
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Values("Accept-Encoding")
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	env := newTestServer(t, allowAll, func(c *Config) { c.Upstreams[0].URL = u })
	rt := env.server.upstreams[0].transport.(*timedTransport).base
	base, ok := rt.(*http.Transport)
	if !ok {
		t.Fatalf("an https upstream's transport is %T, want net/http's", rt)
	}
	// Trust the test server's certificate, as a deployment trusts its
	// upstream's.
	base.TLSClientConfig = &tls.Config{RootCAs: up.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	callOK(t, env)
	if len(got) != 0 {
		t.Errorf("the upstream received Accept-Encoding %q, which the agent did not send", got)
	}
}

// plainConn hides a TCP connection's socket, as connections in memory
// have none (quickstart's).
type plainConn struct{ net.Conn }

// An upstream dialled by a Dial of its own (quickstart's, in memory) keeps
// net/http's Transport, whose read loop finds a closed connection without
// looking at a socket: its connections are reused, and one the upstream
// closed is not.
func TestCustomDialKeepsTransport(t *testing.T) {
	up := newCountingUpstream(t, 100*time.Millisecond)
	u, _ := url.Parse(up.URL)
	var dials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return plainDial(ctx, network, addr)
	}
	env := newTestServer(t, allowAll, func(c *Config) { c.Upstreams[0].URL = u; c.Upstreams[0].Dial = dial })
	for range 3 {
		callOK(t, env)
	}
	if n, d := up.conns.Load(), dials.Load(); n != 1 || d != 1 {
		t.Errorf("3 calls in turn opened %d connections through %d dials, want 1 through the upstream's Dial", n, d)
	}
	time.Sleep(300 * time.Millisecond) // past the upstream's idle timeout: it hangs up
	callOK(t, env)
	if n, d := up.conns.Load(), dials.Load(); n != 2 || d != 2 {
		t.Errorf("after the upstream closed the idle connection: %d connections through %d dials, want 2", n, d)
	}
}

// switchingUpstream reads each request and answers 101.
func switchingUpstream(t *testing.T) *url.URL {
	addr, _ := testkit.RawServer(t, func(c net.Conn) {
		testkit.ReadRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\n")
		})
	})
	u, _ := url.Parse("http://" + addr)
	return u
}

// plainDial dials TCP but hides the socket: the upstream keeps the
// Transport (newUpstream), to compare with.
func plainDial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return plainConn{c}, nil
}

// An upstream's 101 is the same answer on either transport: refused as a
// switch of protocols (502 "Upstream switched protocols") for an allowed
// call, and an approved call it answered was executed, not lost.
func TestDirectSwitchedProtocolsAsTransport(t *testing.T) {
	for _, direct := range []bool{false, true} {
		env := newTestServer(t, allowAll, func(c *Config) {
			c.Upstreams[0].URL = switchingUpstream(t)
			if !direct {
				c.Upstreams[0].Dial = plainDial
			}
		})
		req, _ := http.NewRequest(http.MethodPost, env.url+"/files", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer agent-key")
		res, err := plainClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ Title string }
		_ = json.NewDecoder(res.Body).Decode(&p)
		res.Body.Close()
		if res.StatusCode != http.StatusBadGateway || p.Title != "Upstream switched protocols" {
			t.Errorf("direct=%v: status %d title %q, want 502 \"Upstream switched protocols\"", direct, res.StatusCode, p.Title)
		}
		sr, _ := json.Marshal(storedRequest{Method: http.MethodPost, Path: "/files", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{}`)})
		pc := pending.Call{ID: "call-1", Upstream: env.server.cfg.Upstreams[0].Name, Request: sr, ClaimedAt: time.Now()}
		if state, _ := env.server.sendClaimed(context.Background(), pc); state != pending.Executed {
			t.Errorf("direct=%v: an approved call answered 101 ended %v, want executed", direct, state)
		}
	}
}
