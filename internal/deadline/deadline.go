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
// connection held until then), and the deadline moves to now when the
// handler returns, so the drain fails at once and the connection is
// closed. Once the body has been read to its end the deadline is lifted,
// so that answers that take long (a held call, a stream) are not cut.
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
		h.ServeHTTP(w, r)
		if !b.done {
			_ = rc.SetReadDeadline(time.Now())
		}
	})
}

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
