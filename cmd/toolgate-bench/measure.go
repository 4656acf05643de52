package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// sample is one run of one target.
type sample struct {
	rps, p50, p99 float64    // req/s; latencies in µs
	cpu           []float64  // CPU µs per request of each of the target's processes
	steal         float64    // share of the servers' core stolen during the run; -1: unknown (steal.go)
	failed        string     // why the run does not count, if it does not
	redis         *redisCost // per request, for a row whose calls are kept in Redis
}

// check sends one call to every target and fails unless each answers
// what it must: the harness must not time servers that refuse the load.
func (s *stack) check(ctx context.Context, targets []*target) error {
	for _, t := range targets {
		if t.mode != nil {
			if err := s.checkMCP(ctx, t); err != nil {
				return err
			}
			continue
		}
		body := t.body
		if t.unique {
			body = fmt.Sprintf(askTemplate, "check", 0)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(body))
		req.Header = t.headers(s.agentKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("check %s: %w", t.name, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != t.expect {
			return fmt.Errorf("check %s: status %d, want %d: %s", t.name, res.StatusCode, t.expect, b)
		}
	}
	return nil
}

// settle waits until the upstream has stopped receiving calls (approved
// calls may still run after wrk stopped), so a run counts only its own.
func (s *stack) settle() (int64, error) {
	last, err := s.upstreamCount()
	for i := 0; i < 100 && err == nil; i++ {
		time.Sleep(100 * time.Millisecond)
		var n int64
		if n, err = s.upstreamCount(); n == last {
			return n, err
		}
		last = n
	}
	return last, err
}

// measure runs wrk once against t, reading its processes' CPU around the
// run and checking every answer and what reached the upstream.
func (s *stack) measure(ctx context.Context, o *options, t *target, conns int, d time.Duration, profile bool) (*sample, error) {
	before, err := s.settle()
	if err != nil {
		return nil, err
	}
	// Sessions are opened before and closed after the CPU readings: the
	// rows measure calls, not handshakes.
	sessions, err := openSessions(ctx, t, s.agentKey, conns)
	defer closeSessions(t, s.agentKey, sessions)
	if err != nil {
		return nil, err
	}
	cpu0 := make([]time.Duration, len(t.procs))
	for i, p := range t.procs {
		if cpu0[i], err = cpuTime(p.pid()); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	ticks0, terr0 := readTicks(s.serversCPU)
	var redis0 redisCost
	if t.redis {
		if redis0, err = readRedisCost(ctx, s.rdb); err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
	}
	var stopProfile func() error
	if profile {
		if stopProfile, err = startPerf(o.cpuprofile, t.procs[0].pid()); err != nil {
			return nil, err
		}
	}
	w, err := runWrk(ctx, o.dir, t, s.agentKey, sessions, conns, d)
	if stopProfile != nil {
		if perr := stopProfile(); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return nil, err
	}
	ticks1, terr1 := readTicks(s.serversCPU)
	smp := &sample{rps: float64(w.Requests) / (float64(w.DurationUS) / 1e6), p50: w.P50, p99: w.P99, steal: stolen(ticks0, ticks1, terr0, terr1)}
	for i, p := range t.procs {
		c, err := cpuTime(p.pid())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		smp.cpu = append(smp.cpu, float64((c-cpu0[i]).Microseconds())/float64(max(w.Requests, 1)))
	}
	if t.redis {
		r, err := readRedisCost(ctx, s.rdb)
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		r = r.per(redis0, w.Requests)
		smp.redis = &r
	}
	after, err := s.settle()
	if err != nil {
		return nil, err
	}
	smp.failed = verdict(t, w, after-before)
	return smp, nil
}

// verdict says what is wrong with a run, or "".
func verdict(t *target, w *wrkResult, reached int64) string {
	switch {
	case w.Requests == 0:
		return "no answers"
	case w.Connect+w.Read+w.Write+w.Timeout > 0:
		return fmt.Sprintf("socket errors: connect %d read %d write %d timeout %d", w.Connect, w.Read, w.Write, w.Timeout)
	case t.expect < 300 && w.Status > 0:
		return fmt.Sprintf("%d answers were not %d", w.Status, t.expect)
	case t.expect >= 300 && w.Status != w.Requests:
		return fmt.Sprintf("%d of %d answers were 2xx, want %d", w.Requests-w.Status, w.Requests, t.expect)
	case t.reaches && reached < w.Requests:
		return fmt.Sprintf("upstream received %d calls for %d answers", reached, w.Requests)
	case !t.reaches && reached != 0:
		return fmt.Sprintf("upstream received %d calls that must not reach it", reached)
	}
	return ""
}

// saturation runs every target at every concurrency, repetitions
// interleaved (A B C A B C …) so drift hits all targets alike.
func (s *stack) saturation(ctx context.Context, o *options, targets []*target, stderr io.Writer) (map[int]map[*target][]*sample, error) {
	if !o.quick {
		fmt.Fprintln(stderr, "warm-up…")
		for _, t := range targets {
			if _, err := s.measure(ctx, o, t, 8, time.Second, false); err != nil {
				return nil, err
			}
		}
	}
	out := map[int]map[*target][]*sample{}
	profiled := o.cpuprofile == ""
	profileRow := "toolgate allow"
	if o.mcp {
		profileRow = "MCP toolgate (json)"
	}
	if o.profileRow != "" {
		profileRow = o.profileRow
	}
	for _, c := range o.conns {
		out[c] = map[*target][]*sample{}
		for rep := range o.reps {
			for _, t := range targets {
				profile := !profiled && t.name == profileRow && c == o.conns[len(o.conns)-1]
				smp, err := s.measure(ctx, o, t, c, o.duration, profile)
				if err != nil {
					return nil, err
				}
				profiled = profiled || profile
				fmt.Fprintf(stderr, "c=%-3d rep %d/%d %-26s %8.0f req/s  p50 %7.0f µs  p99 %7.0f µs  CPU %6.1f µs/req %s %s\n",
					c, rep+1, o.reps, t.name, smp.rps, smp.p50, smp.p99, sum(smp.cpu), stealText(smp.steal), smp.failed)
				out[c][t] = append(out[c][t], smp)
			}
		}
	}
	return out, nil
}

// fixedRate sends each fixed-body target at o.rate for o.rateDur,
// repetitions interleaved.
func (s *stack) fixedRate(ctx context.Context, o *options, targets []*target, stderr io.Writer) (map[*target][]*rateResult, error) {
	out := map[*target][]*rateResult{}
	var paced []*target
	clients := map[*target]*http.Client{}
	for _, t := range targets {
		// The smoke paces only the pair the 1,000 req/s target compares.
		smoke := !o.quick || t.name == "direct" || t.name == "toolgate allow"
		if !t.unique && t.expect == 200 && smoke {
			paced = append(paced, t)
			clients[t] = rateClient()
		}
	}
	if !o.quick {
		for _, t := range paced {
			if _, err := runRate(clients[t], t, s.agentKey, o.rate, time.Second); err != nil {
				return nil, err
			}
		}
	}
	for rep := range o.reps {
		for _, t := range paced {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if _, err := s.settle(); err != nil {
				return nil, err
			}
			r, err := runRate(clients[t], t, s.agentKey, o.rate, o.rateDur)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(stderr, "%d/s rep %d/%d %-22s p50 %v p99 %v max %v bad %d\n", o.rate, rep+1, o.reps, t.name, r.p50, r.p99, r.max, r.bad)
			out[t] = append(out[t], r)
		}
	}
	return out, nil
}

// redisAnswers reports whether a Redis server answers PING at addr.
func redisAnswers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return false
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.HasPrefix(line, "+PONG")
}

// machine describes the CPU, for the tables' caption.
func machine() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":")) + fmt.Sprintf(", %d cores", countCPUs(string(b)))
		}
	}
	return "unknown CPU"
}

func countCPUs(cpuinfo string) int { return strings.Count(cpuinfo, "\nprocessor") + 1 }

func sum(xs []float64) float64 {
	var t float64
	for _, x := range xs {
		t += x
	}
	return t
}
