package slackapp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/notify"
)

func TestForgedSignatureRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	good := form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil))
	now := time.Now().Unix()
	for name, req := range map[string]request{
		"wrong secret":       {body: good, ts: now, sig: sign("not-the-secret", now, good)},
		"body changed":       {body: []byte(strings.Replace(string(good), "U0ALICE", "U0BOB", 1)), ts: now, sig: sign(secret, now, good)},
		"timestamp changed":  {body: good, ts: now - 1, sig: sign(secret, now, good)},
		"no v0 prefix":       {body: good, ts: now, sig: strings.TrimPrefix(sign(secret, now, good), "v0=")},
		"short signature":    {body: good, ts: now, sig: sign(secret, now, good)[:40]},
		"signature not hex":  {body: good, ts: now, sig: "v0=" + strings.Repeat("zz", 32)},
		"signature is blank": {body: good, ts: now, sig: " "},
	} {
		t.Run(name, func(t *testing.T) {
			if status, _ := e.send(t, req); status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", status)
			}
		})
	}
	e.close(t)
	if d := e.decisions(); len(d) != 0 {
		t.Errorf("Decider called for forged requests: %v", d)
	}
	if p := e.slack.Requests(); len(p) != 0 {
		t.Errorf("%d response_url posts for forged requests", len(p))
	}
}

func TestMissingHeadersRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, drop := range []string{"X-Slack-Request-Timestamp", "X-Slack-Signature"} {
		r, _ := http.NewRequest(http.MethodPost, e.srv.URL+Path, strings.NewReader("payload=%7B%7D"))
		r.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(time.Now().Unix(), 10))
		r.Header.Set("X-Slack-Signature", sign(secret, time.Now().Unix(), []byte("payload=%7B%7D")))
		r.Header.Del(drop)
		res, err := e.srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("without %s: status %d, want 401", drop, res.StatusCode)
		}
	}
}

func TestStaleTimestampRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	body := form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil))
	now := time.Now()
	for name, ts := range map[string]time.Time{
		"six minutes old":      now.Add(-6 * time.Minute),
		"six minutes ahead":    now.Add(6 * time.Minute),
		"a day old":            now.Add(-24 * time.Hour),
		"the epoch":            time.Unix(0, 0),
		"far in the future":    now.Add(1000 * time.Hour),
		"just outside, behind": now.Add(-Window - time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			if status, _ := e.send(t, request{body: body, ts: ts.Unix()}); status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", status)
			}
		})
	}
	e.close(t)
	if d := e.decisions(); len(d) != 0 {
		t.Errorf("Decider called for stale requests: %v", d)
	}
}

// TestStaleByOwnClock: the window is measured on the configured clock,
// not only on the machine's (which slack-go uses): a request signed now
// is stale for a handler whose clock is six minutes on.
func TestStaleByOwnClock(t *testing.T) {
	e := newEnv(t, nil, nil)
	body := form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil))

	e.clock.Advance(4 * time.Minute)
	if status, _ := e.send(t, signed(body)); status != http.StatusOK {
		t.Fatalf("four minutes on: status %d, want 200", status)
	}
	e.clock.Advance(2 * time.Minute)
	if status, _ := e.send(t, signed(append(body, '&', 'x', '=', '1'))); status != http.StatusUnauthorized {
		t.Errorf("six minutes on: status %d, want 401", status)
	}
	if d := e.decisions(); len(d) != 1 {
		t.Errorf("%d decisions, want 1 (the request inside the window)", len(d))
	}
}

func TestReplayRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	req := signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil)))
	req.sig = sign(secret, req.ts, req.body)
	if status, _ := e.send(t, req); status != http.StatusOK {
		t.Fatalf("first delivery: status %d, want 200", status)
	}
	if status, _ := e.send(t, req); status != http.StatusUnauthorized {
		t.Errorf("second delivery: status %d, want 401", status)
	}
	// The same signature in capitals verifies too; it is the same request.
	req.sig = "v0=" + strings.ToUpper(strings.TrimPrefix(req.sig, "v0="))
	if status, _ := e.send(t, req); status != http.StatusUnauthorized {
		t.Errorf("delivery with the signature in capitals: status %d, want 401", status)
	}
	e.close(t)
	if d := e.decisions(); len(d) != 1 {
		t.Errorf("%d decisions, want 1", len(d))
	}
	if p := e.slack.Requests(); len(p) != 1 {
		t.Errorf("%d response_url posts, want 1", len(p))
	}
}

// TestReplaySetFull: when the set of seen signatures is full of live ones,
// new requests are refused, not remembered in more memory.
func TestReplaySetFull(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.h.seen = newSeenSet(2)
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusServiceUnavailable} {
		body := form(click("U0ALICE", notify.SlackOpenActionID, strconv.Itoa(i), e.slack.URL+"/r", nil))
		if status, _ := e.send(t, signed(body)); status != want {
			t.Errorf("request %d: status %d, want %d", i, status, want)
		}
	}
}

func TestSeenSetForgetsStale(t *testing.T) {
	s := newSeenSet(2)
	t0 := time.Unix(1_700_000_000, 0)
	if err := s.add("a", t0.Add(Window), t0); err != nil {
		t.Fatal(err)
	}
	if err := s.add("a", t0.Add(Window), t0.Add(time.Minute)); !errors.Is(err, errReplay) {
		t.Errorf("a again: %v, want errReplay", err)
	}
	if err := s.add("b", t0.Add(time.Minute+Window), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.add("c", t0.Add(2*time.Minute+Window), t0.Add(2*time.Minute)); !errors.Is(err, errFull) {
		t.Errorf("c while full: %v, want errFull", err)
	}
	// Once a's window has passed, its place is free.
	later := t0.Add(Window + 30*time.Second)
	if err := s.add("c", later.Add(Window), later); err != nil {
		t.Errorf("c after a expired: %v", err)
	}
	if len(s.expiry) != 2 {
		t.Errorf("%d entries, want 2", len(s.expiry))
	}
}

func TestBodyTooLargeRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	p := click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil)
	p["padding"] = strings.Repeat("x", MaxBodyBytes)
	body := form(p)
	if status, _ := e.send(t, signed(body)); status != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", status)
	}

	// Without a Content-Length the reader's bound refuses it too.
	req := signed(body)
	r, _ := http.NewRequest(http.MethodPost, e.srv.URL+Path, struct{ *strings.Reader }{strings.NewReader(string(body))})
	r.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(req.ts, 10))
	r.Header.Set("X-Slack-Signature", sign(secret, req.ts, body))
	res, err := e.srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: status %d, want 413", res.StatusCode)
	}
	e.close(t)
	if d := e.decisions(); len(d) != 0 {
		t.Errorf("Decider called: %v", d)
	}
}

// TestDeclaredTooLargeRefusedUnread: a body declared too large is refused
// before a byte of it is waited for.
func TestDeclaredTooLargeRefusedUnread(t *testing.T) {
	e := newEnv(t, nil, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ts := time.Now().Unix()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"+
		"X-Slack-Request-Timestamp: %d\r\nX-Slack-Signature: %s\r\n\r\npayload=",
		Path, MaxBodyBytes+1, ts, sign(secret, ts, nil))
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body is still coming: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", res.StatusCode)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, nil, nil)
	res, err := e.srv.Client().Get(e.srv.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d, Allow %q; want 405 and POST", res.StatusCode, res.Header.Get("Allow"))
	}
}

// TestSharedReplayRecord: with FirstUse set, a signature another replica
// recorded is a replay here (401), and a record that cannot be checked
// refuses the click (503); neither decides anything.
func TestSharedReplayRecord(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first bool
		err   error
		want  int
	}{
		{"seen by another replica", false, nil, http.StatusUnauthorized},
		{"store down", false, errors.New("down"), http.StatusServiceUnavailable},
		{"new", true, nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var keys []string
			e := newEnv(t, nil, func(c *Config) {
				c.FirstUse = func(_ context.Context, key string, ttl time.Duration) (bool, error) {
					keys = append(keys, key)
					return tc.first, tc.err
				}
			})
			req := signed(form(click("U0ALICE", notify.SlackApproveActionID, "c1", e.slack.URL+"/r", nil)))
			if status, _ := e.send(t, req); status != tc.want {
				t.Fatalf("status %d, want %d", status, tc.want)
			}
			e.close(t)
			if n := len(e.decisions()); (n == 1) != (tc.want == http.StatusOK) {
				t.Errorf("%d decisions with status %d", n, tc.want)
			}
			if len(keys) != 1 || !strings.HasPrefix(keys[0], "slack:v0=") {
				t.Errorf("FirstUse keys %q", keys)
			}
		})
	}
}
