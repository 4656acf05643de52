package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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

// hopHeaders are not copied between the upstream's answer and the agent.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// runClaimed sends a claimed call's stored request to its upstream, once,
// and classifies what happened (SPEC.md §7.1): a refused connection sent
// nothing (failed, 502); any answer is executed, whatever its status; a
// request sent without an answer (timeout, reset) is unknown (504). It is
// never retried: tools need not be idempotent. The answer's body is streamed
// to w when w is not nil, and kept up to MaxResultBytes for the store.
func (s *Server) runClaimed(ctx context.Context, pc pending.Call, w http.ResponseWriter) (pending.State, pending.Result) {
	up := s.upstreamNamed(pc.Upstream)
	sr, err := decodeStored(pc.Request)
	if up == nil || err != nil {
		s.log.Error("parked call cannot be executed", "call_id", pc.ID, "upstream", pc.Upstream, "error", err)
		return pending.Failed, toolgateResult(http.StatusBadGateway, "the parked call's upstream is not configured on this toolgate")
	}
	target := strings.TrimSuffix(up.URL.String(), "/") + sr.Path
	if sr.Query != "" {
		target += "?" + sr.Query
	}
	u, err := url.Parse(target)
	if err != nil {
		return pending.Failed, toolgateResult(http.StatusBadGateway, "the parked call's path cannot be sent")
	}
	ctx, cancel := context.WithTimeout(ctx, up.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, sr.Method, u.String(), nil)
	if err != nil {
		return pending.Failed, toolgateResult(http.StatusBadGateway, "the parked call's request cannot be built")
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
	}
	// No GetBody: the request cannot be replayed by net/http.
	res, err := up.transport.RoundTrip(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			s.log.Error("upstream refused an approved call; nothing was sent", "call_id", pc.ID, "error", err)
			return pending.Failed, toolgateResult(http.StatusBadGateway, "the upstream could not be reached; nothing was sent")
		}
		s.log.Error("upstream did not answer an approved call; its outcome is unknown", "call_id", pc.ID, "error", err)
		return pending.Unknown, toolgateResult(http.StatusGatewayTimeout, "the request was sent but no answer came; it was not retried")
	}
	defer res.Body.Close()
	for k := range res.Header {
		if strings.HasPrefix(k, "X-Toolgate-") {
			delete(res.Header, k)
		}
	}
	for _, k := range hopHeaders {
		res.Header.Del(k)
	}
	result := pending.Result{Status: res.StatusCode, Header: res.Header}
	limit := s.cfg.MaxResultBytes
	var kept bytes.Buffer
	var body io.Reader = io.TeeReader(io.LimitReader(res.Body, limit+1), &kept)
	if w != nil {
		h := w.Header()
		maps.Copy(h, res.Header)
		h.Set(headerCallID, pc.ID)
		h.Set(headerDecision, outcomeApproved)
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, body)
		_, _ = io.Copy(w, res.Body) // past the kept prefix, straight through
	} else {
		_, _ = io.Copy(io.Discard, body)
		_, _ = io.Copy(io.Discard, res.Body)
	}
	result.Body = kept.Bytes()
	if int64(len(result.Body)) > limit {
		result.Body, result.Truncated = result.Body[:limit], true
	}
	return pending.Executed, result
}

// toolgateResult is a result toolgate writes itself when no upstream
// answer exists.
func toolgateResult(status int, detail string) pending.Result {
	return pending.Result{
		Status: status,
		Header: http.Header{"Content-Type": {"application/problem+json"}},
		Body:   []byte(`{"type":"urn:toolgate:problem:upstream-failed","title":` + strconv.Quote(http.StatusText(status)) + `,"status":` + strconv.Itoa(status) + `,"detail":` + strconv.Quote(detail) + `}`),
	}
}

// executeHeld runs a call this replica claimed while holding its agent, and
// hands the agent the upstream's own answer.
func (s *Server) executeHeld(w http.ResponseWriter, r *http.Request, c *call, pc pending.Call) {
	s.metrics.approvedExecuted.Inc()
	// The execution must finish and be recorded even if the agent leaves.
	ctx := context.WithoutCancel(r.Context())
	stream := w
	if c.mcp != nil {
		// The answer carries the JSON-RPC id of the request that parked
		// the call; this request may be a retry with another id, so the
		// answer is read whole and its id rewritten.
		stream = nil
	}
	state, res := s.runClaimed(ctx, pc, stream)
	done, err := s.cfg.Pending.Finish(ctx, pc.ID, pc.Fence, state, res)
	if err != nil {
		s.log.Error("cannot record an executed call's result", "call_id", pc.ID, "error", err)
	}
	if state != pending.Executed || stream == nil {
		writeResult(w, c, pc.ID, res)
	}
	if err == nil {
		_, _, _ = s.cfg.Pending.Deliver(ctx, done.ID)
	}
}

// deliver answers with a finished call's stored result, once: later
// requests that find it already delivered get the status document.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request, c *call, pc pending.Call) {
	first, now, err := s.cfg.Pending.Deliver(r.Context(), pc.ID)
	if err != nil {
		s.storeFailed(w, c, pc, err)
		return
	}
	if !first || now.Result == nil {
		if c.mcp != nil && c.mcp.isToolCall {
			writeToolError(w, c, now.ID, string(now.State), "The result of call "+now.ID+" was already delivered to another request; this call is "+string(now.State)+".")
			return
		}
		writeJSON(w, http.StatusOK, statusDoc(now))
		return
	}
	writeResult(w, c, now.ID, *now.Result)
}

// writeResult hands a stored result to the agent. For an MCP message the
// JSON-RPC id of the answer becomes this request's.
func writeResult(w http.ResponseWriter, c *call, id string, res pending.Result) {
	if c != nil && c.mcp != nil {
		res = withRPCID(res, c.mcp.rpcID())
	}
	h := w.Header()
	maps.Copy(h, res.Header)
	h.Set(headerCallID, id)
	h.Set(headerDecision, outcomeApproved)
	h.Del("Content-Length")
	if res.Truncated {
		h.Set("X-Toolgate-Result-Truncated", "true")
	}
	w.WriteHeader(res.Status)
	_, _ = w.Write(res.Body)
}
