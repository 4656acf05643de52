package proxy

import (
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// responder renders answers in the protocol of one call. The call picks
// its responder once, when it is read: REST and plain HTTP calls answer
// with problem bodies, messages to an MCP endpoint with JSON-RPC.
type responder interface {
	render(w http.ResponseWriter, a answer)
}

// respond renders a: the one place an answer becomes bytes.
func (s *Server) respond(w http.ResponseWriter, c *call, a answer) {
	if a.kind == written {
		return
	}
	if a.callID == "" {
		a.callID = c.id
	}
	if a.allow != "" {
		w.Header().Set("Allow", a.allow)
	}
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	if a.statusURL != "" {
		// MCP clients cannot resolve a relative URL: when toolgate knows
		// how agents reach it, every status URL it hands out is absolute.
		a.statusURL = StatusURL(s.cfg.ProxyPublicURL, a.callID)
		if a.kind != waiting {
			a.detail += "; follow " + a.statusURL
		}
	}
	c.out.render(w, a)
}

// restResponder answers REST and plain HTTP calls.
type restResponder struct{}

func (restResponder) render(w http.ResponseWriter, a answer) {
	switch a.kind {
	case result:
		writeResult(w, a.callID, a.result)
	case waiting:
		writeAccepted(w, a.call, a.statusURL)
	case document:
		w.Header().Set(headerCallID, a.callID)
		outcome := a.outcome
		if outcome == "" {
			// toolgate's own answer to a message the policy allowed (a
			// task method: task.go sets what became of its call).
			outcome = outcomeAllow
		}
		w.Header().Set(headerDecision, outcome)
		writeJSON(w, a.status, a.doc)
	default:
		writeProblem(w, problemOf(a))
	}
}

// writeAccepted answers 202: the call waits for a human, and can be
// followed at status.
func writeAccepted(w http.ResponseWriter, pc pending.Call, status string) {
	h := w.Header()
	h.Set(headerCallID, pc.ID)
	h.Set(headerDecision, outcomeAsk)
	h.Set("Location", status)
	h.Set("Retry-After", "5")
	writeJSON(w, http.StatusAccepted, map[string]any{
		"call_id": pc.ID, "status": string(pc.State), "status_url": status,
		"expires_at": pc.ExpiresAt.UTC().Format(time.RFC3339),
	})
}

// writeResult hands a tool's answer to the agent with toolgate's headers.
func writeResult(w http.ResponseWriter, callID string, res pending.Result) {
	h := w.Header()
	maps.Copy(h, shownHeader(res.Header))
	h.Set(headerCallID, callID)
	h.Set(headerDecision, outcomeApproved)
	h.Del("Content-Length")
	if res.Truncated {
		h.Set("X-Toolgate-Result-Truncated", "true")
	}
	w.WriteHeader(res.Status)
	_, _ = w.Write(res.Body)
}

// rpcResponder answers a message to an MCP upstream's endpoint: a tool
// call's verdicts as tool results the model can read and re-plan from, a
// request's as JSON-RPC errors, refusals of the message as JSON-RPC errors;
// what JSON-RPC cannot say (a notification denied, missing credentials, a
// call parked) as a REST call would.
type rpcResponder struct {
	msg *mcpMessage
	// sse is set once a held call's answer became an SSE stream: from
	// then on every answer is an event on it.
	sse *sseStream
}

func (m *rpcResponder) render(w http.ResponseWriter, a answer) {
	switch {
	case a.kind == result && isOwnResult(a.result):
		// toolgate's own result of an approved call (nothing, or no
		// answer, came back): the model reads it as a tool error.
		a = answer{
			kind: verdict, status: http.StatusOK, outcome: "failed", callID: a.callID,
			title: "The approved call could not be completed", detail: string(a.result.Body),
		}
	case a.kind == result && m.msg.isToolCall && !a.result.Truncated && !hasRPCResponse(a.result):
		// A stored answer that holds no JSON-RPC response (an upstream's
		// error page, or an earlier release's own result, which carries
		// no ownResultHeader): an MCP client is never handed a body it
		// cannot read, as tasks/result never is (taskResult).
		a = answer{
			kind: verdict, status: http.StatusOK, outcome: "failed", callID: a.callID,
			title:  "The approved call could not be completed",
			detail: "the upstream answered HTTP " + strconv.Itoa(a.result.Status) + " without a complete JSON-RPC response; the tool may have acted before it failed",
		}
	}
	switch {
	case a.kind == result:
		res := withRPCID(a.result, m.msg.rpcID())
		if m.sse != nil {
			m.sse.sendResult(res)
			return
		}
		writeResult(w, a.callID, res)
	// A tools/call without an id is a notification, which JSON-RPC never
	// answers: its verdict is a problem document (default), not a result.
	case m.msg.isToolCall && m.msg.id != nil && a.kind == waiting:
		m.send(w, http.StatusOK, a, m.toolError(a, pendingText(a.call, a.statusURL)))
	case m.msg.isToolCall && m.msg.id != nil && a.kind == verdict:
		m.send(w, http.StatusOK, a, m.toolError(a, verdictText(a)))
	case a.kind == refusal && (a.outcome == outcomeInvalid || a.outcome == outcomeUnavailable):
		code := a.rpcCode
		switch {
		case code != 0:
		case a.outcome == outcomeInvalid:
			code = rpcInvalidRequest
		default:
			code = rpcUnavailable
		}
		m.send(w, a.status, a, m.rpcError(code, a))
	case a.kind == verdict && m.msg.id != nil:
		// The request was understood; the error says why it was not run.
		code := a.rpcCode
		if code == 0 {
			code = rpcDenied
		}
		m.send(w, http.StatusOK, a, m.rpcError(code, a))
	case a.kind == document && m.sse != nil:
		// A task method's answer after toolgate's own request on the
		// stream (tasks.go).
		b, _ := json.Marshal(a.doc)
		m.sse.send(b)
	case m.sse != nil:
		// The stream has begun, so no status can be set any more.
		m.send(w, a.status, a, m.rpcError(rpcUnavailable, a))
	default:
		restResponder{}.render(w, a)
	}
}

// send writes a JSON-RPC message with toolgate's call headers, or, on a
// held call's SSE stream, as its next event.
func (m *rpcResponder) send(w http.ResponseWriter, status int, a answer, msg map[string]any) {
	msg["jsonrpc"] = "2.0"
	if m.sse != nil {
		b, _ := json.Marshal(msg)
		m.sse.send(b)
		return
	}
	h := w.Header()
	h.Set(headerCallID, a.callID)
	h.Set(headerDecision, a.outcome)
	writeJSON(w, status, msg)
}

func (m *rpcResponder) rpcError(code int, a answer) map[string]any {
	return map[string]any{
		"id": m.msg.rpcID(),
		"error": map[string]any{
			"code": code, "message": a.title + ": " + a.detail,
			"data": map[string]any{"toolgate/call_id": a.callID, "toolgate/decision": a.outcome},
		},
	}
}

// toolError is a tools/call result the model can read and re-plan from:
// isError true, the text, toolgate's call ID and outcome (and the status
// URL of a parked call) in _meta. HTTP 200: the call was understood.
func (m *rpcResponder) toolError(a answer, text string) map[string]any {
	meta := map[string]any{"toolgate/call_id": a.callID, "toolgate/decision": a.outcome}
	if a.statusURL != "" {
		meta["toolgate/status_url"] = a.statusURL
	}
	result := map[string]any{
		"content": []any{map[string]any{"type": "text", "text": text}},
		"isError": true,
		"_meta":   meta,
	}
	if m.msg.version >= "2026-07-28" {
		// From 2026-07-28 every result says whether it is final.
		result["resultType"] = "complete"
	}
	return map[string]any{"id": m.msg.rpcID(), "result": result}
}

// hasRPCResponse reports whether res holds a JSON-RPC response.
func hasRPCResponse(res pending.Result) bool {
	_, ok := rpcResponseOf(res)
	return ok
}

// isOwnResult tells toolgate's own results (a problem body written when no
// upstream answer exists) from an upstream's, whatever its Content-Type.
func isOwnResult(res pending.Result) bool {
	return http.Header(res.Header).Get(ownResultHeader) == "1"
}

func reasonsText(reasons []string) string {
	if len(reasons) == 0 {
		return "no reason given"
	}
	return strings.Join(reasons, "; ")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// verdictText is the text of the tool error an MCP tool call ends with.
// A rejected, expired or cancelled call reads as a deny does ("Denied by
// policy: ..."), the model re-planning as it would after one; the
// result's toolgate/decision tells which it was.
func verdictText(a answer) string {
	switch a.outcome {
	case outcomeRejected, outcomeExpired, outcomeCancelled:
		return "Denied by policy: " + a.detail
	}
	return a.title + ": " + a.detail
}
