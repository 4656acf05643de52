package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/policy"
)

// Metrics are the proxy's Prometheus metrics. Labels never carry arguments,
// subjects or tool names: their values are bounded by the configuration.
type Metrics struct {
	decisions        *prometheus.CounterVec
	decisionDuration prometheus.Histogram
	upstream         *prometheus.HistogramVec
	refused          *prometheus.CounterVec
	parked           prometheus.Counter
	held             prometheus.Gauge
	notHeld          prometheus.Counter
	notForwarded     prometheus.Counter
	approvedExecuted prometheus.Counter
	sealBroken       prometheus.Counter
	dryRun           *prometheus.CounterVec
	notShared        *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: a
// private registry, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_decisions_total",
			Help: "Policy decisions by action (allow, ask, deny), kind (rest, mcp, http) and upstream.",
		}, []string{"action", "kind", "upstream"}),
		decisionDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolgate_decision_duration_seconds",
			Help:    "Time to evaluate the policy for one call.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolgate_upstream_request_duration_seconds",
			Help:    "Time from sending a call to the upstream to its response headers, by upstream and status code (\"error\" when none came).",
			Buckets: prometheus.DefBuckets,
		}, []string{"upstream", "code"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_requests_refused_total",
			Help: "Requests answered before any decision, by outcome (invalid, unauthenticated, unavailable).",
		}, []string{"outcome"}),
	}
	m.parked = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolgate_calls_parked_total",
		Help: "Calls parked for approval (retries that attached to a parked call are not counted).",
	})
	m.held = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolgate_calls_held",
		Help: "Agent requests held open on this replica, waiting for a decision.",
	})
	m.notHeld = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolgate_requests_not_held_total",
		Help: "Asks and status long-polls answered at once, and MCP GET streams refused, because their principal already had limits.max_held_per_subject requests held on this replica.",
	})
	m.notForwarded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolgate_calls_not_forwarded_total",
		Help: "Allowed calls refused (429) because their principal already had limits.max_forwards_per_subject calls being forwarded by this replica.",
	})
	m.approvedExecuted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolgate_approved_calls_executed_total",
		Help: "Approved calls sent to their upstream (each at most once; not those the policy in force now denies).",
	})
	m.sealBroken = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolgate_approved_calls_seal_broken_total",
		Help: "Approved calls refused, nothing sent, because their record did not match its seal: changed in the store, parked by a release before sealing, or sealed with a secret no longer listed.",
	})
	m.dryRun = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_dry_run_calls_total",
		Help: "Calls forwarded under dry run (enforce: false), by the action the policy decided (allow, ask, deny) and upstream.",
	}, []string{"action", "upstream"})
	m.notShared = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_listings_not_shared_total",
		Help: "MCP tools/list answers relayed whose tools could not all be written to the shared listings (the store failed, or is full of the upstream's tools), by upstream.",
	}, []string{"upstream"})
	reg.MustRegister(m.decisions, m.decisionDuration, m.upstream, m.refused, m.parked, m.held, m.notHeld, m.notForwarded, m.approvedExecuted, m.sealBroken, m.dryRun, m.notShared)
	// Every outcome is exported from the start, so a rate over it has a
	// zero to begin from rather than a series that appears mid-incident.
	for _, o := range []string{outcomeInvalid, outcomeUnauthenticated, outcomeUnavailable} {
		m.refused.WithLabelValues(o)
	}
	return m
}

func (m *Metrics) observeDecision(c *call, elapsed time.Duration) {
	if ctr := c.up.decided.counter(c.decision.Action, c.input.Kind); ctr != nil {
		ctr.Inc()
	} else {
		m.decisions.WithLabelValues(c.decision.Action.String(), c.input.Kind, c.up.Name).Inc()
	}
	m.decisionDuration.Observe(elapsed.Seconds())
}

// decisionSeries are one upstream's toolgate_decisions_total series,
// looked up once: WithLabelValues hashes its three labels and takes a
// lock at every call.
type decisionSeries [policy.Allow + 1][3]prometheus.Counter

var seriesKinds = [3]string{policy.KindREST, policy.KindMCP, policy.KindHTTP}

func newDecisionSeries(m *Metrics, upstream string) *decisionSeries {
	var d decisionSeries
	for a := range d {
		for k, kind := range seriesKinds {
			d[a][k] = m.decisions.WithLabelValues(policy.Action(a).String(), kind, upstream)
		}
	}
	return &d
}

// counter is the series of action and kind; nil for one not made ahead.
func (d *decisionSeries) counter(a policy.Action, kind string) prometheus.Counter {
	if d == nil || int(a) >= len(d) {
		return nil
	}
	for k, known := range seriesKinds {
		if kind == known {
			return d[a][k]
		}
	}
	return nil
}
