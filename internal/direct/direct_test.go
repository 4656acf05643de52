package direct

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// An answer whose body was not read to its end takes its connection with
// it: what is left would be read as the next answer. Closing it does not
// wait for the rest, which for a stream may never end.
func TestClosesConnectionOfUnreadBody(t *testing.T) {
	closed := make(chan struct{}, 4)
	addr, accepted := testkit.RawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		// A stream without end, until the client hangs up.
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for {
			if _, err := io.WriteString(c, "6\r\ndata:\n\r\n"); err != nil {
				closed <- struct{}{}
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	tr := New(addr, time.Second)
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

// A connection idle for the idle timeout is closed although no request
// comes to take it.
func TestClosesIdleConnectionsInTime(t *testing.T) {
	gone := make(chan struct{})
	addr, _ := testkit.RawServer(t, func(c net.Conn) {
		testkit.ReadRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		})
		close(gone) // ReadRequests ends when the client hangs up
	})
	tr := New(addr, time.Second)
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

// A request cancelled while it waits for the answer ends at once, and its
// connection is closed.
func TestCancelledWhileWaiting(t *testing.T) {
	gone := make(chan struct{})
	addr, _ := testkit.RawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = br.ReadByte() // blocks until the client closes the connection
		close(gone)
	})
	tr := New(addr, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	start := time.Now()
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the cancelled request took %v to end", took)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Error("the cancelled request's connection was left open")
	}
}

// A server that sends informational answers without end does not hold
// the request: past five, it fails, as with net/http's Transport.
func TestBoundsInformationalAnswers(t *testing.T) {
	addr, _ := testkit.RawServer(t, func(c net.Conn) {
		testkit.ReadRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", 6)+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		})
	})
	tr := New(addr, time.Second)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if res, err := tr.RoundTrip(req); err == nil {
		res.Body.Close()
		t.Fatalf("six 103s then 200: status %d, want an error", res.StatusCode)
	}
}

// The pool keeps at most maxIdle idle connections; the next is
// closed.
func TestBoundsIdleConnections(t *testing.T) {
	tr := New("127.0.0.1:1", 0)
	var last net.Conn
	for range maxIdle + 1 {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		tr.put(&pooledConn{conn: a})
		last = b
	}
	if n := len(tr.idle); n != maxIdle {
		t.Errorf("%d idle connections kept, want %d", n, maxIdle)
	}
	_ = last.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := last.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the connection past the bound: read %v, want it closed (EOF)", err)
	}
}

// A server that sends headers without end fails its request once the
// answer's head passes maxAnswerHead, as with net/http's Transport.
func TestBoundsAnswerHead(t *testing.T) {
	addr, _ := testkit.RawServer(t, func(c net.Conn) {
		testkit.ReadRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
			for range 2 * maxAnswerHead / len(line) {
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
		})
	})
	tr := New(addr, 10*time.Second)
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

// A server that answers before it has read the whole request (a 413)
// and hangs up: the caller gets that answer, not a failed write.
func TestEarlyAnswerToUnreadRequest(t *testing.T) {
	addr, _ := testkit.RawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbig")
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // reset: the rest of the request is refused
		}
	})
	tr := New(addr, 10*time.Second)
	body := strings.Repeat("x", 64<<20) // more than the socket buffers hold
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(body))
	res, err := tr.RoundTrip(req)
	want413(t, res, err)
}

// An answer with no body (to a HEAD, a 204) leaves its connection for the
// next request although nothing reads the body.
func TestReusesAfterAnswerWithoutBody(t *testing.T) {
	addr, accepted := testkit.RawServer(t, func(c net.Conn) {
		testkit.ReadRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		})
	})
	tr := New(addr, time.Second)
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
		t.Errorf("3 requests answered 204 opened %d connections, want 1", n)
	}
}

// want413 fails t unless the round trip gave the server's early 413.
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

// earlyAnswer413 is the answer of a server that refuses a request
// before reading its body.
const earlyAnswer413 = "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbig"

// answeringEarly is a server that reads a request's head, sends answer,
// and then neither reads the body nor hangs up until the test ends.
func answeringEarly(t *testing.T, answer string) string {
	t.Helper()
	release := make(chan struct{})
	addr, _ := testkit.RawServer(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.WriteString(c, answer)
		<-release
	})
	t.Cleanup(func() { close(release) }) // before rawUpstream's wait
	return addr
}

// A server that answers early (a 413) without reading the rest of a
// large request, and keeps the connection open: the caller gets that
// answer at once, as with net/http's Transport, whose read runs beside
// its write; written first, the body would block until the request's
// deadline.
func TestEarlyAnswerUpstreamKeepsOpen(t *testing.T) {
	addr := answeringEarly(t, earlyAnswer413)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", strings.NewReader(strings.Repeat("x", 32<<20)))
	res, err := New(addr, 5*time.Second).RoundTrip(req)
	want413(t, res, err)
}

// A header net/http's Transport would refuse to send (a control character in a
// value, a name that is not a token) fails the request: Request.Write
// would send CR and LF as spaces and leave a bad name out, and the
// server would read another header than the caller had.
func TestRefusesInvalidHeaders(t *testing.T) {
	addr, accepted := testkit.RawServer(t, func(c net.Conn) {
		testkit.ReadRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		})
	})
	tr := New(addr, time.Second)
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

// A body of unknown length (ContentLength 0 with a Body: sent chunked) is
// written beside the read of the answer too: an early answer comes back
// at once.
func TestEarlyAnswerUnknownLength(t *testing.T) {
	addr := answeringEarly(t, earlyAnswer413)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", io.NopCloser(strings.NewReader(strings.Repeat("x", 32<<20))))
	req.ContentLength = 0 // unknown: the Body is not NoBody
	res, err := New(addr, 5*time.Second).RoundTrip(req)
	want413(t, res, err)
}

// When the answer's head is bad while the body is still being written, the
// request fails for what the server answered, not for the end of the
// write that the client's own close of the connection brought.
func TestReadErrorNotMaskedByOwnClose(t *testing.T) {
	addr := answeringEarly(t, "HTTP/1.1 abc nonsense\r\n\r\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", strings.NewReader(strings.Repeat("x", 32<<20)))
	_, err := New(addr, 5*time.Second).RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("error %v, want the malformed answer's", err)
	}
}

// CloseIdleConnections stops the timer that closes idle connections, so
// a Transport its user is done with is not kept for the idle timeout.
func TestCloseIdleStopsExpiry(t *testing.T) {
	addr, _ := testkit.RawServer(t, func(c net.Conn) {
		testkit.ReadRequests(c, func(*http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		})
	})
	tr := New(addr, time.Second)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	tr.CloseIdleConnections()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.expiry != nil {
		t.Errorf("the idle timer is still armed after CloseIdleConnections, with %d idle", len(tr.idle))
	}
}

// A timer that fired while CloseIdleConnections ran (its expire waiting
// for the lock) leaves one chain of timers, not two: after the next
// CloseIdleConnections no timer runs, and a connection idle since long
// ago stays open until one is armed again.
func TestCloseIdleLeavesOneTimer(t *testing.T) {
	tr := New("127.0.0.1:1", 0)
	tr.idleTimeout = 50 * time.Millisecond
	// A timer that has fired: Stop reports false, as for one whose
	// expire is waiting for the lock.
	tr.expiry = time.AfterFunc(time.Hour, func() {})
	tr.expiry.Stop()
	tr.CloseIdleConnections()
	c2, p2 := net.Pipe()
	t.Cleanup(func() { c2.Close(); p2.Close() })
	tr.put(&pooledConn{conn: c2})
	tr.expire() // the fired timer's expire, once it has the lock
	tr.CloseIdleConnections()
	c3, p3 := net.Pipe()
	t.Cleanup(func() { c3.Close(); p3.Close() })
	tr.mu.Lock()
	tr.idle = append(tr.idle, &pooledConn{conn: c3, since: time.Now().Add(-time.Hour)})
	tr.mu.Unlock()
	time.Sleep(3 * tr.idleTimeout)
	_ = p3.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := p3.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a timer ran after CloseIdleConnections and closed an idle connection (read: %v)", err)
	}
}
