package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/pending"
)

func (s *Server) upstreamNamed(name string) *upstream {
	for _, u := range s.upstreams {
		if u.Name == name {
			return u
		}
	}
	return nil
}

// executor runs the calls the lifecycle claimed: it is the lifecycle's
// only way to an upstream.
type executor struct{ s *Server }

// Execute decides a claimed call again under the policy in force and, when
// it is still allowed, sends it once.
func (x executor) Execute(ctx context.Context, pc pending.Call) (pending.State, pending.Result) {
	s := x.s
	if !s.seals.sealed(&pc) {
		s.metrics.sealBroken.Inc()
		s.log.Error("approved call refused: its record does not match its seal (changed in the store, parked by an earlier version, or sealed with a secret no longer in approvals.previous_secrets); not executed",
			"call_id", pc.ID)
		return pending.Failed, toolgateResult(pc.ID, http.StatusBadGateway, "the parked call's record does not match its seal; nothing was sent")
	}
	if ok, why := s.stillAllowed(ctx, pc); !ok {
		s.log.Warn("approved call denied by the policy in force; not executed", "call_id", pc.ID, "reason", why)
		return pending.Failed, toolgateResult(pc.ID, http.StatusForbidden, "approved, but the policy now denies the call: "+why)
	}
	ctx, span := s.tracing.startExecute(ctx, pc)
	state, res := s.sendClaimed(ctx, pc)
	s.tracing.endExecute(span, state, res)
	return state, res
}

// Lease bounds an execution: the upstream's timeout plus a margin.
func (x executor) Lease(pc pending.Call) time.Duration {
	if up := x.s.upstreamNamed(pc.Upstream); up != nil {
		return up.Timeout + 30*time.Second
	}
	return 90 * time.Second
}

// notSent reports whether err, a failed exchange's, came before any of the
// request was written: a refused connection, or a TLS handshake that failed
// (a certificate that does not verify, a peer's alert). The request is sent
// only over an established TLS session.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var cv *tls.CertificateVerificationError
	var alert tls.AlertError
	var unknownCA x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &alert) || errors.As(err, &unknownCA) || errors.As(err, &host) || errors.As(err, &invalid)
}

// resultMargin is the part of a claim's lease kept for recording the
// result: the claim's round trip before the send, the result's after.
const resultMargin = 5 * time.Second

// execBudget is how long the exchange of a call claimed for lease may take.
func execBudget(lease time.Duration) time.Duration { return max(lease-resultMargin, lease/2) }

// sendClaimed sends a claimed call's stored request to its upstream, once,
// and classifies what happened: a refused connection sent nothing (failed,
// 502); any answer is executed, whatever its status (a body cut short is
// kept as truncated); a request sent without an answer (timeout, reset) is
// unknown (504). It is never retried: tools need not be idempotent, and
// net/http cannot replay it either (sendOnce). The answer is kept up to
// MaxResultBytes; it reaches the agent from the store, once.
func (s *Server) sendClaimed(ctx context.Context, pc pending.Call) (pending.State, pending.Result) {
	up := s.upstreamNamed(pc.Upstream)
	sr, err := decodeStored(pc.Request)
	if up == nil || err != nil {
		s.log.Error("parked call cannot be executed", "call_id", pc.ID, "upstream", pc.Upstream, "error", err)
		return pending.Failed, toolgateResult(pc.ID, http.StatusBadGateway, "the parked call's upstream is not configured on this toolgate")
	}
	// The whole exchange ends resultMargin before the claim's lease would:
	// an answer still arriving then is kept as truncated and recorded
	// while the claim holds, rather than read to the lease's end and
	// refused by its fence, the call made unknown. The lease runs from the
	// claim (ClaimedAt), which may be well before this: an approval claims
	// the call for the request held on it, which runs it when its wait
	// ends. A claim that has run out by now is not acted on: its call may
	// be unknown already, and a retry of it parked and run anew. The wait
	// for the response headers is bounded by the transport (the upstream
	// timeout).
	from := pc.ClaimedAt
	if from.IsZero() {
		from = time.Now()
	}
	deadline := from.Add(execBudget(executor{s}.Lease(pc)))
	if time.Until(deadline) <= 0 {
		s.log.Error("approved call not sent: its claim ran out before it could be", "call_id", pc.ID, "claimed_at", pc.ClaimedAt)
		return pending.Failed, toolgateResult(pc.ID, http.StatusGatewayTimeout, "the approved call's claim ran out before toolgate could send it; nothing was sent")
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := storedTarget(ctx, up.URL, sr)
	if err != nil {
		return pending.Failed, toolgateResult(pc.ID, http.StatusBadGateway, "the parked call's request cannot be built")
	}
	req.Header = sr.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set(headerCallID, pc.ID)
	if pc.Subject != "" {
		req.Header.Set("X-Toolgate-Subject", pc.Subject)
	}
	if len(sr.Body) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(sr.Body))
		req.ContentLength = int64(len(sr.Body))
		// Lets net/http send the body again only where it sent nothing of
		// it (a pooled connection found closed before the first byte).
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(sr.Body)), nil }
	}
	res, err := sendOnce(up, req)
	if err != nil {
		if notSent(err) {
			s.log.Error("upstream refused an approved call; nothing was sent", "call_id", pc.ID, "error", err)
			return pending.Failed, toolgateResult(pc.ID, http.StatusBadGateway, "the upstream could not be reached; nothing was sent")
		}
		s.metrics.approvedExecuted.Inc() // sent, though no answer came
		s.log.Error("upstream did not answer an approved call; its outcome is unknown", "call_id", pc.ID, "error", err)
		return pending.Unknown, toolgateResult(pc.ID, http.StatusGatewayTimeout, "the request was sent but no answer came; it was not retried")
	}
	s.metrics.approvedExecuted.Inc() // counted once sent: not when refused by the re-check or the dial
	defer res.Body.Close()
	if err := screenAnswer(res); err != nil {
		s.log.Error("upstream answer to an approved call refused", "call_id", pc.ID, "error", err)
		return pending.Executed, toolgateResult(pc.ID, http.StatusBadGateway, "the upstream switched protocols; toolgate does not tunnel")
	}
	for _, k := range hopHeaders {
		res.Header.Del(k)
	}
	result := pending.Result{Status: res.StatusCode, Header: res.Header}
	limit := s.cfg.MaxResultBytes
	if rl := relayOf(ctx); rl != nil && res.StatusCode == http.StatusOK && strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		body, truncated, err := readRelayed(res.Body, limit, rl, pc.ID)
		if err != nil {
			s.log.Error("approved call's answer was cut short", "call_id", pc.ID, "error", err)
		}
		result.Body, result.Truncated = body, truncated
		return pending.Executed, result
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		s.log.Error("approved call's answer was cut short", "call_id", pc.ID, "error", err)
		result.Truncated = true
	}
	if int64(len(body)) > limit {
		body, result.Truncated = body[:limit], true
	}
	result.Body = body
	return pending.Executed, result
}

// toolgateResult is a result toolgate writes itself when no upstream
// answer exists.
func toolgateResult(callID string, status int, detail string) pending.Result {
	body, _ := json.Marshal(problem{
		Type: problemType(outcomeAllow, status), Title: http.StatusText(status), Status: status, Detail: detail,
		CallID: callID, Decision: outcomeApproved, Reasons: []string{}, RuleIDs: []string{},
	})
	return pending.Result{Status: status, Header: http.Header{"Content-Type": {"application/problem+json"}, ownResultHeader: {"1"}}, Body: body}
}

// ownResultHeader marks a result toolgate wrote itself. An upstream's
// answer never carries it (screenAnswer drops every X-Toolgate-* header),
// so an upstream's own problem body, a 403 say, is never read as
// toolgate's (a re-check's deny). It is not shown to the agent.
const ownResultHeader = "X-Toolgate-Own-Result"

// shownHeader is a result's header as the agent is shown it: without
// ownResultHeader.
func shownHeader(h map[string][]string) http.Header {
	if _, ok := h[ownResultHeader]; !ok {
		return h
	}
	c := http.Header(h).Clone()
	c.Del(ownResultHeader)
	return c
}

// sendOnce sends an approved call so that net/http cannot send it twice.
// net/http resends a request on a new connection when a reused one fails
// after the request was written only if the request looks idempotent
// (isReplayable: GET, HEAD, OPTIONS or TRACE, or an Idempotency-Key or
// X-Idempotency-Key header); otherwise it resends only what it never
// wrote a byte of. So on cleartext HTTP/1.1 a call that does not look
// idempotent may use the upstream's pooled connections, and saves a
// connect and a close per approved call; one that does, and any call to an
// https upstream (where HTTP/2 has retry rules of its own), goes out on a
// connection of its own, where nothing is ever resent.
// TestApprovedCallNeverReplayed holds both sides.
func sendOnce(up *upstream, req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !looksIdempotent(req) {
		return up.transport.RoundTrip(req)
	}
	return up.once.RoundTrip(req)
}

// looksIdempotent is net/http's own test (Request.isReplayable) of whether
// a request may be replayed on another connection.
func looksIdempotent(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, k := r.Header["Idempotency-Key"]
	_, x := r.Header["X-Idempotency-Key"]
	return k || x
}

// storedTarget is the request line of a parked call's stored request,
// built as the live forward builds it (httputil.ProxyRequest.SetURL on
// the raw path and query as they came), never by parsing text again: a
// text parse could read part of the stored query as something else (a
// fragment), and the upstream would run a call the approver did not see.
func storedTarget(ctx context.Context, upURL *url.URL, sr storedRequest) (*http.Request, error) {
	path, err := url.PathUnescape(sr.Path)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, sr.Method, "/", nil)
	if err != nil {
		return nil, err
	}
	req.URL = &url.URL{Path: path, RawQuery: sr.Query}
	if sr.Path != path {
		req.URL.RawPath = sr.Path
	}
	(&httputil.ProxyRequest{Out: req}).SetURL(upURL)
	return req, nil
}
