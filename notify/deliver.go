package notify

import (
	"bytes"
	"context"
	"errors"
	"hash/maphash"
	"io"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/direct"
	"github.com/toolgate/toolgate/internal/logurl"
)

// worker delivers one target's events over a few lanes, each a queue
// with one goroutine that sends its events one at a time. A call's events
// all take the same lane (lane), so a target sees them in the order Notify
// was called: a resolved event never overtakes its requested event. Calls
// on different lanes are sent side by side, so one slow receiver's round
// trip (a chat service answers in hundreds of milliseconds) does not
// bound how many calls a second are announced, and a retried event holds
// up only its own lane, bounded by MaxElapsed, while that lane's queue
// absorbs the backlog.
type worker struct {
	n     *Notifier
	index int
	// req is a POST to the target's URL, without body, headers or
	// context, that each attempt copies. The URL is never logged: Slack
	// and Teams URLs are credentials.
	req    *http.Request
	host   string
	format string
	key    []byte // nil: unsigned
	lanes  []chan queued
	unsent unsent // requested events queued, for a resolved event to skip
	drops  atomic.Int64
	// queuedBytes is the size of the events in the lanes and in delivery
	// (their arguments, mostly): bounded by MaxQueuedBytes as the lanes
	// are by QueueSize.
	queuedBytes atomic.Int64
}

// lane is the queue of call callID's events.
func (w *worker) lane(callID string) chan queued {
	if len(w.lanes) == 1 {
		return w.lanes[0]
	}
	return w.lanes[maphash.String(w.n.seed, callID)%uint64(len(w.lanes))]
}

func (w *worker) run(ctx context.Context, lane chan queued) {
	defer w.n.wg.Done()
	abandoned := 0
	for q := range lane {
		if ctx.Err() != nil {
			// Close gave up: count what is left without sending it.
			abandoned++
			w.n.report(w, ResultDropped)
			q.s.done(w.n, &q.e, ResultDropped)
			w.queuedBytes.Add(-q.size)
			continue
		}
		if q.skip != nil && w.unsent.take(q.e.CallID, q.skip) {
			// The call was resolved while this waited (unsent.go).
			w.n.report(w, ResultSkipped)
			q.s.done(w.n, &q.e, ResultSkipped)
			w.queuedBytes.Add(-q.size)
			continue
		}
		res := w.deliver(ctx, q.e, q.s.id)
		if res == ResultFailed && ctx.Err() != nil {
			// Abandoned at shutdown (counted failed): it did not get its
			// attempts, so it does not settle, and another replica sends it.
			res = ResultDropped
		}
		q.s.done(w.n, &q.e, res)
		w.queuedBytes.Add(-q.size)
	}
	if abandoned > 0 {
		w.n.log.Warn("notifications not delivered at shutdown",
			"target", w.index, "format", w.format, "host", w.host, "dropped", abandoned)
	}
}

// dropped accounts for an event Notify could not enqueue. It logs the
// 1st, 2nd, 4th, 8th… drop only, so a storm cannot flood the log (or slow
// Notify); the metric counts every one.
func (w *worker) dropped(e Event) {
	w.n.report(w, ResultDropped)
	if total := w.drops.Add(1); total&(total-1) == 0 {
		w.n.log.Warn("notification queue full, event dropped",
			"target", w.index, "format", w.format, "host", w.host,
			"call_id", e.CallID, "event", e.Type, "dropped_total", total)
	}
}

// deliver sends e, whose id is id, until it is delivered, fails
// permanently, or runs out of attempts, time or (at shutdown) context. It
// returns the final result, ResultDelivered or ResultFailed.
func (w *worker) deliver(ctx context.Context, e Event, id string) string {
	opts := &w.n.opts
	// The delivery's logger is made on first use: a delivery that goes
	// through logs nothing at info level, and With costs allocations.
	var logger *slog.Logger
	log := func() *slog.Logger {
		if logger == nil {
			logger = w.n.log.With("target", w.index, "format", w.format, "host", w.host,
				"call_id", e.CallID, "event", e.Type)
		}
		return logger
	}

	body, contentType, err := render(w.format, &e, opts.SlackInteractive)
	if err != nil {
		log().Error("notification could not be rendered", "err", err)
		w.n.report(w, ResultFailed)
		return ResultFailed
	}
	deadline := time.Now().Add(opts.MaxElapsed)

	for attempt := 1; ; attempt++ {
		r := w.post(ctx, deadline, id, body, contentType)
		if r.ok {
			if w.n.log.Enabled(ctx, slog.LevelDebug) {
				log().Debug("notification delivered", "attempt", attempt, "status", r.status)
			}
			w.n.report(w, ResultDelivered)
			return ResultDelivered
		}
		if r.detail != "" {
			// The receiver's answer may echo what we sent (the approval
			// link), so it stays at debug level.
			log().Debug("notification receiver answered", "attempt", attempt, "status", r.status, "body", r.detail)
		}
		attrs := []any{"attempt", attempt, "status", r.status, "err", r.err}
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			log().Warn("notification abandoned at shutdown", attrs...)
		case !r.retry:
			log().Warn("notification failed permanently", attrs...)
		case attempt >= opts.MaxAttempts:
			log().Warn("notification failed: attempts used up", attrs...)
		default:
			wait = w.n.backoff(attempt)
			if r.retryAfter >= 0 {
				wait = r.retryAfter // the receiver knows its rate limit best
			}
			if !time.Now().Add(wait).Before(deadline) {
				log().Warn("notification failed: time used up", append(attrs, "wait", wait)...)
				break
			}
			w.n.report(w, ResultRetry)
			log().Info("notification attempt failed, retrying", append(attrs, "wait", wait)...)
			if sleep(ctx, wait) {
				continue
			}
			log().Warn("notification abandoned at shutdown", attrs...)
		}
		w.n.report(w, ResultFailed)
		return ResultFailed
	}
}

// result is what one attempt came to.
type result struct {
	ok, retry  bool
	status     int           // 0 when no response arrived
	err        error         // transport error, without the URL
	retryAfter time.Duration // -1: no usable Retry-After
	detail     string        // start of a failed response's body, for debug logs
}

// post makes one attempt. Each attempt has a fresh webhook-timestamp and
// signature but the same webhook-id, as Standard Webhooks asks.
func (w *worker) post(ctx context.Context, deadline time.Time, id string, body []byte, contentType string) result {
	// A hanging receiver cannot outlast MaxElapsed, nor, with the
	// Notifier's own client, Options.Timeout (defaultClient). When a given
	// client's own timeout ends first it bounds the attempt already, the
	// response's body included, and a context of ours would only cost a
	// timer.
	if t := w.n.timeout; t > 0 {
		if end := time.Now().Add(t); end.Before(deadline) {
			deadline = end
		}
	}
	if t := w.n.client.Timeout; t <= 0 || time.Now().Add(t).After(deadline) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	// The request is what http.NewRequestWithContext would make of the
	// URL and a bytes.Reader of body, without parsing the URL again.
	req := w.req.WithContext(ctx)
	req.ContentLength = int64(len(body))
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	// Stored as Set would store them (canonical names, one value each),
	// but with the values in one array rather than a slice each.
	vals := [...]string{contentType, "toolgate-notify", id, ts, ""}
	req.Header = make(http.Header, len(vals))
	req.Header["Content-Type"] = vals[0:1:1]
	req.Header["User-Agent"] = vals[1:2:2]
	req.Header["Webhook-Id"] = vals[2:3:3]
	req.Header["Webhook-Timestamp"] = vals[3:4:4]
	if w.key != nil {
		vals[4] = sign(w.key, id, ts, body)
		req.Header["Webhook-Signature"] = vals[4:5:5]
	}

	resp, err := w.n.client.Do(req)
	if err != nil {
		return result{retry: true, err: logurl.WithoutURL(err), retryAfter: -1}
	}
	defer resp.Body.Close()
	r := result{status: resp.StatusCode, retryAfter: -1}
	switch sc := resp.StatusCode; {
	case sc >= 200 && sc <= 299:
		r.ok = true
	case sc == http.StatusRequestTimeout, sc == http.StatusConflict, sc == http.StatusTooEarly,
		sc == http.StatusTooManyRequests, sc >= 500:
		r.retry = true
		if sc == http.StatusTooManyRequests || sc == http.StatusServiceUnavailable {
			r.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
	}
	// Reading the rest lets the connection be reused; the limit keeps a
	// hostile receiver from making us read forever. Only a failed
	// response's head is kept, for the debug log.
	const headBytes = 256
	rest := int64(headBytes + 64<<10)
	if !r.ok {
		head := make([]byte, headBytes)
		k, _ := io.ReadFull(resp.Body, head)
		r.detail = printable(head[:k])
		rest -= headBytes
	}
	if resp.ContentLength != 0 { // 0: there is no body to read (a 204's, for one)
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, rest))
	}
	return r
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP
// date. It returns -1 when the value is absent or unreadable. Huge values
// are clamped (the MaxElapsed check then fails the event) rather than
// allowed to overflow.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	const limit = 24 * time.Hour
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		if secs > uint64(limit/time.Second) {
			return limit
		}
		return time.Duration(secs) * time.Second
	} else if errors.Is(err, strconv.ErrRange) {
		return limit
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return -1
	}
	return min(max(t.Sub(now), 0), limit)
}

// backoff returns the wait before retry number attempt (1-based): a random
// duration in [0, min(BaseBackoff·2^(attempt-1), 1m)], "full jitter", so
// many toolgates retrying one receiver spread out instead of stampeding.
func (n *Notifier) backoff(attempt int) time.Duration {
	base := n.opts.BaseBackoff
	ceiling := max(maxBackoff, base)
	d := ceiling
	if shift := attempt - 1; shift < 63 && bits.Len64(uint64(base))+shift < 63 {
		d = min(base<<shift, ceiling)
	}
	return rand.N(d + 1)
}

// sleep waits d or until ctx ends; it reports whether the wait completed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// printable keeps printable ASCII of b so a receiver's answer cannot forge
// log lines.
func printable(b []byte) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, string(b))
}

// defaultClient is used when Options.Client is nil. Its transport is its
// own, so Close can release the keep-alive connections it opened. It keeps
// up to one idle connection per lane, counting the lanes of all targets
// (targets may share a host): with net/http's default of 2 per host, a
// target sending over 4 lanes closed its connection and dialled again (a
// TLS handshake, for Slack or Teams) for most events once its lanes ran
// side by side. Events to the plain-HTTP targets among targets go out on
// connections of the client's own (direct.Hosts), on the lane's goroutine,
// without the two goroutines net/http's Transport gives each connection
// and the wake-ups of the hand-offs between them; https receivers (Slack,
// Teams) and those behind an HTTP proxy go through the Transport.
// Redirects are the client's affair, on either.
//
// It has no Timeout: each attempt bounds itself with a context of
// Options.Timeout (post). With a transport other than net/http's own, a
// client's Timeout costs a goroutine and a timer for each request.
func defaultClient(lanes int, targets []*url.URL) *http.Client {
	var tr *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = dt.Clone()
	} else {
		tr = &http.Transport{Proxy: http.ProxyFromEnvironment}
	}
	tr.MaxIdleConnsPerHost = max(lanes, http.DefaultMaxIdleConnsPerHost)
	tr.MaxIdleConns = max(lanes, tr.MaxIdleConns)
	// A receiver's answer is read only for its status and a few bytes
	// of a failure: no Accept-Encoding, so an event is the same request
	// on either transport.
	tr.DisableCompression = true
	return &http.Client{
		Transport: direct.NewHosts(tr, targets),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			// 301/302/303 would turn the POST into a bodiless GET whose 2xx
			// would count as delivered; another host would receive the
			// signature and the event. Neither is followed.
			if len(via) >= 5 {
				return http.ErrUseLastResponse
			}
			if req.Response != nil {
				if sc := req.Response.StatusCode; sc != http.StatusTemporaryRedirect && sc != http.StatusPermanentRedirect {
					return http.ErrUseLastResponse
				}
			}
			if req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}
