package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// liveRelay streams an approved MCP call's answer to the agent request
// that is held on it, event by event as the upstream writes them, when
// that request is the one executing the call and its client accepts SSE:
// the agent sees progress and partial output as they come instead of the
// whole answer at the end. Progress notifications get the agent's progress
// token on the fly; the response gets the agent's JSON-RPC id and goes out
// once the result is recorded as delivered. The stored
// result (for the status URL and attached retries) is read alongside, as
// before. A call executed by the sweeper, or for a held request that
// cannot take SSE, is not relayed.
type liveRelay struct {
	m     *rpcResponder
	w     http.ResponseWriter
	final []byte // the response to the agent's request, sent once delivered
	token any    // the agent's progress token, if it gave one
}

type relayKey struct{}

// withRelay puts a relay for c's held request on ctx, when there can be one.
func (c *call) withRelay(ctx context.Context, w http.ResponseWriter, r *http.Request) context.Context {
	m, ok := c.out.(*rpcResponder)
	if !ok || !m.msg.isToolCall || !acceptsSSE(r) {
		return ctx
	}
	return context.WithValue(ctx, relayKey{}, &liveRelay{m: m, w: w, token: m.msg.progressToken})
}

func relayOf(ctx context.Context) *liveRelay {
	rl, _ := ctx.Value(relayKey{}).(*liveRelay)
	return rl
}

// event sends one upstream event's data to the agent.
func (rl *liveRelay) event(callID, data string) {
	if strings.TrimSpace(data) == "" {
		return
	}
	b := []byte(data)
	rl.m.startSSE(rl.w, callID, outcomeApproved)
	if out, ok := rewriteResponseID(b, rl.m.msg.rpcID()); ok {
		rl.final = out // held until the result is recorded as delivered (see ask)
		return
	}
	if out, ok := rewriteProgressToken(b, rl.token); ok {
		b = out
	}
	rl.m.sse.send(b)
}

// rewriteProgressToken gives a progress notification the agent's token:
// the stored request may be an earlier request's, whose token was another.
func rewriteProgressToken(b []byte, token any) ([]byte, bool) {
	if token == nil {
		return nil, false
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(b, &msg) != nil || string(msg["method"]) != `"notifications/progress"` {
		return nil, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return nil, false
	}
	t, err := json.Marshal(token)
	if err != nil {
		return nil, false
	}
	params["progressToken"] = t
	if msg["params"], err = json.Marshal(params); err != nil {
		return nil, false
	}
	out, err := json.Marshal(msg)
	return out, err == nil
}

// readRelayed reads an SSE answer, up to limit bytes kept, relaying each
// event to rl as soon as its ending blank line arrives. Past limit it
// still relays (the agent gets the whole stream) and reports truncated.
func readRelayed(body io.Reader, limit int64, rl *liveRelay, callID string) (kept []byte, truncated bool, err error) {
	br := bufio.NewReader(body)
	var event strings.Builder
	for {
		line, rerr := br.ReadString('\n')
		if len(line) > 0 {
			if int64(len(kept)+len(line)) <= limit {
				kept = append(kept, line...)
			} else {
				truncated = true
			}
			event.WriteString(line)
			if strings.TrimRight(line, "\r\n") == "" {
				for _, ev := range sseEvents([]byte(event.String())) {
					if ev.hasData {
						rl.event(callID, ev.data)
					}
				}
				event.Reset()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return kept, true, rerr
		}
	}
	for _, ev := range sseEvents([]byte(event.String())) { // a last event without its blank line
		if ev.hasData {
			rl.event(callID, ev.data)
		}
	}
	return kept, truncated, nil
}
