package proxy

import (
	"context"
	"encoding/json"
	"fmt"
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

// wantsProgress reports whether a held call should hear progress: an MCP
// tools/call whose client gave a progress token and accepts SSE.
func (c *call) wantsProgress(r *http.Request) bool {
	if c.mcp == nil || !c.mcp.isToolCall || c.mcp.progressToken == nil {
		return false
	}
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/event-stream") {
			return true
		}
	}
	return false
}

// progress sends one notifications/progress event, starting the stream
// at the first one.
func (c *call) progress(w http.ResponseWriter, pc pending.Call) {
	if c.sse == nil {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		h.Set(headerCallID, pc.ID)
		h.Set(headerDecision, outcomeAsk)
		w.WriteHeader(http.StatusOK)
		c.sse = &sseStream{w: w, rc: http.NewResponseController(w)}
	}
	c.sse.n++
	msg, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "method": "notifications/progress",
		"params": map[string]any{
			"progressToken": c.mcp.progressToken, "progress": c.sse.n,
			"message": "waiting for a human to approve call " + pc.ID,
		},
	})
	c.sse.send(msg)
}

func (st *sseStream) send(msg []byte) {
	fmt.Fprintf(st.w, "event: message\ndata: %s\n\n", msg)
	_ = st.rc.Flush()
}

// sendResult sends a stored result on the stream: a JSON body as one
// event, an SSE body event by event (ids already rewritten).
func (st *sseStream) sendResult(res pending.Result) {
	if strings.HasPrefix(http.Header(res.Header).Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(string(res.Body), "\n") {
			if data, ok := strings.CutPrefix(line, "data:"); ok && strings.TrimSpace(data) != "" {
				st.send([]byte(strings.TrimSpace(data)))
			}
		}
		return
	}
	st.send(res.Body)
}

// waitStep waits for the call to change, but, when progress is due, no
// longer than until the next progress notification; due reports that the
// step ended for progress, not for the hold.
func (s *Server) waitStep(ctx context.Context, progress bool, pc pending.Call) (next pending.Call, due bool, err error) {
	if !progress {
		next, err = s.cfg.Pending.Wait(ctx, pc.ID, pc.State)
		return next, false, err
	}
	step, cancel := context.WithTimeout(ctx, progressEvery)
	defer cancel()
	next, err = s.cfg.Pending.Wait(step, pc.ID, pc.State)
	return next, err != nil && step.Err() != nil && ctx.Err() == nil, err
}
