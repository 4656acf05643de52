package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
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
// nothing (failed, 502); any answer is executed, whatever its status (a body
// cut short is kept as truncated); a request sent without an answer
// (timeout, reset) is unknown (504). It is never retried: tools need not be
// idempotent, and the request goes out on a connection of its own, so
// net/http cannot replay it either. The answer is kept up to
// MaxResultBytes; it reaches the agent from the store, once.
func (s *Server) runClaimed(ctx context.Context, pc pending.Call) (pending.State, pending.Result) {
	ctx, span := s.tracing.startExecute(ctx, pc)
	state, res := s.sendClaimed(ctx, pc)
	s.tracing.endExecute(span, state, res)
	return state, res
}

// sendClaimed is runClaimed without its span.
func (s *Server) sendClaimed(ctx context.Context, pc pending.Call) (pending.State, pending.Result) {
	up := s.upstreamNamed(pc.Upstream)
	sr, err := decodeStored(pc.Request)
	if up == nil || err != nil {
		s.log.Error("parked call cannot be executed", "call_id", pc.ID, "upstream", pc.Upstream, "error", err)
		return pending.Failed, toolgateResult(pc.ID, http.StatusBadGateway, "the parked call's upstream is not configured on this toolgate")
	}
	target := strings.TrimSuffix(up.URL.String(), "/") + sr.Path
	if sr.Query != "" {
		target += "?" + sr.Query
	}
	u, err := url.Parse(target)
	if err != nil {
		return pending.Failed, toolgateResult(pc.ID, http.StatusBadGateway, "the parked call's path cannot be sent")
	}
	// The whole exchange stays within the claim's lease; the wait for the
	// response headers is bounded by the transport (the upstream timeout).
	ctx, cancel := context.WithTimeout(ctx, s.lease(pc))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, sr.Method, u.String(), nil)
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
	}
	res, err := up.once.RoundTrip(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			s.log.Error("upstream refused an approved call; nothing was sent", "call_id", pc.ID, "error", err)
			return pending.Failed, toolgateResult(pc.ID, http.StatusBadGateway, "the upstream could not be reached; nothing was sent")
		}
		s.metrics.approvedExecuted.Inc() // sent, though no answer came
		s.log.Error("upstream did not answer an approved call; its outcome is unknown", "call_id", pc.ID, "error", err)
		return pending.Unknown, toolgateResult(pc.ID, http.StatusGatewayTimeout, "the request was sent but no answer came; it was not retried")
	}
	s.metrics.approvedExecuted.Inc() // counted once sent: not when refused by the re-check or the dial
	defer res.Body.Close()
	_ = stripToolgateHeaders(res)
	for _, k := range hopHeaders {
		res.Header.Del(k)
	}
	result := pending.Result{Status: res.StatusCode, Header: res.Header}
	limit := s.cfg.MaxResultBytes
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
	return pending.Result{Status: status, Header: http.Header{"Content-Type": {"application/problem+json"}}, Body: body}
}

// executeHeld runs a call this replica claimed while holding its agent,
// records the result, and hands it to the agent through deliver: the
// result reaches exactly one request, even when retries are attached.
func (s *Server) executeHeld(w http.ResponseWriter, r *http.Request, c *call, pc pending.Call) {
	// The execution must finish and be recorded even if the agent leaves.
	ctx := context.WithoutCancel(r.Context())
	if ok, why := s.stillAllowed(ctx, pc); !ok {
		done, err := s.refuseClaimed(ctx, pc, why)
		if err != nil {
			s.storeFailed(w, c, pc, err)
			return
		}
		s.deliver(w, r, c, done)
		return
	}
	state, res := s.runClaimed(ctx, pc)
	done, err := s.cfg.Pending.Finish(ctx, pc.ID, pc.Fence, state, res)
	if err != nil {
		s.log.Error("cannot record an executed call's result", "call_id", pc.ID, "error", err)
		writeResult(w, c, pc.ID, res) // the store is away: the agent is the only one who can have it
		return
	}
	s.deliver(w, r, c, done)
}

// deliver answers with a finished call's stored result, once: a request
// that finds it already delivered, or a call that ended without a result,
// gets a problem that says so. A request whose agent is gone does not take
// the result, so a retry still can.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request, c *call, pc pending.Call) {
	if r.Context().Err() != nil {
		return
	}
	first, now, err := s.cfg.Pending.Deliver(r.Context(), pc.ID)
	if err != nil {
		s.storeFailed(w, c, pc, err)
		return
	}
	switch {
	case now.Result == nil:
		s.writeNoResult(w, c, now, http.StatusGatewayTimeout, "the call ended "+string(now.State)+" without a result; it was not retried")
	case !first:
		s.writeNoResult(w, c, now, http.StatusConflict, "the result of this call was already delivered to another request; follow "+statusURL(now.ID))
	default:
		writeResult(w, c, now.ID, *now.Result)
	}
}

// writeNoResult answers a request that gets no result of its own.
func (s *Server) writeNoResult(w http.ResponseWriter, c *call, pc pending.Call, status int, detail string) {
	if c != nil && c.mcp != nil && c.mcp.isToolCall {
		writeToolError(w, c, pc.ID, string(pc.State), "Call "+pc.ID+": "+detail)
		return
	}
	writeProblem(w, problem{Status: status, Title: http.StatusText(status), Detail: detail, CallID: pc.ID, Decision: string(pc.State)})
}

// writeResult hands a stored result to the agent. For an MCP message the
// JSON-RPC id of the answer becomes this request's.
func writeResult(w http.ResponseWriter, c *call, id string, res pending.Result) {
	if c != nil && c.mcp != nil {
		if http.Header(res.Header).Get("Content-Type") == "application/problem+json" {
			// toolgate's own result (nothing or no answer came back):
			// the model gets it as a tool error it can read.
			writeToolError(w, c, id, "failed", "The approved call could not be completed: "+string(res.Body))
			return
		}
		res = withRPCID(res, c.mcp.rpcID())
	}
	if c != nil && c.sse != nil {
		c.sse.sendResult(res)
		return
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
