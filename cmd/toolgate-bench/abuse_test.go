package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/config"
)

// TestAbuseConfig: the -abuse configuration loads with toolgate's own
// loader, with the caps, the body deadline and the notify target as
// written, for both stores.
func TestAbuseConfig(t *testing.T) {
	p := abuseSizes(false)
	for i, store := range []string{"memory", "redis"} {
		p.parkRate = i * parkRatePerMinute // the main toolgate has none, the park-rate run's has one
		dir := t.TempDir()
		if err := writeRules(filepath.Join(dir, "rules.yaml"), table); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "toolgate.yaml")
		text := abuseConfig(p, store, "127.0.0.1:6379", "http://127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4", "http://127.0.0.1:5/events")
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(config.Source{File: file, Environ: []string{"BENCH_AGENT_KEY=" + secret(), "BENCH_CHURN_KEY=" + secret(), "BENCH_APPROVALS_SECRET=" + secret()}})
		if err != nil {
			t.Fatalf("%s: %v\n%s", store, err, text)
		}
		l := c.Limits
		if l.MaxParkedPerSubject != p.perSubject || l.MaxParked != p.maxParked || l.BodyTimeout.Std() != 2*time.Second || l.MaxParksPerMinute != p.parkRate {
			t.Errorf("%s: limits %+v", store, l)
		}
		if c.Pending.Store != store || len(c.Approvals.Notify) != 1 || c.Approvals.Notify[0].URL != "http://127.0.0.1:5/events" {
			t.Errorf("%s: pending %+v, notify %+v", store, c.Pending, c.Approvals.Notify)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 117
toolgate_notifications_total{format="cloudevents",result="delivered"} 100
toolgate_notifications_total{format="cloudevents",result="dropped"} 2
`))
	if err != nil {
		t.Fatal(err)
	}
	if m["go_goroutines"] != 117 || m[`toolgate_notifications_total{format="cloudevents",result="delivered"}`] != 100 {
		t.Errorf("%v", m)
	}
}

// TestNotifyLoss: events may be lost only when toolgate counted them.
func TestNotifyLoss(t *testing.T) {
	for _, c := range []struct {
		parked, received int
		n                notifyCounts
		ok               bool
	}{
		{100, 100, notifyCounts{delivered: 100}, true},
		{100, 97, notifyCounts{delivered: 97, dropped: 2, failed: 1}, true},
		{100, 97, notifyCounts{delivered: 97, dropped: 2}, false},
		{100, 99, notifyCounts{delivered: 100}, false},
	} {
		if _, ok := notifyLoss(c.parked, c.received, c.n); ok != c.ok {
			t.Errorf("%+v: ok %v, want %v", c, ok, c.ok)
		}
	}
}
