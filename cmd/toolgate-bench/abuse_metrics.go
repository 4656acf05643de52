package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The -abuse run's reading of toolgate's /metrics.

// notifyCounts are toolgate_notifications_total by result, over formats.
type notifyCounts struct{ delivered, retry, failed, dropped, skipped int }

// notifyLoss is how many announced calls the receiver did not get, and
// whether every one of them is counted as dropped or failed: none lost,
// or exactly the counted ones.
func notifyLoss(parked, received int, n notifyCounts) (int, bool) {
	lost := parked - received
	return lost, lost == 0 || lost == n.dropped+n.failed
}

// notifications reads toolgate_notifications_total from the admin
// listener: toolgate's own account of what became of each announcement,
// to hold against what the receiver got.
func (s *abuseStack) notifications() (notifyCounts, error) {
	m, err := scrape(s.admin + "/metrics")
	if err != nil {
		return notifyCounts{}, err
	}
	var n notifyCounts
	for k, v := range m {
		if !strings.HasPrefix(k, "toolgate_notifications_total{") {
			continue
		}
		switch {
		case strings.Contains(k, `result="delivered"`):
			n.delivered += int(v)
		case strings.Contains(k, `result="retry"`):
			n.retry += int(v)
		case strings.Contains(k, `result="failed"`):
			n.failed += int(v)
		case strings.Contains(k, `result="dropped"`):
			n.dropped += int(v)
		case strings.Contains(k, `result="skipped"`):
			n.skipped += int(v)
		}
	}
	return n, nil
}

// scrape reads a Prometheus text exposition into series → value.
func scrape(url string) (map[string]float64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d", url, res.StatusCode)
	}
	return parseMetrics(res.Body)
}

// parseMetrics keeps every sample line as series → value and skips
// comments and lines it cannot read, so an unexpected line does not end
// the run.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// goroutines is toolgate's go_goroutines: the stall checks that the
// goroutines serving stalled connections are gone once they are closed.
func (s *abuseStack) goroutines() (int, error) {
	m, err := scrape(s.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	v, ok := m["go_goroutines"]
	if !ok {
		return 0, errors.New("/metrics: no go_goroutines")
	}
	return int(v), nil
}
