package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/pending"
)

// hangUpSecond is an upstream that answers the first request on each
// connection and hangs up on the second after reading it, as an upstream
// that crashed while running a call would. It counts every request it
// read.
type hangUpSecond struct {
	ln    net.Listener
	mu    sync.Mutex
	reads []string // "<method> <Idempotency-Key>" per request read
}

func newHangUpSecond(t *testing.T) *hangUpSecond {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hangUpSecond{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go h.serve(c)
		}
	}()
	return h
}

func (h *hangUpSecond) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		h.mu.Lock()
		h.reads = append(h.reads, req.Method+" "+req.Header.Get("Idempotency-Key"))
		h.mu.Unlock()
		if n > 1 {
			return // read, ran, and died before answering
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
	}
}

func (h *hangUpSecond) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.reads)
}

// TestApprovedCallNeverReplayed: an approved call reaches the upstream at
// most once although approved calls may share pooled connections. A call
// that does not look idempotent goes out on a pooled connection, and when
// the upstream dies after reading it the call ends unknown, not resent; a
// call with an Idempotency-Key (which net/http would resend) goes out on a
// connection of its own and is answered.
func TestApprovedCallNeverReplayed(t *testing.T) {
	up := newHangUpSecond(t)
	u, _ := url.Parse("http://" + up.ln.Addr().String())
	pe := newParkEnv(t, func(c *Config) { c.Upstreams[0].URL = u })
	approve := func() {
		pc := pe.nextParked(t)
		if _, err := pe.store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
			t.Error(err)
		}
	}
	call := func(header ...string) (int, string) {
		t.Helper()
		go approve()
		res := post(t, pe.url+"/tools/Write", `{"path":"notes/a.txt"}`, append([]string{"Authorization", "Bearer agent-key"}, header...)...)
		defer res.Body.Close()
		return res.StatusCode, res.Header.Get(headerDecision)
	}
	// The first approved call dials, is answered, and leaves its
	// connection in the pool.
	if status, _ := call(); status != 200 || up.count() != 1 {
		t.Fatalf("first call: status %d, upstream read %d", status, up.count())
	}
	// The second goes out on that pooled connection; the upstream reads it
	// and hangs up. Sent once, outcome unknown: not resent elsewhere.
	if status, _ := call(); status != http.StatusGatewayTimeout || up.count() != 2 {
		t.Fatalf("second call: status %d (want 504), upstream read %d requests (want 2: never resent)", status, up.count())
	}
	// Warm the pool again, then send a call net/http would replay: it
	// must not use the pooled connection (where it would be hung up on
	// and resent), so it is read once and answered.
	if status, _ := call(); status != 200 || up.count() != 3 {
		t.Fatalf("third call: status %d, upstream read %d", status, up.count())
	}
	if status, _ := call("Idempotency-Key", "k-4"); status != 200 || up.count() != 4 {
		t.Fatalf("idempotent-looking call: status %d (want 200 on its own connection), upstream read %d (want 4)", status, up.count())
	}
	if got := strings.Join(up.reads, ","); got != "POST ,POST ,POST ,POST k-4" {
		t.Errorf("upstream read %s", got)
	}
}
