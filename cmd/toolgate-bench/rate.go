package main

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// rateResult is a fixed-rate run: exact percentiles over every answer.
type rateResult struct {
	sent, bad     int
	p50, p99, max time.Duration
}

// rateClient is the HTTP/1.1 keep-alive client of a target's fixed-rate
// runs, shared by them so that only the first (warm-up) run pays for
// opening connections. (A vegeta Attacker cannot be reused: an attack
// ends by stopping it for good.)
func rateClient() *http.Client {
	t := transport()
	t.ForceAttemptHTTP2 = false
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// runRate sends t's call at rate per second for d with vegeta, which keeps
// the schedule whatever the latency (no coordinated omission), and keeps
// every latency so the percentiles are exact.
func runRate(client *http.Client, t *target, agentKey string, rate int, d time.Duration) (*rateResult, error) {
	if t.unique {
		return nil, fmt.Errorf("%s: fixed-rate runs send one call repeatedly; ask calls need distinct bodies", t.name)
	}
	atk := vegeta.NewAttacker(vegeta.Client(client))
	tr := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodPost, URL: t.url, Body: []byte(t.body), Header: t.headers(agentKey)})
	var lat []time.Duration
	r := &rateResult{}
	for res := range atk.Attack(tr, vegeta.ConstantPacer{Freq: rate, Per: time.Second}, d, t.name) {
		r.sent++
		if int(res.Code) != t.expect || res.Error != "" {
			r.bad++
		}
		lat = append(lat, res.Latency)
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("%s: no answers", t.name)
	}
	slices.Sort(lat)
	r.p50, r.p99, r.max = percentile(lat, 50), percentile(lat, 99), lat[len(lat)-1]
	return r, nil
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
