package deadline

import (
	"bufio"
	"net"
	"net/http"
	"time"
)

// Writes wraps h so that every write of an answer must complete within
// timeout (and has at least half of it): a client that stops taking bytes
// (it never reads, or reads a few a minute) would otherwise hold its
// connection, its goroutine, the kernel's buffers for what is queued to it
// and, for a forwarded answer, the upstream's connection, for as long as
// it likes. Held answers are not cut: the deadline is set afresh before
// each write, so it bounds how long one write waits for the client, not
// how long an answer takes. It is also set when the request starts (the
// server writes a 100 Continue itself) and when the handler returns (the
// server flushes what is buffered).
func Writes(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server's own writer takes deadlines (http.ResponseController
		// calls the same method); asked directly, as the outermost handler,
		// it costs no controller a request.
		conn, ok := w.(writeDeadliner)
		until := time.Now().Add(timeout)
		if !ok || conn.SetWriteDeadline(until) != nil {
			h.ServeHTTP(w, r) // not a connection the server owns
			return
		}
		pw := &progressWriter{ResponseWriter: w, conn: conn, timeout: timeout, until: until}
		h.ServeHTTP(pw, r)
		_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	})
}

// writeDeadliner is what net/http's response writer does for
// http.ResponseController.SetWriteDeadline.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// progressWriter sets the write deadline before each write and flush.
type progressWriter struct {
	http.ResponseWriter
	conn    writeDeadliner
	timeout time.Duration
	until   time.Time // the deadline set last
}

// renew moves the deadline to timeout from now, unless more than half of
// it is left: each write still has at least half the timeout, and a
// stream of small writes does not reset a timer at every one.
func (p *progressWriter) renew() {
	now := time.Now()
	if p.until.Sub(now) > p.timeout/2 {
		return
	}
	p.until = now.Add(p.timeout)
	_ = p.conn.SetWriteDeadline(p.until)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.renew()
	return p.ResponseWriter.Write(b)
}

func (p *progressWriter) WriteHeader(code int) {
	p.renew() // a 1xx is written at once
	p.ResponseWriter.WriteHeader(code)
}

func (p *progressWriter) Flush() { _ = p.FlushError() }

// FlushError is what http.ResponseController calls.
func (p *progressWriter) FlushError() error {
	p.renew()
	return http.NewResponseController(p.ResponseWriter).Flush()
}

// Hijack hands the connection over as it is: its new owner sets its own
// deadlines (the one set here is lifted).
func (p *progressWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(p.ResponseWriter).Hijack()
	if err == nil {
		_ = conn.SetWriteDeadline(time.Time{})
	}
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the server's writer.
func (p *progressWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }
