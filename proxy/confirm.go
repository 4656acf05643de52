package proxy

import (
	"encoding/json"
	"net/http"

	"github.com/toolgate/toolgate/lifecycle"
	"github.com/toolgate/toolgate/pending"
)

// Requester confirmation: a call whose ask reasons name only the requester
// ("approvers": {"requester": true}) may be confirmed by the caller's own
// human, whom toolgate reaches through the MCP client: a client that
// declares URL-mode elicitation is handed a URL elicitation whose URL is
// the call's confirmation page on the approvals listener
// (Config.ConfirmURL). The client's answer to the elicitation decides
// nothing (a client may answer by itself): only the page does.
//
//   - 2026-07-28 tools/call (multi round-trip requests): the call parks and
//     the answer is at once an input_required result with the elicitation;
//     the client's retry, carrying the answer, attaches to the call and is
//     held as any ask is. A retry that answered is not asked again, so a
//     client that answers by itself does not loop: it gets the pending
//     answer after the hold.
//   - 2026-07-28 tasks: tasks/get shows the waiting call input_required
//     with the elicitation as its input request (taskext.go).
//   - Session-era tools/call (a session whose client declared URL
//     elicitation in initialize; the session's binding keeps that): the
//     held answer becomes an SSE stream whose first event is an
//     elicitation/create request; the client's response to it (a POST of
//     a JSON-RPC response with toolgate's id) is acknowledged and dropped.
//
// The URL never reaches the model through toolgate: it is in the
// elicitation, which the client shows its human, not in a tool result.

// confirmKey names toolgate's input request (inputRequests,
// inputResponses).
const confirmKey = "toolgate.confirm"

// confirmRPCPrefix starts the JSON-RPC id of toolgate's own
// elicitation/create requests (session era); the client's response to
// one is answered by toolgate and reaches no upstream.
const confirmRPCPrefix = "toolgate-confirm-"

// confirmRequest is the URL elicitation that sends pc's requester to its
// confirmation page; ok is false when none is offered: no confirmation
// pages here, a client that does not declare URL elicitation, a call no
// longer waiting, or one whose requester's confirmation alone does not
// approve it. pc is the call as the store has it: its own reasons decide
// (an attached call's, not the retry's), and its display document is
// decoded only once the cheap checks have passed.
func (s *Server) confirmRequest(c *call, pc pending.Call) (req map[string]any, ok bool) {
	if s.cfg.ConfirmURL == nil || !c.mcp.urlElicit || pc.State != pending.Waiting || !infoOf(pc).RequesterConfirms() {
		return nil, false
	}
	tool := pc.Tool
	if tool == "" {
		tool = "a tool"
	}
	return map[string]any{
		"method": "elicitation/create",
		"params": map[string]any{
			"mode": "url",
			"message": "Your agent asks to call " + tool + ". Open the page to review the call, its arguments and all it sends, and confirm or decline it. " +
				"Answering here does not confirm it; the call waits until it is decided on the page or expires.",
			"url":           s.cfg.ConfirmURL(pc),
			"elicitationId": pc.ID,
		},
	}, true
}

// askRequester parks a 2026-07-28 tools/call that its requester may
// confirm and answers at once with the elicitation of its confirmation
// page (an input_required result). ok is false when the request is not
// one for it; the call is then held as any ask is.
func (s *Server) askRequester(r *http.Request, c *call, pc pending.Call) (answer, bool) {
	m := c.mcp
	if m == nil || !m.isToolCall || m.version < statelessEra || !m.urlElicit || m.confirmAnswered || s.cfg.ConfirmURL == nil {
		return answer{}, false
	}
	if !infoOf(pc).RequesterConfirms() {
		return answer{}, false
	}
	// The link binds the call as the store has it (its request digest,
	// its expiry); the outcome's call is a slim copy.
	var stored pending.Call
	o := s.life.Ask(r.Context(), pc, lifecycle.Hold{Held: func(pc pending.Call) { stored = pc }, Same: s.sameHeaders(c)})
	req, offered := s.confirmRequest(c, stored)
	if o.Kind != lifecycle.Waiting || !offered {
		return outcomeAnswer(o, c.decision), true
	}
	a := ofCall(rpcAnswer(c, map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{confirmKey: req},
		"requestState":  o.Call.ID,
	}), o.Call)
	return a, true
}

// offerConfirmation returns what sends a held session-era tools/call's
// requester to the confirmation page: an elicitation/create request as
// the first event of the answer's SSE stream. nil when none is offered
// (another revision, no SSE, no URL elicitation in the session, a call
// its requester's confirmation alone does not approve).
func (s *Server) offerConfirmation(w http.ResponseWriter, r *http.Request, c *call) func(pending.Call) {
	m, ok := c.out.(*rpcResponder)
	if !ok || !m.msg.isToolCall || m.msg.version >= statelessEra || !m.msg.urlElicit || s.cfg.ConfirmURL == nil || !acceptsSSE(r) {
		return nil
	}
	return func(pc pending.Call) {
		req, ok := s.confirmRequest(c, pc)
		if !ok {
			return
		}
		m.startSSE(w, pc.ID, outcomeAsk)
		msg, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0", "id": confirmRPCPrefix + pc.ID, "method": req["method"], "params": req["params"],
		})
		m.sse.send(msg)
	}
}
