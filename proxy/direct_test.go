package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
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

// rawUpstream accepts connections and hands each to serve.
func rawUpstream(t *testing.T, serve func(net.Conn)) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close() // toolgate may keep some in its pool
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { defer c.Close(); serve(c) })
		}
	})
	return ln.Addr().String(), accepted
}

// readRequests calls answer with each request read from c, until c ends.
func readRequests(c net.Conn, answer func(*http.Request)) {
	br := bufio.NewReader(c)
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		answer(r)
	}
}

// Bytes an upstream sends beyond its answer are never read as the next
// call's answer: the connection they came on is not used again, whether
// they came with the answer or later, while it sat idle.
func TestDirectNeverReadsUnaskedBytesAsAnAnswer(t *testing.T) {
	const forged = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"
	for name, later := range map[string]bool{"with the answer": false, "while idle": true} {
		t.Run(name, func(t *testing.T) {
			addr, accepted := rawUpstream(t, func(c net.Conn) {
				readRequests(c, func(*http.Request) {
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

// An answer whose body was not read to its end takes its connection with
// it: what is left would be read as the next answer. Closing it does not
// wait for the rest, which for a stream may never end.
func TestDirectClosesConnectionOfUnreadBody(t *testing.T) {
	closed := make(chan struct{}, 4)
	addr, accepted := rawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		// A stream without end, until toolgate hangs up.
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for {
			if _, err := io.WriteString(c, "6\r\ndata:\n\r\n"); err != nil {
				closed <- struct{}{}
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	tr := newDirectTransport(addr, time.Second)
	defer tr.CloseIdleConnections()
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/stream", nil)
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = res.Body.Read(make([]byte, 1))
		done := make(chan struct{})
		go func() { res.Body.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("closing a stream's body waited for its end")
		}
	}
	if n := accepted.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the half-read one was used again", n)
	}
	for range 2 {
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("the connection of a half-read answer was left open")
		}
	}
}

// A connection idle for the idle timeout is closed although no call
// comes to take it.
func TestDirectClosesIdleConnectionsInTime(t *testing.T) {
	gone := make(chan struct{})
	addr, _ := rawUpstream(t, func(c net.Conn) {
		readRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		})
		close(gone) // readRequests ends when toolgate hangs up
	})
	tr := newDirectTransport(addr, time.Second)
	tr.idleTimeout = 50 * time.Millisecond
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("an idle connection outlived the idle timeout by seconds")
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 0 {
		t.Errorf("%d idle connections kept past their time", len(tr.idle))
	}
}

// A call cancelled while it waits for the answer ends at once, and its
// connection is closed.
func TestDirectCancelledWhileWaiting(t *testing.T) {
	gone := make(chan struct{})
	addr, _ := rawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = br.ReadByte() // blocks until toolgate closes the connection
		close(gone)
	})
	tr := newDirectTransport(addr, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	start := time.Now()
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the cancelled call took %v to end", took)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Error("the cancelled call's connection was left open")
	}
}

// An upstream that sends informational answers without end does not hold
// the call: past five, the call fails, as with net/http's Transport.
func TestDirectBoundsInformationalAnswers(t *testing.T) {
	addr, _ := rawUpstream(t, func(c net.Conn) {
		readRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 6)+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		})
	})
	tr := newDirectTransport(addr, time.Second)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if res, err := tr.RoundTrip(req); err == nil {
		res.Body.Close()
		t.Fatalf("six 103s then 200: status %d, want an error", res.StatusCode)
	}
}

// The pool keeps at most maxDirectIdle idle connections; the next is
// closed.
func TestDirectBoundsIdleConnections(t *testing.T) {
	tr := newDirectTransport("127.0.0.1:1", 0)
	var last net.Conn
	for range maxDirectIdle + 1 {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		tr.put(&directConn{conn: a})
		last = b
	}
	if n := len(tr.idle); n != maxDirectIdle {
		t.Errorf("%d idle connections kept, want %d", n, maxDirectIdle)
	}
	_ = last.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := last.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the connection past the bound: read %v, want it closed (EOF)", err)
	}
}

// An upstream that sends headers without end fails its call once the
// answer's head passes maxAnswerHead, as with net/http's Transport.
func TestDirectBoundsAnswerHead(t *testing.T) {
	addr, _ := rawUpstream(t, func(c net.Conn) {
		readRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
			for range 2 * maxAnswerHead / len(line) {
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
		})
	})
	tr := newDirectTransport(addr, 10*time.Second)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	res, err := tr.RoundTrip(req)
	if err == nil {
		res.Body.Close()
		t.Fatalf("a head of %d bytes: status %d, want an error", 2*maxAnswerHead, res.StatusCode)
	}
	if !errors.Is(err, errAnswerHeadTooLarge) {
		t.Errorf("error %v, want the head's bound", err)
	}
}

// An upstream that answers before it has read the whole request (a 413)
// and hangs up: the agent gets that answer, not a failed write.
func TestDirectEarlyAnswerToUnreadRequest(t *testing.T) {
	addr, _ := rawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbig")
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // reset: the rest of the request is refused
		}
	})
	tr := newDirectTransport(addr, 10*time.Second)
	body := strings.Repeat("x", 64<<20) // more than the socket buffers hold
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(body))
	res, err := tr.RoundTrip(req)
	want413(t, res, err)
}

// An answer with no body (to a HEAD, a 204) leaves its connection for the
// next call although nothing reads the body.
func TestDirectReusesAfterAnswerWithoutBody(t *testing.T) {
	addr, accepted := rawUpstream(t, func(c net.Conn) {
		readRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		})
	})
	tr := newDirectTransport(addr, time.Second)
	defer tr.CloseIdleConnections()
	for range 3 {
		req, _ := http.NewRequest(http.MethodDelete, "http://"+addr+"/", nil)
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("3 calls answered 204 opened %d connections, want 1", n)
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

// want413 fails t unless the round trip gave the upstream's early 413.
func want413(t *testing.T, res *http.Response, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("error %v, want the upstream's 413 at once", err)
	}
	defer res.Body.Close()
	if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusRequestEntityTooLarge || string(b) != "big" {
		t.Errorf("status %d body %q, want the upstream's 413", res.StatusCode, b)
	}
}

// earlyAnswer413 is the answer of an upstream that refuses a request
// before reading its body.
const earlyAnswer413 = "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbig"

// answeringEarly is an upstream that reads a request's head, sends answer,
// and then neither reads the body nor hangs up until the test ends.
func answeringEarly(t *testing.T, answer string) string {
	t.Helper()
	release := make(chan struct{})
	addr, _ := rawUpstream(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.WriteString(c, answer)
		<-release
	})
	t.Cleanup(func() { close(release) }) // before rawUpstream's wait
	return addr
}

// An upstream that answers early (a 413) without reading the rest of a
// large request, and keeps the connection open: the agent gets that
// answer at once, as with the Transport, whose read runs beside its
// write; written first, the body would block until the call's deadline.
func TestDirectEarlyAnswerUpstreamKeepsOpen(t *testing.T) {
	addr := answeringEarly(t, earlyAnswer413)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", strings.NewReader(strings.Repeat("x", 32<<20)))
	res, err := newDirectTransport(addr, 5*time.Second).RoundTrip(req)
	want413(t, res, err)
}

// A header the Transport would refuse to send (a control character in a
// value, a name that is not a token) fails the request: Request.Write
// would send CR and LF as spaces and leave a bad name out, and the
// upstream would read another header than toolgate had.
func TestDirectRefusesInvalidHeaders(t *testing.T) {
	addr, accepted := rawUpstream(t, func(c net.Conn) {
		readRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		})
	})
	tr := newDirectTransport(addr, time.Second)
	for _, h := range []http.Header{
		{"X-Toolgate-Subject": {"alice\r\nX-Role: admin"}},
		{"X-Toolgate-Subject": {"alice\x00admin"}},
		{"X Role": {"admin"}},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", nil)
		req.Header = h
		if res, err := tr.RoundTrip(req); err == nil {
			res.Body.Close()
			t.Errorf("header %q was sent, want the request refused", h)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections opened for requests refused before sending", n)
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

// A body of unknown length (ContentLength 0 with a Body: sent chunked) is
// written beside the read of the answer too: an early answer comes back
// at once.
func TestDirectEarlyAnswerUnknownLength(t *testing.T) {
	addr := answeringEarly(t, earlyAnswer413)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", io.NopCloser(strings.NewReader(strings.Repeat("x", 32<<20))))
	req.ContentLength = 0 // unknown: the Body is not NoBody
	res, err := newDirectTransport(addr, 5*time.Second).RoundTrip(req)
	want413(t, res, err)
}

// When the answer's head is bad while the body is still being written, the
// call fails for what the upstream answered, not for the end of the write
// that toolgate's own close of the connection brought.
func TestDirectReadErrorNotMaskedByOwnClose(t *testing.T) {
	addr := answeringEarly(t, "HTTP/1.1 abc nonsense\r\n\r\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", strings.NewReader(strings.Repeat("x", 32<<20)))
	_, err := newDirectTransport(addr, 5*time.Second).RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("error %v, want the malformed answer's", err)
	}
}

// switchingUpstream reads each request and answers 101.
func switchingUpstream(t *testing.T) *url.URL {
	addr, _ := rawUpstream(t, func(c net.Conn) {
		readRequests(c, func(*http.Request) {
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
