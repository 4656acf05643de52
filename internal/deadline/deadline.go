// Package deadline bounds the time a request body may take to arrive. A
// connection that sends its headers and then trickles its body, or stops,
// would otherwise hold a goroutine, a descriptor and the request's memory
// for as long as it likes, before anyone has looked at its credentials.
package deadline

import (
	"io"
	"net/http"
	"time"
)

// Body wraps h so that the whole body of each request must arrive within
// timeout of the request's start: past it, a read of the body fails with an
// error matching os.ErrDeadlineExceeded. A body the handler did not read to
// its end is not waited for at all: net/http drains it before it writes the
// answer (so a refusal of a trickled body arrived only at the deadline, the
// connection held until then). Such an answer says "Connection: close",
// which skips that drain, and the deadline moves to now when the handler
// returns, so that the drain net/http still tries on closing the body fails
// at once. The connection is not reused: a drain that found the body already
// buffered would otherwise start net/http's background read under the
// past deadline, whose timeout cancels the contexts of the requests that
// follow on the connection. Once the body has been read to its end the
// deadline is lifted, so that answers that take long (a held call, a
// stream) are not cut.
func Body(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			// The connection takes no deadline (not a net.Conn the
			// server owns): nothing to bound here.
			h.ServeHTTP(w, r)
			return
		}
		b := &body{ReadCloser: r.Body, rc: rc}
		r.Body = b
		cw := &closeUnread{ResponseWriter: w, b: b}
		h.ServeHTTP(cw, r)
		if !b.done {
			if !cw.wrote {
				w.Header().Set("Connection", "close")
			}
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

// closeUnread marks an answer "Connection: close" when its headers go out
// before the request's body was read to its end.
type closeUnread struct {
	http.ResponseWriter
	b     *body
	wrote bool // the final headers are written
}

func (c *closeUnread) WriteHeader(code int) {
	if !c.wrote && code >= http.StatusOK {
		c.wrote = true
		if !c.b.done {
			c.Header().Set("Connection", "close")
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *closeUnread) Write(p []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(p)
}

// Flush and Unwrap keep what the server's writer does reachable, directly
// (http.Flusher) and through http.ResponseController.
func (c *closeUnread) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

func (c *closeUnread) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// body lifts the read deadline when the body has been read in full.
type body struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
