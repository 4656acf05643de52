package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// The -abuse run: one toolgate serve process, a recording upstream and a
// counting notification receiver, and three attacks a caller can mount
// without breaking any rule of the protocol — an ask flood from one
// principal, connections that stall their request bodies, and an ask
// churn (park, cancel, again); then the churn again, against a second
// toolgate with a rate of parks per principal. It prints what toolgate did and fails when
// a guarantee is broken.

// abuseParams sizes the run; -quick makes it a smoke run.
type abuseParams struct {
	asks, workers         int           // the flood: asks sent by that many workers
	perSubject, maxParked int           // limits.max_parked_per_subject, limits.max_parked
	stalls                int           // stalled connections
	churns, churnBody     int           // the churn: park-and-cancel cycles, bytes of padding per call
	parkRate              int           // limits.max_parks_per_minute (0: none; the park-rate run's own toolgate sets it)
	rateFor               time.Duration // how long the park-rate run parks and cancels
	bodyTimeout           time.Duration
	loopWorkers           int           // the allow loop's concurrency
	alone                 time.Duration // the allow loop alone, before each attack
}

func abuseSizes(quick bool) abuseParams {
	p := abuseParams{
		asks: 10000, workers: 64, perSubject: 100, maxParked: 10000,
		stalls: 1000, churns: 2000, churnBody: 64 << 10, bodyTimeout: 2 * time.Second, loopWorkers: 8, alone: 3 * time.Second,
		rateFor: 5 * time.Second,
	}
	if quick {
		p.asks, p.stalls, p.churns, p.alone, p.rateFor = 1000, 100, 400, time.Second, 2*time.Second
	}
	return p
}

// abuseRun starts the stack, mounts the flood and then the stall, and
// prints one table row per measure; it returns an error naming every
// check that failed, so a broken guarantee fails the run.
func abuseRun(ctx context.Context, o *options, pins pinning, stdout, stderr io.Writer) error {
	p := abuseSizes(o.quick)
	store := "memory"
	if o.redisSet && o.redis != "" {
		if redisAnswers(o.redis) {
			store = "redis"
		} else {
			fmt.Fprintf(stderr, "warning: no Redis answers at %s: parked calls stay in memory\n", o.redis)
		}
	}
	p.stalls = fitDescriptors(p.stalls, stderr)
	s, err := startAbuseStack(ctx, o, pins, p, store, "toolgate-abuse")
	if err != nil {
		return err
	}
	defer s.recv.close()
	fmt.Fprintf(stdout, "toolgate-bench -abuse: %s; toolgate on cpu %s, load on cpu %s; parked calls in %s\n\n",
		machine(), orAll(pins.servers), orAll(pins.load), store)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tmeasure\tvalue\tcheck")
	var failed []string
	check := func(scenario, measure, value string, ok bool, why string) {
		mark := ""
		if why != "" {
			mark = "ok"
			if !ok {
				mark = "FAIL"
				failed = append(failed, scenario+": "+why)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", scenario, measure, value, mark)
	}
	if err := s.flood(ctx, p, check); err != nil {
		return err
	}
	if err := s.stall(ctx, p, check); err != nil {
		return err
	}
	if err := s.churn(ctx, p, check); err != nil {
		return err
	}
	if err := parkRateRun(ctx, o, pins, p, store, check); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("-abuse: %s", strings.Join(failed, "; "))
	}
	return nil
}

// fitDescriptors raises this process's soft descriptor limit to what n
// stalled connections and the rest of the run need, or lowers n to what
// fits (with a warning). toolgate, a Go program, raises its own.
func fitDescriptors(n int, stderr io.Writer) int {
	const spare = 256
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return n
	}
	if need := uint64(n + spare); rl.Cur < need {
		rl.Cur = min(need, rl.Max)
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	if fit := int(rl.Cur) - spare; fit < n {
		fit = max(fit, 1)
		fmt.Fprintf(stderr, "warning: descriptor limit %d: %d stalled connections instead of %d\n", rl.Cur, fit, n)
		return fit
	}
	return n
}

// checkFunc records one row of the -abuse table. why is empty for a row
// that only reports; otherwise ok decides the row's mark, and a false ok
// adds why to the run's failures.
type checkFunc func(scenario, measure, value string, ok bool, why string)
