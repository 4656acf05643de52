package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/direct"
	"github.com/toolgate/toolgate/policy"
)

// upstream is an Upstream with its reverse proxy.
type upstream struct {
	Upstream
	proxy     *httputil.ReverseProxy
	transport http.RoundTripper // timed, pooled: allowed calls
	once      http.RoundTripper // timed, a fresh connection per request: approved calls
	// listed is what toolgate keeps of the MCP tools the upstream last
	// listed (tool name -> listedTool); listedNames counts the names,
	// which maxListed bounds.
	listed      sync.Map
	listedNames atomic.Int64
	// shared is the upstream's side of the listings every replica reads
	// (listings.go); nil without Config.Listings.
	shared *sharedListings
	fold   policy.Fold // how targets are normalised (TargetFold)
	// sessions binds MCP sessions to principals (session.go); nil: not bound.
	sessions *sessionGuard
	decided  *decisionSeries
}

func (s *Server) newUpstream(u Upstream) *upstream {
	up := &upstream{Upstream: u}
	up.fold, _ = policy.ParseFold(u.TargetFold) // checked by withDefaults
	up.sessions = s.sessionGuard(u)
	up.decided = newDecisionSeries(s.metrics, u.Name)
	if s.cfg.Listings != nil {
		up.shared = &sharedListings{
			store: s.cfg.Listings, upstream: u.Name, now: s.cfg.Now, log: s.log,
			failed: s.metrics.notShared.WithLabelValues(u.Name),
		}
	}
	rt, once := u.Transport, u.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = u.Timeout
		// The upstream receives the headers the policy saw, no more: not
		// the Accept-Encoding: gzip Go's client adds when the caller
		// sent none (its answer would then be inflated on the way back).
		t.DisableCompression = true
		// The default of 2 idle connections per host makes a busy sidecar
		// reconnect for most calls; it talks to one host, so keep a pool.
		t.MaxIdleConns = 512
		t.MaxIdleConnsPerHost = 256
		t.IdleConnTimeout = 90 * time.Second
		if u.Dial != nil {
			t.DialContext = u.Dial
		}
		rt = t
		// A plain-HTTP upstream's calls go out on connections toolgate
		// keeps itself (internal/direct), without the Transport's goroutines;
		// not where a Dial of its own (quickstart's, in memory) makes
		// connections socketAlive cannot look at.
		if addr := direct.Addr(u.URL, t); addr != "" && u.Dial == nil {
			rt = direct.New(addr, u.Timeout)
		}
		// An approved call goes out on a connection of its own: net/http
		// replays a request that failed on a reused connection when it
		// looks idempotent (GET, or an Idempotency-Key header), and an
		// approved call must reach the upstream at most once.
		o := t.Clone()
		o.DisableKeepAlives = true
		once = o
	}
	target := u.URL
	fwdHost := s.fwdHost
	// Tracing (when on) wraps the bare transports: a client span per
	// request, and traceparent written into what the upstream receives.
	up.transport = newTimedTransport(s.tracing.transport(rt), u.Name, s.metrics)
	up.once = newTimedTransport(s.tracing.transport(once), u.Name, s.metrics)
	up.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// SetURL also sets the outbound Host to the upstream's own:
			// tool servers on loopback refuse a foreign Host (DNS-rebinding
			// protection).
			pr.SetURL(target)
			setForwarded(pr, fwdHost)
			if c, ok := pr.In.Context().Value(callKey{}).(*call); ok {
				outboundHeader(pr.Out.Header, c)
				if len(c.body) > 0 {
					// ReverseProxy wraps the body in a reader net/http does
					// not know as in memory, so the transport would flush
					// the headers in a write of their own and wake the
					// upstream twice. forwardWith's body is the evaluated
					// bytes, in memory: unwrapped, one write carries the
					// request.
					pr.Out.Body = pr.In.Body
				}
			}
		},
		Transport:      up.transport,
		BufferPool:     copyBuffers,
		ModifyResponse: screenAnswer,
		ErrorHandler:   upstreamError,
		ErrorLog:       nil,
	}
	return up
}

// forward sends exactly the bytes the policy evaluated to the upstream and
// streams its answer back.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, c *call) answer {
	if c.mcp != nil && (r.Method == http.MethodGet || c.mcp.method == "subscriptions/listen") {
		// The server's SSE stream (a GET, or the answer to a
		// subscriptions/listen) stays open as long as the upstream
		// keeps it, so it takes a held place, as an ask does: one
		// principal's streams cannot take every connection the listener
		// has. Past the bound a new stream is refused, not queued.
		if !s.held.take(c.subject.Principal) {
			s.metrics.notHeld.Inc()
			return tooManyStreams()
		}
		defer s.held.done(c.subject.Principal)
	} else {
		// Each call forwarded holds a connection to its upstream, and a
		// goroutine, until its answer is passed on: one principal's calls
		// to a slow upstream cannot take them all.
		if !s.forwarding.take(c.subject.Principal) {
			s.metrics.notForwarded.Inc()
			return tooManyForwards()
		}
		defer s.forwarding.done(c.subject.Principal)
	}
	rp := c.up.proxy
	switch {
	case c.mcp == nil || c.up.DryRun:
	case filteredList(c.mcp.method):
		rp = s.listProxy(r, c)
	case r.Method == http.MethodGet:
		rp = s.streamListProxy(r, c)
	case c.mcp.method == "tasks/list" && c.mcp.version < statelessEra && s.life != nil:
		rp = s.tasksListProxy(r, c)
	case (c.mcp.method == "initialize" || c.mcp.method == "server/discover") && s.life != nil:
		rp = s.initializeProxy(c)
	}
	s.forwardWith(w, r, c, rp)
	if err := c.upstreamErr; err != nil {
		if a, ok := s.sessionFailed(c, err); ok {
			return a
		}
		a := upstreamFailed(r.Context(), err)
		// The problem carries the allow beside it, as every answer of
		// toolgate's own carries its decision's reasons.
		a.reasons, a.ruleIDs = c.decision.Messages(), c.decision.RuleIDs()
		if a.kind == written {
			s.log.Info("agent disconnected before the upstream answered", "call_id", c.id, "error", err)
		} else {
			s.log.Error("upstream failed", "call_id", c.id, "status", a.status, "error", err)
		}
		return a
	}
	return answered
}

// forwardedHost is the X-Forwarded-Host toolgate sends: the host of its
// public URL, as agents reach toolgate; "" when that is not set.
func forwardedHost(publicURL string) string {
	if pu, err := url.Parse(publicURL); err == nil {
		return pu.Host
	}
	return ""
}

// setForwarded writes pr.Out's X-Forwarded-For and -Proto from the agent's
// connection, as httputil does, and X-Forwarded-Host as host, or none:
// never the agent's own Host (or request-target), which the policy does
// not see and an upstream may route or build URLs by. The agent's own
// X-Forwarded-* never get here (sanitizeHeaders).
//
// It is pr.SetXForwarded without what cannot apply here (a prior
// X-Forwarded-For to extend: Rewrite is called with none) and with the
// headers' canonical names written directly, which on every forwarded call
// saves the lookups and the value SetXForwarded writes only to replace.
func setForwarded(pr *httputil.ProxyRequest, host string) {
	h := pr.Out.Header
	if ip, _, err := net.SplitHostPort(pr.In.RemoteAddr); err == nil {
		h["X-Forwarded-For"] = []string{ip}
	}
	if pr.In.TLS == nil {
		h["X-Forwarded-Proto"] = []string{"http"}
	} else {
		h["X-Forwarded-Proto"] = []string{"https"}
	}
	if host != "" {
		h["X-Forwarded-Host"] = []string{host}
	}
}

// callKey carries the call on the request the reverse proxy handles, so
// its error handler can hand the error back to the call.
type callKey struct{}

// forwardWith sends the evaluated request through rp.
func (s *Server) forwardWith(w http.ResponseWriter, r *http.Request, c *call, rp *httputil.ReverseProxy) {
	out := r.WithContext(context.WithValue(r.Context(), callKey{}, c))
	out.URL = &url.URL{Path: c.rel, RawQuery: r.URL.RawQuery}
	if c.rawRel != c.rel {
		out.URL.RawPath = c.rawRel
	}
	// The headers are edited on the reverse proxy's own copy of them
	// (outboundHeader, from its Rewrite): the request's stay as they came.
	out.TransferEncoding = nil
	out.ContentLength = int64(len(c.body))
	if len(c.body) == 0 {
		out.Body = http.NoBody
	} else {
		out.Body = io.NopCloser(bytes.NewReader(c.body))
	}
	// No GetBody: without it net/http cannot replay a request with a body
	// on a fresh connection, so a tool call is sent at most once.
	out.GetBody = nil
	c.aw = answerWriter{ResponseWriter: w, id: c.id, decision: outcomeAllow, no1xx: c.filtered}
	if c.up.DryRun {
		c.aw.decision = "dry-run:" + c.decision.Action.String()
	}
	c.aw.own() // an answer toolgate writes instead (an upstream error) carries them too
	rp.ServeHTTP(&c.aw, out)
	if !c.aw.wrote && c.aw.cleared {
		c.aw.own() // for the answer toolgate writes instead
	}
	// Trailers the upstream did not announce are written under
	// http.TrailerPrefix after its body, and come to be known only at its
	// end (announced ones were screened by screenAnswer).
	for k := range w.Header() {
		if strings.HasPrefix(k, http.TrailerPrefix+"X-Toolgate-") {
			delete(w.Header(), k)
		}
	}
}

// answerWriter is the agent's answer as the reverse proxy writes it, with
// toolgate's own headers (call ID and decision) on the final answer and
// an upstream's X-Toolgate-* headers on none of it. An upstream's 1xx
// answers (103 Early Hints) are written by the reverse proxy with what
// the header map then holds, which it clears after: without this,
// toolgate's headers went out on the 1xx beside the upstream's forged
// ones, and were gone from the final answer.
type answerWriter struct {
	http.ResponseWriter
	id, decision string
	wrote        bool // the final answer's header is written
	cleared      bool // a 1xx answer went out, and the header map was cleared after it
	no1xx        bool // 1xx answers go nowhere (a filtered answer's: call.filtered)
}

// own sets toolgate's headers on the answer.
func (w *answerWriter) own() {
	h := w.ResponseWriter.Header()
	h[headerCallID] = []string{w.id}
	h[headerDecision] = []string{w.decision}
}

func (w *answerWriter) WriteHeader(code int) {
	if code >= 200 {
		if w.cleared {
			w.own() // set before the forward (forwardWith), cleared after a 1xx
		}
		w.wrote = true
	} else {
		dropToolgateHeaders(w.ResponseWriter.Header())
		w.cleared = true
		if w.no1xx {
			clear(w.ResponseWriter.Header()) // as the reverse proxy clears it after a 1xx
			return
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController (the reverse proxy's flushes) reach
// the server's writer.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// dropToolgateHeaders deletes every X-Toolgate-* header of h.
func dropToolgateHeaders(h http.Header) {
	for k := range h {
		if strings.HasPrefix(k, "X-Toolgate-") {
			delete(h, k)
		}
	}
}

// outboundHeader edits the header of c's request to the upstream, a copy
// of the agent's: the credential was toolgate's, not the upstream's; the
// body is sent decoded, with its own length; the upstream learns the call
// and its subject.
func outboundHeader(h http.Header, c *call) {
	h.Del("Authorization")
	h.Del("Content-Encoding")
	h.Del("Content-Length")
	if len(c.body) > 0 {
		h["Content-Length"] = []string{strconv.Itoa(len(c.body))}
	}
	if c.granted {
		// Sent as the approval behind the grant showed it: the stored
		// request has no Prefer (toolgate's own: wait, respond-async),
		// and a Prefer the upstream acts on (tx=commit) is not in the
		// grant's digest.
		h.Del("Prefer")
	}
	h[headerCallID] = []string{c.id}
	if c.subject.ID != "" {
		h["X-Toolgate-Subject"] = []string{c.subject.ID}
	}
	if c.mcp != nil {
		// toolgate reads and rewrites MCP answers (tools/list filtered per
		// caller, tasks, initialize): the agent's Accept-Encoding would
		// have the upstream compress what toolgate must read. Without it
		// the transport asks for gzip itself and hands toolgate the answer
		// decoded.
		h.Del("Accept-Encoding")
	}
}

// errSwitched refuses an upstream's 101: toolgate never switches
// protocols, since no policy would see the bytes that followed.
var errSwitched = errors.New("the upstream switched protocols")

// screenAnswer checks an upstream's answer before it is passed on: a
// protocol switch is refused, and the upstream's own X-Toolgate-* headers
// are dropped, so it cannot speak for toolgate. An MCP session it hands
// out is bound to the caller (bindSession).
func screenAnswer(res *http.Response) error {
	if res.StatusCode == http.StatusSwitchingProtocols {
		return errSwitched
	}
	dropToolgateHeaders(res.Header)
	// Trailers too: the announced ones here; their values, and any the
	// upstream did not announce, come after the body (forwardWith).
	dropToolgateHeaders(res.Trailer)
	if res.Request != nil {
		if c, ok := res.Request.Context().Value(callKey{}).(*call); ok && c.forwarding != nil {
			c.keepOnlyBody() // on the handler's goroutine: ModifyResponse runs within ServeHTTP
		}
	}
	return bindSession(res)
}

// upstreamError hands what the reverse proxy met instead of an answer to
// the call, whose forward turns it into an answer; nothing is written yet.
func upstreamError(_ http.ResponseWriter, r *http.Request, err error) {
	if c, ok := r.Context().Value(callKey{}).(*call); ok {
		c.upstreamErr = err
	}
}

// timedTransport records the upstream's latency by status.
type timedTransport struct {
	base     http.RoundTripper
	upstream string
	metrics  *Metrics
	ok       prometheus.Observer // the series of status 200, looked up once
}

func newTimedTransport(base http.RoundTripper, upstream string, m *Metrics) *timedTransport {
	return &timedTransport{base: base, upstream: upstream, metrics: m, ok: m.upstream.WithLabelValues(upstream, "200")}
}

func (t *timedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	res, err := t.base.RoundTrip(r)
	took := time.Since(start).Seconds()
	switch {
	case err == nil && res.StatusCode == http.StatusOK:
		t.ok.Observe(took)
	case err == nil:
		t.metrics.upstream.WithLabelValues(t.upstream, strconv.Itoa(res.StatusCode)).Observe(took)
	default:
		t.metrics.upstream.WithLabelValues(t.upstream, "error").Observe(took)
	}
	return res, err
}

// copyBuffers lends ReverseProxy its response-copy buffers. Without a pool
// it allocates 32 KiB for every response, which under load is a good part
// of what the garbage collector has to do.
var copyBuffers httputil.BufferPool = &bufferPool{}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
