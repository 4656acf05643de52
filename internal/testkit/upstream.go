package testkit

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Request is one request as an Upstream received it.
type Request struct {
	Method, Path, RawPath, Query, Host string
	Header                             http.Header
	Body                               []byte
	At                                 time.Time
}

// Responder answers the n-th request (0-based) an Upstream received, after
// it is recorded. r.Body reads the recorded body again.
type Responder func(n int, w http.ResponseWriter, r *http.Request)

// Upstream is an httptest server that records every request it receives.
type Upstream struct {
	*httptest.Server

	mu      sync.Mutex
	reqs    []Request
	respond Responder
}

// NewUpstream starts an Upstream that answers with respond, or with 200
// and the JSON body {"ok":true} if respond is nil. It is closed when the
// test ends.
func NewUpstream(tb testing.TB, respond Responder) *Upstream {
	tb.Helper()
	u := &Upstream{respond: respond}
	u.Server = httptest.NewServer(u)
	tb.Cleanup(u.Close)
	return u
}

// Handler returns a Responder that hands every request to h.
func Handler(h http.Handler) Responder {
	return func(_ int, w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }
}

// ServeHTTP records r and answers it as the server does, for a caller
// that hands requests to the Upstream without a socket (a fuzzer's
// in-memory transport).
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	n := len(u.reqs)
	u.reqs = append(u.reqs, Request{
		Method: r.Method, Path: r.URL.Path, RawPath: r.URL.RawPath, Query: r.URL.RawQuery, Host: r.Host,
		Header: r.Header.Clone(), Body: body, At: time.Now(),
	})
	u.mu.Unlock()
	if u.respond == nil {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	u.respond(n, w, r)
}

// Requests returns the requests received so far, in the order they arrived.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.reqs)
}

// Reset forgets the requests received so far: Requests returns only those
// that come after it, and the Responder counts n from 0 again.
func (u *Upstream) Reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reqs = nil
}
