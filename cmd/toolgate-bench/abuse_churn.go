package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The ask churn: one principal parks a call and cancels it, over and over,
// each with a large body. No human is involved and the per-subject cap
// never fills; what bounds the calls toolgate (or Redis) keeps is that a
// principal's ended calls are kept no further than its cap: the oldest
// are forgotten, the newest still answer their status.

// churn runs p.churns park-and-cancel cycles as the churn principal, then
// reads every call's status.
func (s *abuseStack) churn(ctx context.Context, p abuseParams, check checkFunc) error {
	const sc = "ask churn"
	c := abuseClient(1)
	rss0, err := rssKiB(s.tg.pid())
	if err != nil {
		return err
	}
	rss := startPeakSampler(ctx, rss0, 50*time.Millisecond, func() (int64, error) { return rssKiB(s.tg.pid()) })
	nonce, pad := secret()[:12], strings.Repeat("x", p.churnBody)
	var ids []string
	odd := ""
	start := time.Now()
	for i := 0; i < p.churns && ctx.Err() == nil; i++ {
		body := fmt.Sprintf(`{"path":"notes/c-%s-%010d.txt","pad":%q}`, nonce, i, pad)
		code, ans, err := s.churnDo(c, http.MethodPost, "/tools/write_note", body)
		var a struct {
			CallID string `json:"call_id"`
		}
		if err == nil && code == http.StatusAccepted {
			err = json.Unmarshal(ans, &a)
		}
		if err != nil || code != http.StatusAccepted || a.CallID == "" {
			odd = fmt.Sprintf("park %d: status %d, %v", i, code, err)
			break
		}
		if code, _, err = s.churnDo(c, http.MethodDelete, "/_toolgate/calls/"+a.CallID, ""); err != nil || code != http.StatusOK {
			odd = fmt.Sprintf("cancel %d: status %d, %v", i, code, err)
			break
		}
		ids = append(ids, a.CallID)
	}
	took := time.Since(start)
	rss.stop()
	final, err := rssKiB(s.tg.pid())
	if err != nil {
		return err
	}
	// The calls kept must be the newest: none forgotten after one kept.
	kept, ordered := 0, true
	for _, id := range ids {
		code, _, err := s.churnDo(c, http.MethodGet, "/_toolgate/calls/"+id, "")
		switch {
		case err != nil:
			odd = err.Error()
		case code == http.StatusOK:
			kept++
		case code == http.StatusNotFound:
			ordered = ordered && kept == 0
		default:
			odd = fmt.Sprintf("status read: %d", code)
		}
	}
	cycles := fmt.Sprintf("%d park-and-cancel cycles, one API key, %d KiB bodies", p.churns, p.churnBody>>10)
	answers := fmt.Sprintf("%d × 202 then 200 in %.1f s", len(ids), took.Seconds())
	if odd != "" {
		answers += " (first odd: " + odd + ")"
	}
	check(sc, cycles, answers, len(ids) == p.churns && odd == "", "want every park 202 and every cancel 200")
	want := min(p.churns, p.perSubject)
	check(sc, "ended calls still kept (status 200, not 404)", fmt.Sprintf("%d of %d, the newest", kept, len(ids)),
		kept >= want && kept <= 2*p.perSubject+1 && ordered,
		fmt.Sprintf("want the newest %d to %d kept (the cap, up to twice it in Redis) and the rest forgotten", want, 2*p.perSubject+1))
	check(sc, "toolgate RSS before / peak / final", fmt.Sprintf("%.1f / %.1f / %.1f MiB", mib(rss0), mib(rss.peak.Load()), mib(final)), true, "")
	return nil
}

// churnDo sends one request as the churn principal and returns the status
// and the answer's body.
func (s *abuseStack) churnDo(c *http.Client, method, path, body string) (int, []byte, error) {
	return s.send(c, s.churnKey, method, path, body, body != "", true)
}
