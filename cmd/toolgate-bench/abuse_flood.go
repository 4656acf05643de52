package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The ask flood: one principal parks as many calls as it can, and
// toolgate must hold it to its cap, announce every call it parks, and
// keep answering allowed calls meanwhile.

// floodAnswers is how toolgate answered the flood's asks.
type floodAnswers struct {
	accepted, refused, other, failures int64
	firstOdd                           string // the first error or unexpected status, if hasOdd
	hasOdd                             bool
	took                               time.Duration
}

// floodResult is everything the flood measured, for its rows in the table.
type floodResult struct {
	answers           floodAnswers
	rss0, peak, final int64 // toolgate's RSS in KiB
	notified          notifyCounts
	received          int // distinct parked calls the receiver got
	alone, busy       *loopResult
}

// flood sends p.asks distinct asks from one principal with Prefer:
// respond-async, while the allow loop runs beside them.
func (s *abuseStack) flood(ctx context.Context, p abuseParams, check checkFunc) error {
	loopClient := abuseClient(p.loopWorkers)
	var r floodResult
	r.alone = s.aloneLoop(ctx, loopClient, p.loopWorkers, p.alone)
	rss0, err := rssKiB(s.tg.pid())
	if err != nil {
		return err
	}
	r.rss0 = rss0
	rss := startPeakSampler(ctx, rss0, 50*time.Millisecond, func() (int64, error) { return rssKiB(s.tg.pid()) })
	stopLoop := s.backgroundLoop(ctx, loopClient, p.loopWorkers)
	r.answers = s.sendAsks(ctx, p)
	r.busy = stopLoop()
	if err := ctx.Err(); err != nil {
		rss.cancel()
		return err
	}
	if err := s.awaitAnnouncements(int(r.answers.accepted)); err != nil {
		rss.cancel()
		return err
	}
	time.Sleep(time.Second)
	rss.stop()
	r.peak = rss.peak.Load()
	if r.final, err = rssKiB(s.tg.pid()); err != nil {
		return err
	}
	if r.notified, err = s.notifications(); err != nil {
		return err
	}
	r.received = s.recv.requested()
	reportFlood(check, p, &r)
	return nil
}

// sendAsks sends p.asks asks, each for a different note so none is a
// repeat of another, from p.workers workers sharing one API key, and
// counts the answers: the per-subject cap must turn the surplus into
// 429s rather than parked calls.
func (s *abuseStack) sendAsks(ctx context.Context, p abuseParams) floodAnswers {
	nonce := secret()[:12]
	c := abuseClient(p.workers)
	var next, accepted, refused, other, failures atomic.Int64
	var firstOdd atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range p.workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(p.asks) {
					return
				}
				code, err := s.post(c, "/tools/write_note", fmt.Sprintf(askTemplate, nonce, i), true)
				switch {
				case err != nil:
					failures.Add(1)
					firstOdd.CompareAndSwap(nil, err.Error())
				case code == http.StatusAccepted:
					accepted.Add(1)
				case code == http.StatusTooManyRequests:
					refused.Add(1)
				default:
					other.Add(1)
					firstOdd.CompareAndSwap(nil, "status "+strconv.Itoa(code))
				}
			}
		})
	}
	wg.Wait()
	a := floodAnswers{
		accepted: accepted.Load(), refused: refused.Load(), other: other.Load(), failures: failures.Load(),
		took: time.Since(start),
	}
	if v, ok := firstOdd.Load().(string); ok {
		a.firstOdd, a.hasOdd = v, true
	}
	return a
}

// awaitAnnouncements waits until toolgate has accounted for the
// announcement of each of the parked calls (delivered, failed or
// dropped), or 20 s pass: every parked call is announced once, and the
// loss check is only fair once the announcements have settled.
func (s *abuseStack) awaitAnnouncements(parked int) error {
	for deadline := time.Now().Add(20 * time.Second); ; {
		n, err := s.notifications()
		if err != nil {
			return err
		}
		if n.delivered+n.failed+n.dropped >= parked || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reportFlood writes the flood's rows: exactly the cap parked and the
// rest refused, no announcement lost without being counted, and the
// allowed calls still answered during the flood.
func reportFlood(check checkFunc, p abuseParams, r *floodResult) {
	const sc = "ask flood"
	a, refused := int(r.answers.accepted), int(r.answers.refused)
	answers := fmt.Sprintf("%d × 202, %d × 429, %d other, %d errors", a, refused, r.answers.other, r.answers.failures)
	if r.answers.hasOdd {
		answers += " (first odd: " + r.answers.firstOdd + ")"
	}
	check(sc, fmt.Sprintf("%d asks, %d workers, one API key, cap %d", p.asks, p.workers, p.perSubject), answers,
		a == min(p.perSubject, p.asks) && a+refused == p.asks, fmt.Sprintf("want exactly %d × 202 and the rest 429", min(p.perSubject, p.asks)))
	took := r.answers.took
	check(sc, "flood duration", fmt.Sprintf("%.2f s (%.0f asks/s)", took.Seconds(), float64(p.asks)/took.Seconds()), true, "")
	check(sc, "toolgate RSS before / peak / final", fmt.Sprintf("%.1f / %.1f / %.1f MiB", mib(r.rss0), mib(r.peak), mib(r.final)), true, "")
	n := r.notified
	check(sc, "toolgate_notifications_total", fmt.Sprintf("delivered %d, dropped %d, failed %d, retry %d", n.delivered, n.dropped, n.failed, n.retry), true, "")
	lost, ok := notifyLoss(a, r.received, n)
	check(sc, "receiver: parked calls announced", fmt.Sprintf("%d of %d (lost %d, counted as dropped/failed %d)", r.received, a, lost, n.dropped+n.failed),
		ok, "events lost without being counted")
	check(sc, "allow loop alone", r.alone.String(), r.alone.bad == 0 && r.alone.calls > 0, "allowed calls not answered 200")
	check(sc, "allow loop during flood", during(r.busy, r.alone), r.busy.bad == 0 && r.busy.calls > 0, "allowed calls not answered 200 during the flood")
}
