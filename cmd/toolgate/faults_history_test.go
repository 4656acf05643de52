package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// history is what the fault-injection checker saw happen, from outside:
// what agents were answered, what the approver sent and was answered, what
// the upstream executed, which faults ran when, and how every call ended.
// check reads it once the run is over (Jepsen's method: record, then
// judge the whole history).
type history struct {
	mu     sync.Mutex
	calls  map[string]*callRecord
	faults []faultRecord
	ops    []opRecord
	// writes are the moments a probe's write to Redis was taken (and
	// confirmed by as many replicas as toolgate waits for); probed says
	// the topology has a probe.
	writes []time.Time
	probed bool
}

// callRecord is what is known of one call ID.
type callRecord struct {
	id       string
	firstAt  time.Time
	parkAck  bool   // an agent was answered 202: the call is parked
	heldDone bool   // an agent was answered with the upstream's result
	approve  bool   // the approver sent an approval (answered or not)
	ackedAs  string // the state a decision was acknowledged with (200)
	ackedAt  time.Time
	refused  bool   // a rejection or a cancel was acknowledged
	final    string // the state after the run settled; "gone": 404
	execs    int    // executions the upstream saw
}

// faultRecord is one injected fault.
type faultRecord struct {
	kind       string
	start, end time.Time
}

// opRecord is one agent request, for latency under each fault.
type opRecord struct {
	at      time.Time
	took    time.Duration
	status  int // 0: no answer (connection refused, reset, timeout)
	decided bool
	async   bool // Prefer: respond-async: answered at once, not held
}

func newHistory() *history { return &history{calls: make(map[string]*callRecord)} }

// call returns the record of id, created on first sight.
func (h *history) call(id string) *callRecord {
	c := h.calls[id]
	if c == nil {
		c = &callRecord{id: id, firstAt: time.Now()}
		h.calls[id] = c
	}
	return c
}

func (h *history) update(id string, f func(*callRecord)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h.call(id))
}

func (h *history) op(o opRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, o)
}

// wrote records a write the probe saw taken at at.
func (h *history) wrote(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes = append(h.writes, at)
}

func (h *history) fault(kind string, start, end time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, faultRecord{kind, start, end})
}

// ids returns every call ID seen, in order.
func (h *history) ids() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.calls))
	for id := range h.calls {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// wipedAfter reports whether Redis lost its data (a restart without
// persistence) after at: what was stored before may be gone, which the
// README states; it never explains a second execution.
func (h *history) wipedAfter(at time.Time) bool {
	for _, f := range h.faults {
		if f.kind == "redis-restart-empty" && f.end.After(at) {
			return true
		}
	}
	return false
}

// check judges the history and returns its anomalies.
func (h *history) check() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var bad []string
	add := func(c *callRecord, format string, args ...any) {
		bad = append(bad, c.id+": "+fmt.Sprintf(format, args...)+fmt.Sprintf(" (%s)", c))
	}
	for _, c := range h.calls {
		wiped := h.wipedAfter(c.firstAt)
		switch {
		case c.execs > 1:
			add(c, "executed %d times", c.execs)
		case c.execs == 1 && !c.approve:
			add(c, "executed without an approval")
		case c.execs == 1 && c.refused:
			add(c, "executed after an acknowledged rejection or cancel")
		case c.execs == 1 && (c.final == "rejected" || c.final == "expired" || c.final == "cancelled" || c.final == "waiting"):
			add(c, "executed, yet it ended %s", c.final)
		case c.final == "executed" && c.execs == 0:
			add(c, "ended executed with no execution")
		}
		switch c.final {
		case "waiting", "approved", "executing":
			add(c, "still %s after the run settled", c.final)
		case "gone":
			if !wiped && (c.parkAck || c.ackedAs != "") {
				add(c, "acknowledged, then gone with no data loss to explain it")
			}
		}
		if c.ackedAs == "approved" && !wiped && c.final != "executed" && c.final != "unknown" && c.final != "failed" {
			// An approved call is claimed within its approved window, or
			// it expires: refusing it is all toolgate can do while Redis
			// takes no writes (min-replicas-to-write with the replica
			// away, a failover) for nearly the whole window. Such an
			// outage explains an expiry (the README states it); an expiry
			// while the store took writes is an anomaly. Where a probe
			// wrote to Redis all along, its writes say when Redis took
			// them; elsewhere the decided agent requests stand in.
			from, to := c.ackedAt, c.ackedAt.Add(approvedWindow)
			gap, what := h.undecided(from, to), "no agent request was decided"
			if h.probed {
				gap, what = longestGap(h.writes, from, to), "no write to Redis was taken"
			}
			if c.final != "expired" || gap < approvedWindow-claimTime {
				add(c, "an acknowledged approval ended %s; in its %v approved window %s for %v at a stretch",
					c.final, approvedWindow, what, gap.Round(100*time.Millisecond))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// approvedWindow is how long an approved call waits to be claimed before
// it expires (pending's default), and claimTime how long the store must
// take writes within it for a sweeper to claim the call: its grace (3 s)
// and a round.
const (
	approvedWindow = 30 * time.Second
	claimTime      = 5 * time.Second
)

// undecided is the longest stretch between from and to in which no agent
// request started was decided: how long the store took no writes, as
// the agents saw it. h.mu is held.
func (h *history) undecided(from, to time.Time) time.Duration {
	var at []time.Time // ops are recorded as they end, not as they start
	for _, o := range h.ops {
		if o.decided {
			at = append(at, o.at)
		}
	}
	return longestGap(at, from, to)
}

// longestGap is the longest stretch between from and to with none of the
// moments in at.
func longestGap(at []time.Time, from, to time.Time) time.Duration {
	in := make([]time.Time, 0, len(at))
	for _, t := range at {
		if t.After(from) && t.Before(to) {
			in = append(in, t)
		}
	}
	slices.SortFunc(in, time.Time.Compare)
	last, longest := from, time.Duration(0)
	for _, t := range in {
		longest = max(longest, t.Sub(last))
		last = t
	}
	return max(longest, to.Sub(last))
}

func (c *callRecord) String() string {
	return fmt.Sprintf("park acked %v, held result %v, approve sent %v, decision acked %q, refusal acked %v, final %s, executions %d",
		c.parkAck, c.heldDone, c.approve, c.ackedAs, c.refused, c.final, c.execs)
}

// report summarizes the run: calls and how they ended, and agents'
// latency and failures while each kind of fault ran.
func (h *history) report(cycles int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	finals := map[string]int{}
	execs, parked, approvals, acked := 0, 0, 0, 0
	for _, c := range h.calls {
		finals[c.final]++
		execs += c.execs
		if c.parkAck {
			parked++
		}
		if c.approve {
			approvals++
		}
		if c.ackedAs == "approved" {
			acked++
		}
	}
	kinds := map[string]int{}
	recovery := map[string][]time.Duration{}
	for _, f := range h.faults {
		kinds[f.kind]++
		recovery[f.kind] = append(recovery[f.kind], f.end.Sub(f.start))
	}
	fmt.Fprintf(&b, "%d fault cycles %v; %d agent requests; %d calls (%d parks acknowledged), %d approvals sent (%d acknowledged), %d executions\n",
		cycles, sortedCounts(kinds), len(h.ops), len(h.calls), parked, approvals, acked, execs)
	fmt.Fprintf(&b, "final states: %v\n", sortedCounts(finals))
	if h.probed && len(h.writes) > 0 {
		fmt.Fprintf(&b, "writes a probe saw Redis take (every 100 ms): %d, the longest stretch without one %v\n",
			len(h.writes), longestGap(h.writes, h.writes[0], h.writes[len(h.writes)-1]).Round(100*time.Millisecond))
	}
	fmt.Fprintf(&b, "fault to recovery (every replica up, the primary with its replica online): ")
	for _, k := range slices.Sorted(maps.Keys(recovery)) {
		d := recovery[k]
		slices.Sort(d)
		fmt.Fprintf(&b, "%s p50 %v max %v; ", k, d[len(d)/2].Round(100*time.Millisecond), d[len(d)-1].Round(100*time.Millisecond))
	}
	b.WriteString("\n")
	byKind := map[string][]opRecord{}
	for _, o := range h.ops {
		k := "none"
		for _, f := range h.faults {
			if !o.at.Before(f.start) && o.at.Before(f.end) {
				k = f.kind
			}
		}
		byKind[k] = append(byKind[k], o)
	}
	kindNames := make([]string, 0, len(byKind))
	for k := range byKind {
		kindNames = append(kindNames, k)
	}
	slices.Sort(kindNames)
	fmt.Fprintf(&b, "agent requests by the fault running when they started, a fault lasting until the system recovered\n"+
		"(decided: answered 200, 202 or 403; latency of the decided ones sent with Prefer: respond-async):\n")
	for _, k := range kindNames {
		ops := byKind[k]
		var took []time.Duration
		failed, unavailable, decided := 0, 0, 0
		for _, o := range ops {
			switch {
			case o.status == 0:
				failed++
			case o.status == 503:
				unavailable++
			case o.decided:
				decided++
				if o.async {
					took = append(took, o.took)
				}
			}
		}
		slices.Sort(took)
		pct := func(p float64) time.Duration {
			if len(took) == 0 {
				return 0
			}
			return took[min(len(took)-1, int(p*float64(len(took))))].Round(time.Millisecond)
		}
		fmt.Fprintf(&b, "  %-22s %5d requests: %5d decided (p50 %v, p99 %v), %4d answered 503, %4d with no answer\n",
			k, len(ops), decided, pct(0.5), pct(0.99), unavailable, failed)
	}
	return b.String()
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
