package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/pending"
)

// Outcome labels of parked calls.
const (
	outcomeRejected  = "rejected"
	outcomeExpired   = "expired"
	outcomeCancelled = "cancelled"
	outcomeApproved  = "approved"
)

// park handles an ask: the call is parked (or attached to an identical one
// already parked) and the agent is held until it is decided, up to the hold.
func (s *Server) park(w http.ResponseWriter, r *http.Request, c *call) {
	if s.cfg.Pending == nil {
		if c.mcp != nil && c.mcp.isToolCall {
			writeToolError(w, c, c.id, outcomeAsk, "Approval required, but approvals are not configured on this toolgate: "+reasonsText(c.decision.Messages()))
			return
		}
		writeProblem(w, problem{
			Status: http.StatusServiceUnavailable, Title: "Approval not available",
			Detail: "the policy asks for approval, but approvals are not configured on this toolgate; nothing was forwarded",
			CallID: c.id, Decision: outcomeAsk, Reasons: c.decision.Messages(), RuleIDs: c.decision.RuleIDs(),
		})
		return
	}
	pc, cerr := s.newParked(r, c)
	if cerr != nil {
		s.refuse(w, r, c, cerr)
		return
	}
	// A store that cannot park within a few seconds is treated as down.
	pctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	stored, attached, err := s.cfg.Pending.Park(pctx, pc, s.cfg.TTL)
	cancel()
	if err != nil {
		// Fail closed: nothing is forwarded without a durable record.
		s.log.Error("cannot park call", "call_id", c.id, "error", err)
		if c.mcp != nil {
			writeRPCError(w, http.StatusServiceUnavailable, c, rpcUnavailable, outcomeUnavailable,
				"the call needs approval but could not be parked; nothing was forwarded, retry later")
			return
		}
		writeProblem(w, problem{
			Status: http.StatusServiceUnavailable, Title: "Approval store unavailable",
			Detail: "the call needs approval but could not be parked; nothing was forwarded, retry later",
			CallID: c.id, Decision: outcomeUnavailable, Reasons: c.decision.Messages(), RuleIDs: c.decision.RuleIDs(),
		})
		return
	}
	if attached {
		if pc.ArgsDigest != stored.ArgsDigest {
			writeProblem(w, problem{
				Status: http.StatusConflict, Title: "Idempotency-Key reused",
				Detail: "this Idempotency-Key belongs to a call with other arguments", CallID: stored.ID, Decision: outcomeInvalid,
			})
			return
		}
		s.log.Info("call attached to a parked call", "call_id", c.id, "parked_call_id", stored.ID, "state", string(stored.State))
	} else {
		s.metrics.parked.Inc()
		if s.cfg.OnPark != nil {
			s.cfg.OnPark(stored)
		}
	}
	s.hold(w, r, c, stored, s.holdFor(r))
}

// newParked builds the record of a parked call.
func (s *Server) newParked(r *http.Request, c *call) (pending.Call, *callError) {
	req, reqDigest := c.stored(r).encode()
	info := approvals.Info{
		Kind: c.input.Kind, Upstream: c.up.Name, Subject: c.subject.ID,
		Reasons: c.decision.Messages(), RuleIDs: c.decision.RuleIDs(), Method: r.Method, Path: c.input.HTTP.Path,
	}
	if q := r.URL.RawQuery; q != "" {
		info.Path += "?" + q // the approver sees everything that will be sent
	}
	// argsForm is what an Idempotency-Key is bound to: the request line and
	// the arguments (canonical for a tool call, the raw body otherwise).
	argsForm := c.input.HTTP.Method + " " + c.rawRel + "?" + r.URL.RawQuery + "\x00"
	if t := c.input.Tool; t != nil {
		info.Tool = t.Name
		info.Target = t.Target
		if c.mcp != nil {
			// The body is the whole JSON-RPC message; show the arguments.
			info.Arguments = marshalNoEscape(t.Arguments)
		} else {
			info.Arguments = json.RawMessage(c.body)
		}
		argsForm += canonicalArgs(t.Arguments)
	} else {
		if len(c.body) > 0 {
			// A plain HTTP call's body: shown as JSON when it is, else as text.
			if json.Valid(c.body) {
				info.Arguments = json.RawMessage(c.body)
			} else {
				info.Arguments = marshalNoEscape(strings.ToValidUTF8(string(c.body), "\uFFFD"))
			}
		}
		argsForm += string(c.body)
	}
	info.PolicyInput = marshalNoEscape(c.input)
	infoJSON := marshalNoEscape(info)
	pc := pending.Call{
		ID: c.id, Subject: c.subject.ID, Upstream: c.up.Name, Tool: info.Tool,
		Request: req, RequestDigest: reqDigest, Info: infoJSON,
		ArgsDigest: digest(argsForm),
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if len(key) > 255 {
			return pending.Call{}, invalid(http.StatusBadRequest, "Bad Idempotency-Key", "an Idempotency-Key is at most 255 characters")
		}
		pc.AttachKey = digest("idem", c.subject.ID, c.up.Name, key)
	} else {
		pc.AttachKey = digest("call", c.subject.ID, c.up.Name, info.Tool, pc.ArgsDigest)
	}
	return pc, nil
}

// holdFor is how long to hold the agent: pending.hold, shortened by
// "Prefer: wait=N", zero with "Prefer: respond-async" (RFC 7240:
// preferences are comma-separated, may carry ";" parameters, and values
// may be quoted or spaced around "=").
func (s *Server) holdFor(r *http.Request) time.Duration {
	hold := s.cfg.Hold
	for _, v := range r.Header.Values("Prefer") {
		for pref := range strings.SplitSeq(v, ",") {
			pref, _, _ = strings.Cut(pref, ";")
			name, val, _ := strings.Cut(pref, "=")
			name = strings.ToLower(strings.TrimSpace(name))
			val = strings.Trim(strings.TrimSpace(val), `"`)
			switch name {
			case "respond-async":
				return 0
			case "wait":
				if secs, err := strconv.Atoi(val); err == nil && secs >= 0 && time.Duration(secs)*time.Second < hold {
					hold = time.Duration(secs) * time.Second
				}
			}
		}
	}
	return hold
}

// hold waits for the parked call to be decided, executes it when approved
// (this replica holds the agent, so it is the executor), and answers.
func (s *Server) hold(w http.ResponseWriter, r *http.Request, c *call, pc pending.Call, hold time.Duration) {
	ctx, cancel := context.WithTimeout(r.Context(), hold)
	defer cancel()
	defer context.AfterFunc(s.drained, cancel)()
	s.metrics.held.Inc()
	defer s.metrics.held.Dec()
	progress := c.wantsProgress(r)
	for {
		switch pc.State {
		case pending.Approved:
			claimed, err := s.cfg.Pending.Claim(r.Context(), pc.ID, s.lease(pc))
			if err == nil {
				s.executeHeld(w, r, c, claimed)
				return
			}
			if !errors.Is(err, pending.ErrConflict) {
				s.storeFailed(w, c, pc, err)
				return
			}
			pc = conflictCall(err, pc) // another executor has it: wait for its result
			continue
		case pending.Executed, pending.Failed, pending.Unknown:
			s.deliver(w, r, c, pc)
			return
		case pending.Rejected, pending.Expired, pending.Cancelled:
			s.writeRefused(w, c, pc)
			return
		}
		next, due, err := s.waitStep(ctx, progress, pc)
		if due {
			c.progress(w, pc)
			continue
		}
		switch {
		case err == nil:
			pc = next
		case errors.Is(err, pending.ErrNotFound):
			writeProblem(w, problem{
				Status: http.StatusServiceUnavailable, Title: "Parked call lost",
				Detail: "the approval store no longer knows this call; nothing was forwarded", CallID: pc.ID, Decision: outcomeUnavailable,
			})
			return
		case r.Context().Err() != nil:
			// The agent went away; the call stays parked and can be
			// followed through its status URL or a retry that attaches,
			// except in the stateless MCP revision (2026-07-28), where
			// closing the stream cancels the request.
			if c.mcp != nil && c.input.MCP != nil && c.input.MCP.ProtocolVersion >= "2026-07-28" {
				if cancelled, err := s.cfg.Pending.Cancel(context.WithoutCancel(r.Context()), pc.ID); err == nil {
					s.log.Info("stateless MCP client closed its stream: call cancelled", "call_id", pc.ID)
					if s.cfg.OnResolve != nil {
						s.cfg.OnResolve(cancelled)
					}
				}
			}
			return
		case ctx.Err() != nil:
			if next.ID != "" {
				pc = next
			}
			if pc.State == pending.Waiting || pc.State == pending.Approved || pc.State == pending.Executing {
				s.writeWaiting(w, c, pc)
				return
			}
		default:
			s.storeFailed(w, c, pc, err)
			return
		}
	}
}

func conflictCall(err error, fallback pending.Call) pending.Call {
	var se *pending.StateError
	if errors.As(err, &se) {
		return se.Call
	}
	return fallback
}

// lease bounds an execution: the upstream's timeout plus a margin. An
// executor that has not finished by then is presumed lost (unknown).
func (s *Server) lease(pc pending.Call) time.Duration {
	if up := s.upstreamNamed(pc.Upstream); up != nil {
		return up.Timeout + 30*time.Second
	}
	return 90 * time.Second
}

func (s *Server) storeFailed(w http.ResponseWriter, c *call, pc pending.Call, err error) {
	s.log.Error("approval store failed while holding a call", "call_id", pc.ID, "error", err)
	detail := "the approval store could not be reached; the call is not lost, follow its status URL"
	if errors.Is(err, pending.ErrNotFound) {
		detail = "the approval store no longer knows this call; nothing was forwarded"
	}
	if c != nil && c.mcp != nil {
		writeRPCError(w, http.StatusServiceUnavailable, c, rpcUnavailable, outcomeUnavailable, detail)
		return
	}
	writeProblem(w, problem{
		Status: http.StatusServiceUnavailable, Title: "Approval store unavailable",
		Detail: detail, CallID: pc.ID, Decision: outcomeUnavailable,
	})
}

// statusURL is where the agent follows a parked call (on the proxy
// listener, relative: toolgate does not know how agents reach it).
func statusURL(id string) string { return "/_toolgate/calls/" + id }

// writeWaiting answers 202: the call waits for a human.
func (s *Server) writeWaiting(w http.ResponseWriter, c *call, pc pending.Call) {
	if c.mcp != nil && c.mcp.isToolCall {
		writeToolError(w, c, pc.ID, outcomeAsk, "Approval pending: call "+pc.ID+" is waiting for a human approver (status: "+
			statusURL(pc.ID)+", expires "+pc.ExpiresAt.UTC().Format(time.RFC3339)+"). Nothing ran yet. Retry this same call later: "+
			"once it is approved the retry returns the tool's result.")
		return
	}
	h := w.Header()
	h.Set(headerCallID, pc.ID)
	h.Set(headerDecision, outcomeAsk)
	h.Set("Location", statusURL(pc.ID))
	h.Set("Retry-After", "5")
	writeJSON(w, http.StatusAccepted, map[string]any{
		"call_id": pc.ID, "status": string(pc.State), "status_url": statusURL(pc.ID),
		"expires_at": pc.ExpiresAt.UTC().Format(time.RFC3339),
	})
}

// writeRefused answers a rejected, expired or cancelled call like a deny.
func (s *Server) writeRefused(w http.ResponseWriter, c *call, pc pending.Call) {
	info := infoOf(pc)
	outcome, title, detail := outcomeRejected, "Rejected by approver", "the approver rejected the call"
	switch pc.State {
	case pending.Expired:
		outcome, title, detail = outcomeExpired, "Approval expired", "nobody approved the call before it expired"
	case pending.Cancelled:
		outcome, title, detail = outcomeCancelled, "Call cancelled", "the call was cancelled before it was decided"
	default:
		if pc.Comment != "" {
			detail += ": " + pc.Comment
		}
	}
	if c.mcp != nil && c.mcp.isToolCall {
		writeToolError(w, c, pc.ID, outcome, title+": "+detail)
		return
	}
	writeProblem(w, problem{
		Status: http.StatusForbidden, Title: title, Detail: detail, CallID: pc.ID,
		Decision: outcome, Reasons: info.Reasons, RuleIDs: info.RuleIDs,
	})
}

func infoOf(pc pending.Call) approvals.Info {
	var info approvals.Info
	_ = json.Unmarshal(pc.Info, &info) // written by newParked
	return info
}

// marshalNoEscape encodes v without escaping <, > and &, so approvers see
// the agent's arguments byte for byte (the page escapes them for HTML).
func marshalNoEscape(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // only strings, string slices and raw JSON
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
