package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// rssRun sends toolgate's allowed call at o.rate for o.rssDur and samples
// its RSS every second, to show whether memory stays flat after warm-up.
func (s *stack) rssRun(ctx context.Context, o *options, stdout io.Writer) error {
	var allow *target
	for _, t := range s.targets(&options{}) {
		if t.name == "toolgate allow" {
			allow = t
		}
	}
	pid := s.tgMemory.pid()
	var series []int64
	done := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				sampled <- nil
				return
			case <-ctx.Done():
				sampled <- ctx.Err()
				return
			case <-tick.C:
				kib, err := rssKiB(pid)
				if err != nil {
					sampled <- err
					return
				}
				series = append(series, kib)
			}
		}
	}()
	r, err := runRate(rateClient(), allow, s.agentKey, o.rate, o.rssDur)
	close(done)
	if serr := <-sampled; err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	if len(series) < 4 {
		return errors.New("-rss: too few samples; use a longer -rss-duration")
	}
	warm := min(10, len(series)/4) // the first seconds are warm-up
	after := series[warm:]
	lo, hi := after[0], after[0]
	for _, v := range after {
		lo, hi = min(lo, v), max(hi, v)
	}
	fmt.Fprintf(stdout, "### toolgate RSS at %d req/s for %s (allowed call)\n\n", o.rate, o.rssDur)
	fmt.Fprintf(stdout, "| calls | bad | p50 | p99 | RSS at %d s | RSS at end | min–max after warm-up | end − warm |\n|---|---|---|---|---|---|---|---|\n", warm+1)
	fmt.Fprintf(stdout, "| %d | %d | %s | %s | %.1f MiB | %.1f MiB | %.1f–%.1f MiB | %+.1f MiB |\n\n",
		r.sent, r.bad, us(r.p50), us(r.p99), mib(series[warm]), mib(series[len(series)-1]), mib(lo), mib(hi), mib(series[len(series)-1]-series[warm]))
	fmt.Fprint(stdout, "RSS every second (MiB):")
	for _, v := range series {
		fmt.Fprintf(stdout, " %.1f", mib(v))
	}
	fmt.Fprintln(stdout)
	if r.bad > 0 {
		return fmt.Errorf("-rss: %d of %d calls were not answered 200", r.bad, r.sent)
	}
	return nil
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1e3) }
