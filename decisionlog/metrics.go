package decisionlog

import (
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// collector exports the counters OPA's decision-log plugin keeps
// (v1/plugins/logs/plugin.go) and toolgate's own as two families, read at
// scrape time: events dropped by reason, and uploads by result.
type collector struct {
	plugin          metrics.Metrics
	queueFull, errs atomic.Uint64
	dropped         *prometheus.Desc
	uploads         *prometheus.Desc
}

// droppedBy maps the reason label to the plugin's counters.
var droppedBy = map[string][]string{
	"rate_limit":  {"decision_logs_dropped_rate_limit_exceeded"},
	"buffer_full": {"decision_logs_dropped_buffer_size_limit_exceeded", "decision_logs_dropped_buffer_size_limit_bytes_exceeded"},
	"encoding":    {"decision_logs_encoding_failure"},
}

func newCollector(plugin metrics.Metrics) *collector {
	return &collector{
		plugin: plugin,
		dropped: prometheus.NewDesc("toolgate_decision_log_events_dropped_total",
			"Decision-log events lost, by reason: queue_full (toolgate's queue to the plugin), rate_limit, buffer_full (the upload buffer), encoding, error (could not be built or logged; see the log).",
			[]string{"reason"}, nil),
		uploads: prometheus.NewDesc("toolgate_decision_log_uploads_total",
			"Uploads of gzip event chunks to the decision-log service, by result (success, failure; failures are retried).",
			[]string{"result"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.dropped
	ch <- c.uploads
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, n uint64, label string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n), label)
	}
	counter(c.dropped, c.queueFull.Load(), "queue_full")
	counter(c.dropped, c.errs.Load(), "error")
	for reason, names := range droppedBy {
		counter(c.dropped, c.sum(names...), reason)
	}
	counter(c.uploads, c.sum("decision_logs_chunks_uploaded"), "success")
	counter(c.uploads, c.sum("decision_logs_chunks_upload_failed"), "failure")
}

func (c *collector) sum(names ...string) uint64 {
	var n uint64
	for _, name := range names {
		v, _ := c.plugin.Counter(name).Value().(uint64)
		n += v
	}
	return n
}
