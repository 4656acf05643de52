package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// progressEvery is how often a held MCP client that gave a progress token
// hears that its call still waits: often enough for clients whose request
// timeout resets on progress (60 s by default in the TypeScript SDK).
var progressEvery = 10 * time.Second

// sseStream is a held MCP call's answer once it became an SSE stream:
// from then on every message toolgate sends for the call is an event.
type sseStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	n  int // progress notifications sent
}

// progressReporter returns what tells a held call's agent that its call
// still waits, nil when it wants no progress: only an MCP tools/call whose
// client gave a progress token and accepts SSE does.
func (c *call) progressReporter(w http.ResponseWriter, r *http.Request) func(pending.Call) {
	m, ok := c.out.(*rpcResponder)
	if !ok || !m.msg.isToolCall || m.msg.progressToken == nil || !acceptsSSE(r) {
		return nil
	}
	return func(pc pending.Call) { m.progress(w, pc) }
}

func acceptsSSE(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/event-stream") {
			return true
		}
	}
	return false
}

// progress sends one notifications/progress event, starting the stream
// at the first one: the answer is an SSE stream from then on.
func (m *rpcResponder) progress(w http.ResponseWriter, pc pending.Call) {
	m.startSSE(w, pc.ID, outcomeAsk)
	m.sse.n++
	msg, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "method": "notifications/progress",
		"params": map[string]any{
			"progressToken": m.msg.progressToken, "progress": m.sse.n,
			"message": "waiting for a human to approve call " + pc.ID,
		},
	})
	m.sse.send(msg)
}

// startSSE makes the answer an SSE stream, once.
func (m *rpcResponder) startSSE(w http.ResponseWriter, callID, outcome string) {
	if m.sse != nil {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set(headerCallID, callID)
	h.Set(headerDecision, outcome)
	w.WriteHeader(http.StatusOK)
	m.sse = &sseStream{w: w, rc: http.NewResponseController(w)}
}

func (st *sseStream) send(msg []byte) {
	_, _ = st.w.Write(appendSSE(nil, []string{"event: message"}, string(msg), true))
	_ = st.rc.Flush()
}

// sendResult sends a stored result on the stream: a JSON body as one
// event, an SSE body event by event (ids already rewritten).
func (st *sseStream) sendResult(res pending.Result) {
	if strings.HasPrefix(http.Header(res.Header).Get("Content-Type"), "text/event-stream") {
		for _, ev := range sseEvents(res.Body) {
			if ev.hasData && strings.TrimSpace(ev.data) != "" {
				st.send([]byte(ev.data))
			}
		}
		return
	}
	st.send(res.Body)
}
