package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// row is a target's medians over its repetitions.
type row struct {
	t             *target
	rps, p50, p99 float64
	cpu           []float64
	// repCPU is the CPU per request the ratios compare (serverCPU's
	// processes) of each repetition, in the order they ran: the rows'
	// repetitions are interleaved, so the i-th of two rows ran minutes
	// apart at most, on a host whose pace can move between runs.
	repCPU []float64
	failed []string
	redis  *redisCost // medians, for a row whose calls are kept in Redis
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func medians(t *target, smps []*sample) *row {
	r := &row{t: t}
	var rps, p50, p99, rcpu, rcmds, rscripts []float64
	cpu := make([][]float64, len(t.procs))
	for _, s := range smps {
		rps, p50, p99 = append(rps, s.rps), append(p50, s.p50), append(p99, s.p99)
		if s.redis != nil {
			rcpu, rcmds, rscripts = append(rcpu, s.redis.cpuUS), append(rcmds, s.redis.commands), append(rscripts, s.redis.scripts)
		}
		for i, c := range s.cpu {
			cpu[i] = append(cpu[i], c)
		}
		r.repCPU = append(r.repCPU, sum(serverProcs(t, s.cpu)))
		if s.failed != "" {
			r.failed = append(r.failed, s.failed)
		}
	}
	r.rps, r.p50, r.p99 = median(rps), median(p50), median(p99)
	if len(rcpu) > 0 {
		r.redis = &redisCost{cpuUS: median(rcpu), commands: median(rcmds), scripts: median(rscripts)}
	}
	for _, c := range cpu {
		r.cpu = append(r.cpu, median(c))
	}
	return r
}

// serverCPU is the CPU per request the ratios compare: every process of
// the row but an upstream shown beside it.
func (r *row) serverCPU() float64 {
	return sum(serverProcs(r.t, r.cpu))
}

// serverProcs is cpu (one figure per process of t) without an upstream
// shown beside the server.
func serverProcs(t *target, cpu []float64) []float64 {
	if t.upstreamCPU && len(cpu) > 1 {
		return cpu[:len(cpu)-1]
	}
	return cpu
}

// spread is the range of a's CPU per request over b's, repetition by
// repetition, as a clause of a target line ("" for one repetition). The
// tables compare medians; this shows how far single pairs of runs moved
// about them.
func spread(a, b *row) string {
	if len(a.repCPU) < 2 || len(a.repCPU) != len(b.repCPU) {
		return ""
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range a.repCPU {
		if b.repCPU[i] == 0 {
			return ""
		}
		x := a.repCPU[i] / b.repCPU[i]
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf(" (by repetition %.2f–%.2f×)", lo, hi)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// report prints one table per concurrency, then the ratios the targets
// are stated in.
func report(w io.Writer, o *options, targets []*target, sat map[int]map[*target][]*sample) {
	summary := &strings.Builder{}
	for _, c := range o.conns {
		rows := map[string]*row{}
		fmt.Fprintf(w, "### Saturation, %d connection(s): wrk, median of %d × %s\n\n", c, o.reps, o.duration)
		fmt.Fprintln(w, "| server | req/s | p50 | p99 | CPU µs/req | req/s ÷ direct | req/s ÷ bare | CPU ÷ direct | CPU ÷ bare |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		for _, t := range targets {
			r := medians(t, sat[c][t])
			rows[t.name] = r
		}
		for _, t := range targets {
			r, ref, bare := rows[t.name], rows[t.ref], rows[t.bareRow()]
			cpu := fmt.Sprintf("%.1f", sum(r.cpu))
			if len(r.cpu) == 2 && len(t.parts) == 2 {
				cpu = fmt.Sprintf("%.1f (%s %.1f + %s %.1f)", sum(r.cpu), t.parts[0], r.cpu[0], t.parts[1], r.cpu[1])
			}
			name := t.name
			if len(r.failed) > 0 {
				name += fmt.Sprintf(" ⚠ %d run(s) failed a check: %s", len(r.failed), r.failed[0])
			}
			bareRPS, bareCPU := "–", "–"
			if bare != nil && (t.ref == "direct" || t.bare != "") {
				bareRPS, bareCPU = ratio(r.rps, bare.rps), ratio(r.serverCPU(), bare.serverCPU())
			}
			refRPS, refCPU := "–", "–"
			if ref != nil {
				refRPS, refCPU = ratio(r.rps, ref.rps), ratio(r.serverCPU(), ref.serverCPU())
			}
			fmt.Fprintf(w, "| %s | %.0f | %.0f µs | %.0f µs | %s | %s | %s | %s | %s |\n",
				name, r.rps, r.p50, r.p99, cpu, refRPS, bareRPS, refCPU, bareCPU)
		}
		fmt.Fprintln(w)
		var all []*sample
		for _, t := range targets {
			all = append(all, sat[c][t]...)
		}
		if note := stealNote(all); note != "" {
			fmt.Fprintf(w, "%s\n\n", note)
		}
		targetLines(summary, c, rows)
	}
	if summary.Len() > 0 {
		fmt.Fprintf(w, "### Against the targets\n\n%s\n", summary)
	}
}

// targetLines states the ratios the performance targets are written in.
func targetLines(w io.Writer, c int, rows map[string]*row) {
	allow, bare, ext, deny := rows["toolgate allow"], rows["bare proxy"], rows["ext-OPA"], rows["toolgate deny"]
	mcpLines(w, c, rows)
	if allow == nil {
		return
	}
	if bare != nil {
		fmt.Fprintf(w, "- c=%d: toolgate allow CPU/req ÷ bare proxy %s%s (target ≤ 1.25×); req/s ÷ bare %s (≥ 0.8×)", c, ratio(sum(allow.cpu), sum(bare.cpu)), spread(allow, bare), ratio(allow.rps, bare.rps))
		if ext != nil {
			fmt.Fprintf(w, "; req/s ÷ ext-OPA %s (≥ 3×)", ratio(allow.rps, ext.rps))
		}
		if c == 1 {
			fmt.Fprintf(w, "; added p50 vs bare %+.0f µs (≤ 40 µs)", allow.p50-bare.p50)
		}
		fmt.Fprintln(w)
	}
	if deny != nil {
		fmt.Fprintf(w, "- c=%d: toolgate deny req/s ÷ allow %s (≥ 2×)\n", c, ratio(deny.rps, allow.rps))
	}
	for _, n := range []string{"toolgate ask (memory)", "toolgate ask (Redis)"} {
		if a := rows[n]; a != nil {
			target := "≤ 3×"
			if strings.Contains(n, "Redis") {
				target = "≤ 5×"
			}
			fmt.Fprintf(w, "- c=%d: %s with instant approval: CPU/req ÷ allow %s%s (target %s), added p50 vs allow %+.0f µs, req/s ÷ allow %s",
				c, n, ratio(sum(a.cpu), sum(allow.cpu)), spread(a, allow), target, a.p50-allow.p50, ratio(a.rps, allow.rps))
			floorRow := "bare ask"
			if strings.Contains(n, "Redis") {
				floorRow = "bare ask (Redis)"
			}
			if floor := rows[floorRow]; floor != nil {
				fmt.Fprintf(w, "; CPU/req ÷ %s %s", floorRow, ratio(sum(a.cpu), sum(floor.cpu)))
			}
			fmt.Fprintln(w, a.redisText())
		}
	}
	for _, n := range [][2]string{{"toolgate allow", "baseline allow"}, {"toolgate ask (memory)", "baseline ask (memory)"}} {
		if a, b := rows[n[0]], rows[n[1]]; a != nil && b != nil {
			fmt.Fprintf(w, "- c=%d: %s CPU/req ÷ %s %s%s (%.1f vs %.1f µs)\n", c, n[0], n[1], ratio(sum(a.cpu), sum(b.cpu)), spread(a, b), sum(a.cpu), sum(b.cpu))
		}
	}
	if floor, bare := rows["bare ask"], rows["bare proxy"]; floor != nil && bare != nil {
		// The floor of the ask ratios: the same exchanges with nothing
		// decided or stored, against the same call forwarded bare.
		fmt.Fprintf(w, "- c=%d: bare ask (the ask's five HTTP exchanges, nothing else) CPU/req ÷ bare proxy %s (%.1f vs %.1f µs)\n",
			c, ratio(sum(floor.cpu), sum(bare.cpu)), sum(floor.cpu), sum(bare.cpu))
	}
	if floor, bare := rows["bare ask (Redis)"], rows["bare proxy"]; floor != nil && bare != nil {
		fmt.Fprintf(w, "- c=%d: bare ask (Redis) (the same, plus four Redis round trips and one pub/sub message) CPU/req ÷ bare proxy %s (%.1f vs %.1f µs)%s\n",
			c, ratio(sum(floor.cpu), sum(bare.cpu)), sum(floor.cpu), sum(bare.cpu), floor.redisText())
	}
	if m, d := rows["MCP toolgate"], rows["MCP direct"]; m != nil && d != nil {
		fmt.Fprintf(w, "- c=%d: MCP tools/call through toolgate: req/s ÷ direct %s, added p50 %+.0f µs\n", c, ratio(m.rps, d.rps), m.p50-d.p50)
	}
}

// redisText is what Redis did per call of r, as a clause of a target
// line; "" for a row whose calls are not kept in Redis.
func (r *row) redisText() string {
	if r.redis == nil {
		return ""
	}
	return fmt.Sprintf("; Redis per call: %.0f µs CPU, %.1f commands, %.1f of them scripts", r.redis.cpuUS, r.redis.commands, r.redis.scripts)
}

// mcpLines states the -mcp rows' ratios of toolgate to the bare proxy in
// each mode.
func mcpLines(w io.Writer, c int, rows map[string]*row) {
	for _, m := range mcpModes {
		tg, bare := rows["MCP toolgate ("+m.name+")"], rows["MCP bare proxy ("+m.name+")"]
		if tg == nil || bare == nil {
			continue
		}
		fmt.Fprintf(w, "- c=%d: MCP %s, toolgate ÷ bare proxy: CPU/call %s (%.1f vs %.1f µs; target ≤ 1.5×)%s, calls/s %s (≥ 0.7×), added p50 %+.0f µs (at c=1 ≤ 100 µs)\n",
			c, m.name, ratio(tg.serverCPU(), bare.serverCPU()), tg.serverCPU(), bare.serverCPU(), spread(tg, bare), ratio(tg.rps, bare.rps), tg.p50-bare.p50)
	}
}

// reportRate prints the fixed-rate table: exact percentiles, medians over
// the repetitions, and the p99 each server adds to the direct call.
func reportRate(w io.Writer, o *options, targets []*target, rates map[*target][]*rateResult) {
	fmt.Fprintf(w, "### Fixed rate, %d req/s: vegeta, median of %d × %s\n\n", o.rate, o.reps, o.rateDur)
	fmt.Fprintln(w, "| server | calls | not 200 | p50 | p99 | max | added p99 vs its direct |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	p99 := map[string]time.Duration{}
	for _, t := range targets {
		if rs := rates[t]; len(rs) > 0 {
			p99[t.name] = medianDur(rs, func(r *rateResult) time.Duration { return r.p99 })
		}
	}
	for _, t := range targets {
		rs := rates[t]
		if len(rs) == 0 {
			continue
		}
		sent, bad := 0, 0
		for _, r := range rs {
			sent, bad = sent+r.sent, bad+r.bad
		}
		added := "–"
		if d, ok := p99[t.ref]; ok && t.ref != t.name {
			added = fmt.Sprintf("%+.0f µs", float64((p99[t.name]-d).Nanoseconds())/1e3)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s |\n", t.name, sent, bad,
			us(medianDur(rs, func(r *rateResult) time.Duration { return r.p50 })), us(p99[t.name]),
			us(medianDur(rs, func(r *rateResult) time.Duration { return r.max })), added)
	}
	fmt.Fprintln(w)
	if tg, bare, direct := p99["toolgate allow"], p99["bare proxy"], p99["direct"]; tg > 0 && bare > direct && direct > 0 {
		fmt.Fprintf(w, "- p99 added to direct: toolgate allow ÷ bare proxy %s (target ≤ 1.5×)\n\n", ratio(float64(tg-direct), float64(bare-direct)))
	}
}

func medianDur(rs []*rateResult, f func(*rateResult) time.Duration) time.Duration {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = float64(f(r))
	}
	return time.Duration(median(xs))
}

// failedChecks makes the exit status say whether every run answered as
// it must.
func failedChecks(sat map[int]map[*target][]*sample, rates map[*target][]*rateResult) error {
	var errs []error
	for c, byTarget := range sat {
		for t, smps := range byTarget {
			for _, s := range smps {
				if s.failed != "" {
					errs = append(errs, fmt.Errorf("c=%d %s: %s", c, t.name, s.failed))
				}
			}
		}
	}
	for t, rs := range rates {
		for _, r := range rs {
			if r.bad > 0 {
				errs = append(errs, fmt.Errorf("%s at fixed rate: %d of %d calls not answered %d", t.name, r.bad, r.sent, t.expect))
			}
		}
	}
	return errors.Join(errs...)
}
