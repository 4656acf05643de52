package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// maxRelayEvent bounds an event the relay holds to pass it on, as the
// GET-stream filter bounds one (maxListBytes): an upstream writes events
// as large as the caller's arguments make them (a file read whole), or one
// that never ends. A larger event is not relayed; the agent gets it, cut
// as stored, from the call's result, as when nothing is relayed.
const maxRelayEvent = maxListBytes

// readRelayed reads an SSE answer, up to limit bytes kept (whole lines),
// relaying each event to rl as soon as its ending blank line arrives. Past
// limit it still relays (the agent gets the whole stream) and reports
// truncated. It holds at most one line of limit bytes and one event of
// maxRelayEvent bytes at a time, whatever the upstream writes.
func readRelayed(body io.Reader, limit int64, rl *liveRelay, callID string) (kept []byte, truncated bool, err error) {
	br := bufio.NewReader(body)
	var event []byte
	oversized := false // the event being read outgrew maxRelayEvent: dropped
	lineStart, lineDropped, atLineStart := 0, false, true
	first := true // the event being read starts the stream: its byte order mark is none of its lines
	flush := func() {
		if !oversized {
			text := string(event)
			if first {
				text = strings.TrimPrefix(text, bom) // as sseEvents drops it
			}
			for _, ev := range sseEventsOf(text) {
				if ev.hasData {
					rl.event(callID, ev.data)
				}
			}
		}
		event, oversized, first = event[:0], false, false
	}
	for {
		chunk, rerr := br.ReadSlice('\n') // a line, or part of a long one (bufio.ErrBufferFull)
		if len(chunk) > 0 {
			if atLineStart {
				lineStart, lineDropped = len(kept), false
			}
			// The stored result keeps whole lines: a line that does not fit
			// is dropped, and a later shorter one may still fit.
			if !lineDropped && int64(len(kept)+len(chunk)) <= limit {
				kept = append(kept, chunk...)
			} else if !lineDropped {
				kept, lineDropped, truncated = kept[:lineStart], true, true
			}
			if !oversized && len(event)+len(chunk) > maxRelayEvent {
				event, oversized = event[:0], true
			}
			if !oversized {
				event = append(event, chunk...)
			}
			ended := rerr == nil // the chunk ends its line
			if ended && atLineStart && len(bytes.TrimRight(chunk, "\r\n")) == 0 {
				flush()
			}
			atLineStart = ended
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil && !errors.Is(rerr, bufio.ErrBufferFull) {
			return kept, true, rerr
		}
	}
	flush() // a last event without its blank line
	return kept, truncated, nil
}
