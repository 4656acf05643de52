package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The -abuse run's setup: toolgate's configuration, the processes it
// talks to, and the one call the scenarios send as the agent.

// abuseStack is what the run talks to.
type abuseStack struct {
	tg       *proc
	proxy    string // http://host:port of toolgate's proxy listener
	admin    string
	agentKey string
	churnKey string // the ask churn's principal, apart from the flood's full cap
	recv     *receiver
}

// abuseConfig is toolgate's configuration for the run: the rules table
// (read_file docs/** allowed, write_note notes/** asked), two API keys,
// the parked-call caps, the body deadline and one CloudEvents target.
func abuseConfig(p abuseParams, store, redisAddr, upstream, proxyAddr, approvalsAddr, adminAddr, notifyURL string) string {
	pending := "{store: memory, hold: 1s, ttl: 10m, result_ttl: 1m}"
	if store == "redis" {
		pending = fmt.Sprintf("{store: redis, redis_url: \"redis://%s/0\", redis_prefix: \"toolgate-bench-abuse-%s:\", hold: 1s, ttl: 10m, result_ttl: 1m}", redisAddr, secret()[:8])
	}
	return fmt.Sprintf(`listen: {proxy: %q, approvals: %q, admin: %q}
upstreams:
  - {name: tools, url: %q, protocol: rest, prefix: /}
identity:
  api_keys:
    - {key: "${BENCH_AGENT_KEY}", subject: agent-abuse, groups: [agents]}
    - {key: "${BENCH_CHURN_KEY}", subject: agent-churn, groups: [agents]}
policy: {rules_file: ./rules.yaml, watch: false}
pending: %s
approvals:
  secret: "${BENCH_APPROVALS_SECRET}"
  notify: [{url: %q, format: cloudevents}]
limits: {body_timeout: %s, max_parked_per_subject: %d, max_parked: %d, max_parks_per_minute: %d}
log: {level: info}
`, proxyAddr, approvalsAddr, adminAddr, upstream, pending, notifyURL, p.bodyTimeout, p.perSubject, p.maxParked, p.parkRate)
}

// startAbuseStack starts the recording upstream, the notification
// receiver and toolgate on free ports, and proves with one allowed call
// that the stack answers before any attack is measured against it.
func startAbuseStack(ctx context.Context, o *options, pins pinning, p abuseParams, store, name string) (*abuseStack, error) {
	addrs, err := namedPorts("upstream", "proxy", "approvals", "admin")
	if err != nil {
		return nil, err
	}
	up, err := startProc(o.dir, name+"-upstream", pins.servers, self("upstream", "-listen", addrs["upstream"]), nil)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, up, "http://"+addrs["upstream"]+"/_bench/count", 10*time.Second); err != nil {
		return nil, err
	}
	recv, err := startReceiver()
	if err != nil {
		return nil, err
	}
	s := &abuseStack{proxy: "http://" + addrs["proxy"], admin: "http://" + addrs["admin"], agentKey: secret(), churnKey: secret(), recv: recv}
	if err := writeRules(filepath.Join(o.dir, "rules.yaml"), o.rules); err != nil {
		return nil, err
	}
	cfg := filepath.Join(o.dir, name+".yaml")
	text := abuseConfig(p, store, o.redis, "http://"+addrs["upstream"], addrs["proxy"], addrs["approvals"], addrs["admin"], recv.url)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		return nil, err
	}
	env := []string{"BENCH_AGENT_KEY=" + s.agentKey, "BENCH_CHURN_KEY=" + s.churnKey, "BENCH_APPROVALS_SECRET=" + secret()}
	if s.tg, err = startProc(o.dir, name, pins.servers, []string{o.toolgate, "serve", "--config", cfg}, env); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, s.tg, s.admin+"/readyz", 30*time.Second); err != nil {
		return nil, err
	}
	// One call of each kind must answer as the run expects.
	c := abuseClient(1)
	if code, err := s.post(c, "/tools/read_file", readBody, false); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("check allow: status %d, %v", code, err)
	}
	return s, nil
}

// receiver is the notification target: it counts the distinct parked
// calls announced to it.
type receiver struct {
	url   string
	srv   *http.Server
	mu    sync.Mutex
	calls map[string]bool
	posts atomic.Int64
}

// startReceiver listens on a free port and records the requested
// events posted to it, so the flood can compare what arrived with what
// toolgate says it delivered.
func startReceiver() (*receiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + l.Addr().String() + "/events", calls: map[string]bool{}}
	r.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.posts.Add(1)
		var ev struct{ Type, ID string }
		if err := json.NewDecoder(req.Body).Decode(&ev); err != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		if ev.Type == "dev.toolgate.approval.requested" {
			r.mu.Lock()
			r.calls[ev.ID] = true
			r.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

// requested is how many distinct parked calls were announced so far.
func (r *receiver) requested() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// close stops the receiver once the run is over.
func (r *receiver) close() { _ = r.srv.Close() }

// abuseClient is a keep-alive HTTP/1.1 client for conns concurrent callers.
func abuseClient(conns int) *http.Client {
	t := transport()
	t.ForceAttemptHTTP2 = false
	t.MaxIdleConnsPerHost = max(conns, 2)
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// post sends one tool call as the agent and returns the status.
func (s *abuseStack) post(c *http.Client, path, body string, async bool) (int, error) {
	code, _, err := s.send(c, s.agentKey, http.MethodPost, path, body, async, false)
	return code, err
}

// send sends one request with key as its bearer credential (a body as
// JSON; async: Prefer: respond-async) and returns the status and, when
// keep, the answer's body (up to 1 MiB; otherwise it is discarded).
func (s *abuseStack) send(c *http.Client, key, method, path, body string, async, keep bool) (int, []byte, error) {
	req, err := http.NewRequest(method, s.proxy+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if async {
		req.Header.Set("Prefer", "respond-async")
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	if !keep {
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, b, err
}
