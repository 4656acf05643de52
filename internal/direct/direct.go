// Package direct sends HTTP/1.1 requests to one plain-HTTP server on
// connections it keeps itself, without net/http's Transport and the two
// goroutines it gives each connection. toolgate's forwards to plain-HTTP
// upstreams and its webhook deliveries to plain-HTTP receivers use it.
package direct

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Transport carries requests to one plain-HTTP/1.1 server on connections
// it keeps itself: each request is written, and its answer's head read, on
// the caller's goroutine.
//
// net/http's Transport gives every connection two goroutines of its own,
// a read loop and a write loop, and passes each request and answer between
// them and the caller over channels. For a sidecar that sends one small
// request at a time on each connection, those hand-offs and the wake-ups
// they cost were the largest part of the forward that a bare proxy does
// not also pay. The reading and writing themselves are net/http's own:
// Request.Write and ReadResponse, so the bytes on the wire are the ones
// net/http's Transport writes, with its checks of what it sends
// (checkOutbound) and its bounds on what it reads.
//
// What net/http's Transport does that this does not:
//   - it replays a replayable request (GET, or one with an Idempotency-Key)
//     that met a connection the server had just closed; here the request
//     fails, as a POST already does there. A connection the server closed
//     while it sat idle is found before it is used (socketAlive), so this
//     is the race of a close in flight;
//   - TLS, HTTP/2, HTTP proxies and connections of a Dial of the caller's:
//     a server that needs any of them is not one Addr gives an address
//     for, and goes through net/http's Transport.
type Transport struct {
	addr string // host:port of the upstream
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// headerTimeout bounds the wait for the answer's head once the
	// request is written (net/http's ResponseHeaderTimeout); 0: none.
	headerTimeout time.Duration
	idleTimeout   time.Duration

	mu     sync.Mutex
	idle   []*pooledConn // most recently used last
	expiry *time.Timer   // runs expire while idle is not empty
}

type pooledConn struct {
	conn  net.Conn
	r     *meteredReader // between conn and br
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time // idle since
}

// maxAnswerHead bounds the bytes read for an answer's head (its status
// line and headers, informational answers included): net/http's
// default MaxResponseHeaderBytes. A server that sends headers without end
// fails its request instead of filling the caller's memory.
const maxAnswerHead = 10 << 20

// meteredReader reads from a connection, at most left bytes while left is
// not negative.
type meteredReader struct {
	conn net.Conn
	left int64
}

var errAnswerHeadTooLarge = fmt.Errorf("the answer's head is larger than %d bytes", maxAnswerHead)

func (m *meteredReader) Read(p []byte) (int, error) {
	if m.left == 0 {
		return 0, errAnswerHeadTooLarge
	}
	if m.left > 0 && int64(len(p)) > m.left {
		p = p[:m.left]
	}
	n, err := m.conn.Read(p)
	if m.left > 0 {
		m.left -= int64(n)
	}
	return n, err
}

// errHeaderTimeout is the wait for an answer's head running out: a
// timeout, as net/http's Transport's own (a proxy answers it 504).
var errHeaderTimeout error = headerTimeoutError{}

type headerTimeoutError struct{}

func (headerTimeoutError) Error() string   { return "timeout awaiting response headers" }
func (headerTimeoutError) Timeout() bool   { return true }
func (headerTimeoutError) Temporary() bool { return true }

// maxIdle bounds the connections kept open while idle.
const maxIdle = 256

// maxInformational bounds the 1xx answers read before the final one: a
// server cannot hold a request with informational answers without end.
const maxInformational = 5

// New is a Transport to the server at addr (host:port, as Addr gives
// it). headerTimeout bounds the wait for each answer's head once its
// request is written; 0 leaves it to the request's context.
func New(addr string, headerTimeout time.Duration) *Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second} // net/http's DefaultTransport's
	return &Transport{addr: addr, dial: d.DialContext, headerTimeout: headerTimeout, idleTimeout: 90 * time.Second}
}

// RoundTrip sends req and reads the head of its answer. The answer's body
// reads from the connection; the connection goes back to the pool once the
// body has been read to its end and closed, and is closed otherwise.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := checkOutbound(req); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	dc, err := t.get(ctx)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	// A cancelled call closes its connection: that ends a write or read
	// blocked on it, and the connection is not reused.
	stop := context.AfterFunc(ctx, func() { dc.conn.Close() })
	w := t.send(dc, req)
	res, err := t.readHead(ctx, dc, req)
	if err != nil {
		ended, werr := w.poll()
		stop()
		dc.conn.Close()
		if !ended {
			// Ended by the close above, its error says nothing of the
			// upstream: the read's does.
			_ = w.wait()
			werr = nil
		}
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case werr != nil:
			return nil, werr // the upstream hung up on the request; no answer came
		}
		return nil, err
	}
	w.headRead()
	// A write still going on ends with the connection, which is then not
	// used again.
	written, werr := w.poll()
	reuse := !res.Close && !req.Close && written && werr == nil && res.StatusCode != http.StatusSwitchingProtocols
	body := &pooledBody{body: res.Body, t: t, dc: dc, stop: stop, reuse: reuse}
	body.eof.Store(res.Body == http.NoBody) // a HEAD's, a 204's: nothing to read
	res.Body = body
	return res, nil
}

// writeAside is the largest request body written before the answer is
// read. A larger one, or one of unknown length, is written from a
// goroutine of its own while the answer's head is read, as net/http's
// Transport does: an upstream may answer (a 413, a 401) before it has read the whole
// request, and then neither read the rest nor hang up; written first, the
// body would block in the socket buffers until the call's deadline.
// Smaller bodies fit in the sending socket's buffer alone, whatever
// window the upstream gives (on Linux 48 KiB did, with the upstream's
// receive buffer at its minimum: TestDirectEarlyAnswerSmallWindow).
const writeAside = 12 << 10

// sending is a request being written: at once (done) or from a goroutine.
type sending struct {
	conn  net.Conn
	done  bool
	err   error
	aside chan error // the goroutine's result; nil when written at once
	// mu orders the writer's start of the head's timeout and the reader's
	// end of it (head, headRead), so a write that ends after an early
	// answer leaves no deadline on the body's reads.
	mu   sync.Mutex
	head bool
}

// send writes req to dc, at once or aside (writeAside), and starts the
// wait for the answer's head (the upstream's timeout, counted from the
// end of the request, as net/http's ResponseHeaderTimeout).
func (t *Transport) send(dc *pooledConn, req *http.Request) *sending {
	w := &sending{conn: dc.conn}
	write := func() error {
		err := req.Write(dc.bw)
		if err == nil {
			err = dc.bw.Flush()
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		switch {
		case w.head:
		case err != nil:
			// The upstream may have answered and hung up before reading
			// the whole request: its answer, if it comes soon, is read
			// (net/http's Transport gives it too).
			_ = dc.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		case t.headerTimeout > 0:
			_ = dc.conn.SetReadDeadline(time.Now().Add(t.headerTimeout))
		}
		return err
	}
	// ContentLength 0 with a Body is a body of unknown length (chunked).
	if req.Body == nil || req.Body == http.NoBody || (req.ContentLength > 0 && req.ContentLength <= writeAside) {
		w.done, w.err = true, write()
		return w
	}
	w.aside = make(chan error, 1)
	go func() { w.aside <- write() }()
	return w
}

// headRead ends the wait for the answer's head: a write that ends later
// sets no deadline on the reads of the body.
func (w *sending) headRead() {
	w.mu.Lock()
	w.head = true
	_ = w.conn.SetReadDeadline(time.Time{})
	w.mu.Unlock()
}

// poll is whether the write has ended, and its error, without waiting.
func (w *sending) poll() (ended bool, err error) {
	if !w.done {
		select {
		case w.err = <-w.aside:
			w.done = true
		default:
		}
	}
	return w.done, w.err
}

// wait waits for the write to end and gives its error.
func (w *sending) wait() error {
	if !w.done {
		w.err, w.done = <-w.aside, true
	}
	return w.err
}

// readHead reads the answer's head, passing informational answers on.
func (t *Transport) readHead(ctx context.Context, dc *pooledConn, req *http.Request) (*http.Response, error) {
	dc.r.left = maxAnswerHead
	defer func() { dc.r.left = -1 }() // the body's length is the answer's own affair
	for n := 0; ; n++ {
		res, err := http.ReadResponse(dc.br, req)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = errHeaderTimeout
			}
			return nil, err
		}
		if res.StatusCode < 100 || res.StatusCode > 199 || res.StatusCode == http.StatusSwitchingProtocols {
			// A 101 is an answer too, as from net/http's Transport: the
			// caller decides what to do with it (toolgate's proxy
			// refuses every switch), and its connection is not used
			// again (RoundTrip).
			return res, nil
		}
		if n == maxInformational {
			return nil, errors.New("too many 1xx informational responses")
		}
		// An informational answer (103 Early Hints) goes to whoever
		// traces the request, as net/http's Transport passes it:
		// httputil.ReverseProxy relays it to its client.
		if tr := httptrace.ContextClientTrace(ctx); tr != nil && tr.Got1xxResponse != nil {
			if err := tr.Got1xxResponse(res.StatusCode, textproto.MIMEHeader(res.Header)); err != nil {
				return nil, err
			}
		}
	}
}

// checkOutbound refuses what net/http's Transport refuses to send: a
// method that is not a token, a header or trailer name that is not one, a
// value with control characters. Request.Write would write them otherwise
// (CR and LF as spaces, a bad name left out), and the upstream would
// receive another header than the one toolgate had.
func checkOutbound(req *http.Request) error {
	if req.Method != "" && !isToken(req.Method) {
		return fmt.Errorf("invalid method %q", req.Method)
	}
	for _, h := range []http.Header{req.Header, req.Trailer} {
		for k, vv := range h {
			if !isToken(k) {
				return fmt.Errorf("invalid header field name %q", k)
			}
			for _, v := range vv {
				if !validFieldValue(v) {
					return fmt.Errorf("invalid header field value for %q", k)
				}
			}
		}
	}
	return nil
}

// isToken is RFC 9110's token (a method, a field name): one or more of
// the visible ASCII characters but the delimiters. The same test as
// httpguts.ValidHeaderFieldName, which net/http uses (TestChecksAsNetHTTP);
// written here so the package stays on the standard library.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validFieldValue is httpguts.ValidHeaderFieldValue: no control
// characters but the horizontal tab (no CR, LF or NUL), bytes above 0x7f
// allowed as obs-text.
func validFieldValue(v string) bool {
	for i := range len(v) {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// get takes an idle connection that is still open, or dials one.
func (t *Transport) get(ctx context.Context) (*pooledConn, error) {
	now := time.Now()
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		dc := t.idle[n-1]
		t.idle[n-1] = nil
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if now.Sub(dc.since) < t.idleTimeout && socketAlive(dc.conn) {
			return dc, nil
		}
		dc.conn.Close()
	}
	conn, err := t.dial(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	r := &meteredReader{conn: conn, left: -1}
	return &pooledConn{conn: conn, r: r, br: bufio.NewReaderSize(r, 4096), bw: bufio.NewWriterSize(conn, 4096)}, nil
}

// put keeps dc for the next request, unless the pool is full.
func (t *Transport) put(dc *pooledConn) {
	dc.since = time.Now()
	t.mu.Lock()
	if len(t.idle) < maxIdle {
		t.idle = append(t.idle, dc)
		if t.expiry == nil {
			t.expiry = time.AfterFunc(t.idleTimeout, t.expire)
		}
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	dc.conn.Close()
}

// expire closes the connections idle for idleTimeout or longer, as
// net/http's Transport does: the pool takes its newest first, so after a
// burst the oldest would otherwise stay open (each a server's socket) until the
// next burst. It runs again while connections are idle.
func (t *Transport) expire() {
	now := time.Now()
	t.mu.Lock()
	n := 0
	for n < len(t.idle) && now.Sub(t.idle[n].since) >= t.idleTimeout {
		n++
	}
	old := slices.Clone(t.idle[:n])
	t.idle = slices.Delete(t.idle, 0, n)
	t.expiry = nil
	if len(t.idle) > 0 {
		t.expiry = time.AfterFunc(t.idle[0].since.Add(t.idleTimeout).Sub(now), t.expire)
	}
	t.mu.Unlock()
	for _, dc := range old {
		dc.conn.Close()
	}
}

// CloseIdleConnections closes the connections kept for reuse, and stops
// the timer that would close them later, which would keep t reachable
// for up to idleTimeout after its user is done with it.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	// A timer that has fired already has its expire waiting for mu:
	// that expire clears the field itself, and arms no other while the
	// field is set, so one chain of timers runs at most.
	if t.expiry != nil && t.expiry.Stop() {
		t.expiry = nil
	}
	t.mu.Unlock()
	for _, dc := range idle {
		dc.conn.Close()
	}
}

// pooledBody is an answer's body on a connection of the pool.
type pooledBody struct {
	body  io.ReadCloser
	t     *Transport
	dc    *pooledConn
	stop  func() bool
	reuse bool
	// eof: the body was read to its end. Atomic, as Close may come from
	// another goroutine than Read (to abort a read), as net/http allows.
	eof  atomic.Bool
	done atomic.Bool
}

func (b *pooledBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// Close gives the connection back when the body was read to its end and
// nothing is left on it; otherwise the connection is closed, as what is
// left of the answer would be read as the next one's.
func (b *pooledBody) Close() error {
	if !b.done.CompareAndSwap(false, true) {
		return nil
	}
	cancelled := !b.stop()
	if !b.eof.Load() || !b.reuse || cancelled {
		// Closed first: net/http's body reads what is left to its end
		// when closed, which for a stream could be never.
		b.dc.conn.Close()
		_ = b.body.Close()
		return nil
	}
	if err := b.body.Close(); err != nil || b.dc.br.Buffered() > 0 {
		b.dc.conn.Close()
		return err
	}
	b.t.put(b.dc)
	return nil
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// Addr is the host:port to give New for requests to target, or "" when
// target needs the net/http Transport via that would carry it otherwise:
// TLS (and with it HTTP/2), an HTTP proxy via's Proxy names (the
// environment's, for a clone of http.DefaultTransport, or one a program
// set in code), or a system where socketAlive cannot look at a socket.
func Addr(target *url.URL, via *http.Transport) string {
	if !supported || target.Scheme != "http" {
		return ""
	}
	if via.Proxy != nil {
		if p, err := via.Proxy(&http.Request{URL: target}); err != nil || p != nil {
			return ""
		}
	}
	host := target.Host
	if target.Port() == "" {
		host = net.JoinHostPort(target.Hostname(), "80")
	}
	return host
}
