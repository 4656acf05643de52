package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// The park-rate run: the ask churn again (park, cancel, as fast as one
// connection goes), against a toolgate of its own with
// limits.max_parks_per_minute. The caps never fill, since every call is
// cancelled; without the rate each park is announced to the approvers.
// With it, the parks let in, and so the calls announced, are the burst
// plus one per interval, whatever the agent sends.

// parkRatePerMinute is the run's limits.max_parks_per_minute: a burst of
// 60, then one a second.
const parkRatePerMinute = 60

// parkRateRun starts the second toolgate, churns against it for
// p.rateFor, and checks what got through.
func parkRateRun(ctx context.Context, o *options, pins pinning, p abuseParams, store string, check checkFunc) error {
	p.parkRate = parkRatePerMinute
	s, err := startAbuseStack(ctx, o, pins, p, store, "toolgate-abuse-rate")
	if err != nil {
		return err
	}
	defer s.recv.close()
	return s.rateChurn(ctx, p, check)
}

func (s *abuseStack) rateChurn(ctx context.Context, p abuseParams, check checkFunc) error {
	const sc = "park rate"
	c := abuseClient(1)
	nonce := secret()[:12]
	var parked, refused int
	odd := ""
	start := time.Now()
	for i := 0; time.Since(start) < p.rateFor && ctx.Err() == nil && odd == ""; i++ {
		body := fmt.Sprintf(`{"path":"notes/r-%s-%010d.txt"}`, nonce, i)
		code, ans, err := s.churnDo(c, http.MethodPost, "/tools/write_note", body)
		switch {
		case err != nil:
			odd = err.Error()
		case code == http.StatusTooManyRequests && strings.Contains(string(ans), "too often"):
			refused++
		case code == http.StatusAccepted:
			parked++
			var a struct {
				CallID string `json:"call_id"`
			}
			if err := json.Unmarshal(ans, &a); err != nil || a.CallID == "" {
				odd = fmt.Sprintf("park %d: %v", i, err)
				break
			}
			if code, _, err := s.churnDo(c, http.MethodDelete, "/_toolgate/calls/"+a.CallID, ""); err != nil || code != http.StatusOK {
				odd = fmt.Sprintf("cancel %d: status %d, %v", i, code, err)
			}
		default:
			odd = fmt.Sprintf("park %d: status %d", i, code)
		}
	}
	took := time.Since(start)
	// The burst, and one more per interval that passed (the first one
	// after a whole interval), give or take the one under way at the end.
	lo := parkRatePerMinute + int(took/(time.Minute/parkRatePerMinute)) - 1
	hi := parkRatePerMinute + int(math.Ceil(float64(took)/float64(time.Minute/parkRatePerMinute))) + 1
	answers := fmt.Sprintf("%d parked, %d refused with 429 in %.1f s", parked, refused, took.Seconds())
	if odd != "" {
		answers += " (first odd: " + odd + ")"
	}
	check(sc, fmt.Sprintf("park and cancel as fast as one connection goes, max_parks_per_minute %d", parkRatePerMinute), answers,
		odd == "" && refused > 0 && parked >= lo && parked <= hi,
		fmt.Sprintf("want %d to %d parked (the burst, then one a second) and the rest 429", lo, hi))
	// Every parked call is announced, and nothing else: the rate bounds
	// what reaches the approvers. A call cancelled before its announcement's
	// turn came is not announced at all (notify's unsent.go): both its
	// events count as skipped.
	var n notifyCounts
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if n, err = s.notifications(); err != nil {
			return err
		}
		if s.recv.requested()+n.skipped/2 >= parked || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := s.recv.requested()
	check(sc, "calls announced to the approvers", fmt.Sprintf("%d, and %d cancelled before their turn (%.1f a second over the run)", got, n.skipped/2, float64(got)/took.Seconds()),
		got+n.skipped/2 == parked && n.skipped%2 == 0, "want every parked call announced, or skipped as cancelled before its turn")
	return nil
}
