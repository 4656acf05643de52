package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// What both scenarios measure beside the attack: the allowed call's
// throughput and latency, and the peak of a reading of toolgate taken
// while the attack runs.

// loopResult is the allow loop's throughput and latency.
type loopResult struct {
	calls, bad int
	rps        float64
	p50, p99   time.Duration
}

// String is the loop's line in the table: throughput, latency and any
// call that was not answered 200.
func (r *loopResult) String() string {
	s := fmt.Sprintf("%.0f req/s, p50 %s, p99 %s (%d calls", r.rps, ms(r.p50), ms(r.p99), r.calls)
	if r.bad > 0 {
		s += fmt.Sprintf(", %d not 200", r.bad)
	}
	return s + ")"
}

// ms prints a latency in milliseconds with the table's precision.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1e3) }

// allowLoop sends the allowed call from workers closed loops until ctx
// ends (a call under way is finished, not cut).
func (s *abuseStack) allowLoop(ctx context.Context, c *http.Client, workers int) *loopResult {
	var mu sync.Mutex
	var lat []time.Duration
	bad := 0
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			var mine []time.Duration
			myBad := 0
			for ctx.Err() == nil {
				t0 := time.Now()
				code, err := s.post(c, "/tools/read_file", readBody, false)
				mine = append(mine, time.Since(t0))
				if err != nil || code != http.StatusOK {
					myBad++
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			bad += myBad
			mu.Unlock()
		})
	}
	wg.Wait()
	r := &loopResult{calls: len(lat), bad: bad, rps: float64(len(lat)) / time.Since(start).Seconds()}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50, r.p99 = percentile(lat, 50), percentile(lat, 99)
	}
	return r
}

// aloneLoop is the allow loop by itself for d.
func (s *abuseStack) aloneLoop(ctx context.Context, c *http.Client, workers int, d time.Duration) *loopResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return s.allowLoop(ctx, c, workers)
}

// during is the allow loop during an attack, in a line with the ratio to
// the loop alone.
func during(r, alone *loopResult) string {
	ratio := 0.0
	if alone.rps > 0 {
		ratio = r.rps / alone.rps
	}
	return fmt.Sprintf("%s = %.2f× alone", r, ratio)
}

// backgroundLoop starts the allow loop and returns the function that ends
// it and hands back its result, so the loop can run beside an attack that
// decides on its own when it is over.
func (s *abuseStack) backgroundLoop(ctx context.Context, c *http.Client, workers int) (stop func() *loopResult) {
	loopCtx, stopLoop := context.WithCancel(ctx)
	done := make(chan *loopResult, 1)
	go func() { done <- s.allowLoop(loopCtx, c, workers) }()
	return func() *loopResult {
		stopLoop()
		return <-done
	}
}

// peakSampler takes a reading of toolgate every so often and keeps the
// highest: a value read only before and after an attack would miss what
// the attack cost while it ran.
type peakSampler struct {
	peak    atomic.Int64
	cancel  context.CancelFunc // ends the sampling without waiting for it
	sampled chan struct{}      // closed when the sampling goroutine is done
}

// startPeakSampler starts from the reading first and samples read every
// interval until ctx ends or the sampler is cancelled or stopped. A
// reading that fails is skipped: one missed sample does not end the run.
func startPeakSampler(ctx context.Context, first int64, every time.Duration, read func() (int64, error)) *peakSampler {
	ps := &peakSampler{sampled: make(chan struct{})}
	ps.peak.Store(first)
	sampleCtx, cancel := context.WithCancel(ctx)
	ps.cancel = cancel
	go func() {
		defer close(ps.sampled)
		for sampleCtx.Err() == nil {
			if v, err := read(); err == nil && v > ps.peak.Load() {
				ps.peak.Store(v)
			}
			select {
			case <-sampleCtx.Done():
			case <-time.After(every):
			}
		}
	}()
	return ps
}

// stop ends the sampling and waits for the last reading, so the peak is
// final when it is read.
func (ps *peakSampler) stop() {
	ps.cancel()
	<-ps.sampled
}
