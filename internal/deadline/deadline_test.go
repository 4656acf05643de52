package deadline

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// serve starts a server whose handler reads the whole body (when read is
// set) and reports what the read gave.
func serve(t *testing.T, timeout time.Duration, read bool, after time.Duration) (addr string, got chan string) {
	t.Helper()
	got = make(chan string, 10)
	h := Body(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !read {
			w.WriteHeader(http.StatusUnauthorized)
			got <- "unread"
			return
		}
		b, err := io.ReadAll(r.Body)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.WriteHeader(http.StatusRequestTimeout)
			got <- "timeout"
			return
		case err != nil:
			got <- "error: " + err.Error()
			return
		}
		// A long answer after the body: the lifted deadline must not
		// cut it, nor cancel the request.
		select {
		case <-time.After(after):
		case <-r.Context().Done():
			got <- "cancelled"
			return
		}
		_, _ = fmt.Fprintf(w, "%d", len(b))
		got <- "read " + string(b)
	}), timeout)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), got
}

func TestStalledBodyTimesOut(t *testing.T) {
	addr, got := serve(t, 200*time.Millisecond, true, 0)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx")
	select {
	case g := <-got:
		if g != "timeout" {
			t.Fatalf("handler saw %q, want a deadline error", g)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled body was waited for past its deadline")
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("answer: %v %v, want 408", res, err)
	}
}

func TestUnreadBodyDoesNotHoldTheConnection(t *testing.T) {
	addr, got := serve(t, 3*time.Second, false, 0)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx")
	<-got
	// The server drains what the handler left unread before it writes the
	// answer; it gives up at once and closes instead, the answer not kept
	// until the body's deadline.
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	if res, err := http.ReadResponse(r, nil); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("answer: %v %v, want 401", res, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the answer came after %v: the unread body was waited for", d)
	}
	if _, err := io.ReadAll(r); err != nil {
		t.Fatalf("reading to the close: %v (the connection was held open)", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the connection closed after %v", d)
	}
}

func TestLongAnswerAfterTheBody(t *testing.T) {
	addr, got := serve(t, 100*time.Millisecond, true, 600*time.Millisecond)
	res, err := http.Post("http://"+addr, "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if g := <-got; g != "read hello" || string(b) != "5" {
		t.Fatalf("handler %q, answer %q: a held answer was cut by the body deadline", g, b)
	}
}

func TestStalledConnectionsLeaveNoGoroutines(t *testing.T) {
	addr, got := serve(t, 200*time.Millisecond, true, 0)
	before := runtime.NumGoroutine()
	var conns []net.Conn
	for range 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx")
	}
	for range 50 {
		<-got
	}
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.ReadAll(c) // the server closes each
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		t.Fatalf("%d goroutines after the stalled bodies timed out, %d before", n, before)
	}
}

// TestUnreadBodyCancelsNoLaterRequest: after an answer that left a small
// body unread (it had all arrived, and the handler closed it), the next
// request of the client is served with a live context: a reused
// connection must not carry net/http's background read under the
// deadline moved to now, whose timeout cancels the connection's context.
func TestUnreadBodyCancelsNoLaterRequest(t *testing.T) {
	h := Body(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// Refused on its headers, the body closed unread: net/http's
			// Close drains what has arrived, which starts its background
			// read of the connection while the deadline is still far.
			r.Body.Close()
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if err := r.Context().Err(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}), time.Minute)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for i := range 200 {
		res, err := http.Post(srv.URL, "application/x-www-form-urlencoded", strings.NewReader("csrf=x&decision=approve"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		res, err = http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("round %d: the request after an unread body was served with a cancelled context", i)
		}
	}
}
