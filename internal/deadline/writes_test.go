package deadline

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// TestWrites: a client that takes no bytes has its answer's write fail
// within the timeout, and its connection closed; an answer held for longer
// than the timeout before its first byte, or streamed in pieces slower
// than it, is not cut; nor is a 100 Continue after an idle keep-alive.
func TestWrites(t *testing.T) {
	const timeout = 600 * time.Millisecond
	wrote := make(chan error, 1)
	srv := httptest.NewServer(Writes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big": // more than any socket buffer takes
			chunk := make([]byte, 64<<10)
			var err error
			for i := 0; i < 1024 && err == nil; i++ {
				_, err = w.Write(chunk)
			}
			wrote <- err
		case "/slow": // 16 MiB to a client that takes it slowly, but steadily
			chunk := make([]byte, 64<<10)
			var err error
			for i := 0; i < 256 && err == nil; i++ {
				_, err = w.Write(chunk)
			}
			wrote <- err
		case "/held": // a decision that takes longer than the timeout
			time.Sleep(3 * timeout)
			_, _ = io.WriteString(w, "decided")
		case "/stream": // events slower than the timeout
			for i := range 3 {
				_, _ = io.WriteString(w, "event "+string(rune('0'+i))+"\n")
				http.NewResponseController(w).Flush()
				time.Sleep(2 * timeout)
			}
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(b)
		}
	}), timeout))
	t.Cleanup(srv.Close)

	// A client that never reads.
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(1024)
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the write to a client that takes nothing: %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write to a client that takes nothing is still waiting")
	}

	// A client that reads 1 MiB every 60 ms: the answer takes longer
	// than the timeout, each write does not.
	res, err := http.Get(srv.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for {
		m, err := io.CopyN(io.Discard, res.Body, 1<<20)
		n += m
		if err != nil {
			break
		}
		time.Sleep(60 * time.Millisecond)
	}
	res.Body.Close()
	if err := <-wrote; err != nil || n != 16<<20 {
		t.Fatalf("a slow but steady reader got %d bytes, the writes ended with %v; want all 16 MiB", n, err)
	}

	for path, want := range map[string]string{"/held": "decided", "/stream": "event 0\nevent 1\nevent 2\n"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q whole", path, b, err, want)
		}
	}

	// A keep-alive connection idle past the timeout, then a request that
	// waits for 100 Continue: the server's own write of it has time.
	k, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	rd := bufio.NewReader(k)
	ask := func(expect bool) string {
		t.Helper()
		h := "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
		if expect {
			h += "Expect: 100-continue\r\n"
		}
		if _, err := io.WriteString(k, h+"\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = k.SetReadDeadline(time.Now().Add(5 * time.Second))
		if expect {
			line, err := rd.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
				t.Fatalf("waiting for 100 Continue: %q, %v", line, err)
			}
			if _, err := rd.ReadString('\n'); err != nil { // the blank line
				t.Fatal(err)
			}
		}
		if _, err := io.WriteString(k, "hi"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return string(b)
	}
	if got := ask(false); got != "hi" {
		t.Fatalf("first request: %q", got)
	}
	time.Sleep(3 * timeout)
	if got := ask(true); got != "hi" {
		t.Fatalf("after an idle keep-alive, with Expect: 100-continue: %q", got)
	}
}
