package proxy

import (
	"sync"
	"time"
)

// principalLimit bounds how many of one principal's requests of one kind this
// replica serves at once: Server.forwarding the allowed calls it forwards
// (each holds a connection to its upstream until answered), Server.held
// the requests it holds open waiting for a decision: held asks (retries
// that attach to a parked call included) and status long-polls. Each held request keeps a
// connection and a goroutine, and with Redis re-reads its call every poll
// interval; without a bound, one agent key could hold thousands (an
// attaching retry is never refused, and a long-poll parks nothing). A
// request past the bound is not refused: it is answered at once, as with
// "Prefer: respond-async", and can follow its call by its status URL.
type principalLimit struct {
	max int // 0: no bound
	mu  sync.Mutex
	n   map[string]int
}

func newPrincipalLimit(max int) *principalLimit {
	return &principalLimit{max: max, n: make(map[string]int)}
}

// take reserves a place for one more held request of principal, and
// reports whether there was one; a true take is paired with a done.
func (l *principalLimit) take(principal string) bool {
	if l.max <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[principal] >= l.max {
		return false
	}
	l.n[principal]++
	return true
}

// done gives back a place take reserved.
func (l *principalLimit) done(principal string) {
	if l.max <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[principal]--; l.n[principal] <= 0 {
		delete(l.n, principal) // the map holds only principals with held requests
	}
}

// holdPlace is how long a request of principal may be held: d, when the
// principal has a place left (release gives it back), else 0, so that the
// request is answered at once with its call as it stands.
func (s *Server) holdPlace(principal string, d time.Duration) (time.Duration, func()) {
	if d <= 0 {
		return d, func() {}
	}
	if !s.held.take(principal) {
		s.metrics.notHeld.Inc()
		return 0, func() {}
	}
	return d, func() { s.held.done(principal) }
}
