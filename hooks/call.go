package hooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/internal/logurl"
	"github.com/toolgate/toolgate/internal/strictjson"
)

// failure is why a hook did not answer usably. why is fixed text (never
// bytes of the hook's answer or its URL): it becomes the opinion's reason,
// which callers may show to the agent. err, if any, is for the log.
type failure struct {
	why string
	err error
	// busy: the hook was not asked, its requests in flight being at their
	// bound. Such a failure denies, whatever on_failure says.
	busy bool
}

// ask sends input to h and returns its opinion and how long it took;
// busy, when set, is why the call has no slot for it (reserve), and h is
// not asked.
func (r *Runner) ask(ctx context.Context, busy *failure, h *hook, input []byte) (Opinion, time.Duration) {
	start := time.Now()
	a, f := Opinion{}, busy
	if busy == nil {
		a, f = r.post(ctx, h, input)
	}
	took := time.Since(start)
	if f != nil {
		if ok, suppressed := r.failed.Allow(h.name + "\x00" + f.why); ok {
			attrs := []any{"hook", h.name, "why", f.why, "on_failure", h.onFailure, "duration_ms", took.Milliseconds(), "suppressed_since_last", suppressed}
			if f.err != nil {
				attrs = append(attrs, "err", f.err)
			}
			r.log.WarnContext(ctx, "hook failed", attrs...)
		}
		decision := h.onFailure
		if f.busy {
			decision = Deny
		}
		return Opinion{
			Decision: decision,
			Hook:     h.name,
			Reason:   "hook " + h.name + " failed: " + f.why,
			Failed:   true,
		}, took
	}
	r.log.DebugContext(ctx, "hook answered", "hook", h.name, "decision", a.Decision,
		"rewrote", a.UpdatedArguments != nil, "duration_ms", took.Milliseconds())
	a.Hook = h.name
	return a, took
}

// post makes the one request of a hook run; there is no retry, the budget
// being the call's latency.
func (r *Runner) post(ctx context.Context, h *hook, input []byte) (Opinion, *failure) {
	hctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodPost, h.url, bytes.NewReader(input))
	if err != nil {
		return Opinion{}, &failure{why: "request could not be built", err: logurl.WithoutURL(err)}
	}
	id := "msg_" + rand.Text()
	ts := strconv.FormatInt(r.now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	if h.key != nil {
		req.Header.Set("webhook-signature", sign(h.key, id, ts, input))
	}

	resp, err := r.client.Do(req)
	if err != nil {
		return Opinion{}, r.interrupted(ctx, hctx, h, "request failed", err)
	}
	defer resp.Body.Close()
	switch sc := resp.StatusCode; {
	case sc >= 300 && sc <= 399:
		return Opinion{}, &failure{why: "redirect not followed (status " + strconv.Itoa(sc) + ")"}
	case sc < 200 || sc > 299:
		// Read a little so the connection can be reused; not more, so a
		// hostile hook cannot make us read forever.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return Opinion{}, &failure{why: "status " + strconv.Itoa(sc)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return Opinion{}, r.interrupted(ctx, hctx, h, "response could not be read", err)
	}
	if len(body) > MaxResponseBytes {
		return Opinion{}, &failure{why: "response larger than 1 MiB"}
	}
	op, err := parseAnswer(body)
	if err != nil {
		return Opinion{}, &failure{why: "invalid response: " + err.Error()}
	}
	return op, nil
}

// interrupted names the failure of a request that did not complete: the
// hook's own timeout, the call's end (ctx), or anything else (why).
func (r *Runner) interrupted(ctx, hctx context.Context, h *hook, why string, err error) *failure {
	err = logurl.WithoutURL(err)
	switch {
	case ctx.Err() != nil:
		return &failure{why: "the call ended before the hook answered", err: err}
	case errors.Is(hctx.Err(), context.DeadlineExceeded):
		return &failure{why: "timeout after " + h.timeout.String(), err: err}
	}
	return &failure{why: why, err: err}
}

// parseAnswer reads a hook's answer strictly. The whole text must pass
// strictjson (no duplicate or case-variant keys, valid UTF-8, RFC 8259
// only), so whatever reads the rewritten arguments later reads what this
// function checked. Its errors are fixed text.
func parseAnswer(body []byte) (Opinion, error) {
	doc, err := strictjson.DecodeObject(body)
	if err != nil {
		return Opinion{}, err // *strictjson.Error: fixed text and an offset
	}
	for k := range doc {
		switch k {
		case "decision", "reason", "updated_arguments":
		default:
			return Opinion{}, errors.New("unknown key (allowed: decision, reason, updated_arguments)")
		}
	}
	var op Opinion
	switch d, _ := doc["decision"].(string); d {
	case Allow, Ask, Deny, None:
		op.Decision = d
	default:
		return Opinion{}, errors.New("decision must be allow, ask, deny or none")
	}
	switch reason := doc["reason"].(type) {
	case nil: // absent or null
	case string:
		if len(reason) > MaxReasonBytes {
			return Opinion{}, fmt.Errorf("reason longer than %d bytes", MaxReasonBytes)
		}
		op.Reason = reason
	default:
		return Opinion{}, errors.New("reason must be a string")
	}
	switch doc["updated_arguments"].(type) {
	case nil: // absent or null
	case map[string]any:
		if op.Decision == Deny {
			break // a denied call runs with no arguments at all
		}
		// The object's own bytes, compacted: strictjson refused case
		// variants, so encoding/json finds exactly the key checked above.
		var raw struct {
			UpdatedArguments json.RawMessage `json:"updated_arguments"`
		}
		if err := json.Unmarshal(body, &raw); err != nil {
			return Opinion{}, errors.New("updated_arguments could not be read")
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw.UpdatedArguments); err != nil {
			return Opinion{}, errors.New("updated_arguments could not be read")
		}
		op.UpdatedArguments = b.Bytes()
	default:
		return Opinion{}, errors.New("updated_arguments must be an object")
	}
	return op, nil
}

// reserve takes n slots for a call of caller's, all or none, at once:
// waiting for them would let a slow hook make every call queue behind it.
// It refuses (with the failure the call's hooks answer) past maxInFlight,
// or when caller, already holding some, would hold more than its share
// while more than half the slots would be taken (a lone caller uses the
// idle rest; under load each keeps to its share, and no one holds more than
// half but for one call of more hooks than that).
func (r *Runner) reserve(caller string, n int) *failure {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.inFlight+n > r.maxInFlight:
		return &failure{why: "too many hook requests in flight", busy: true}
	case r.callers[caller]+n > r.perCaller && 2*(r.inFlight+n) > r.maxInFlight && (r.callers[caller] > 0 || 2*n <= r.maxInFlight):
		// A caller holding nothing may still take more than half for one
		// call of more hooks than half the slots: else it never runs.
		return &failure{why: "too many hook requests in flight for this caller", busy: true}
	}
	r.inFlight += n
	r.callers[caller] += n
	return nil
}

// release gives back the n slots reserve took for caller.
func (r *Runner) release(caller string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight -= n
	if r.callers[caller] -= n; r.callers[caller] <= 0 {
		delete(r.callers, caller)
	}
}
