package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

// The -abuse run: one toolgate serve process, a recording upstream and a
// counting notification receiver, and two attacks a caller can mount
// without breaking any rule of the protocol — an ask flood from one
// principal and connections that stall their request bodies. It prints
// what toolgate did and fails when a guarantee is broken.

// abuseParams sizes the run; -quick makes it a smoke run.
type abuseParams struct {
	asks, workers         int // the flood: asks sent by that many workers
	perSubject, maxParked int // limits.max_parked_per_subject, limits.max_parked
	stalls                int // stalled connections
	bodyTimeout           time.Duration
	loopWorkers           int           // the allow loop's concurrency
	alone                 time.Duration // the allow loop alone, before each attack
}

func abuseSizes(quick bool) abuseParams {
	p := abuseParams{
		asks: 10000, workers: 64, perSubject: 100, maxParked: 10000,
		stalls: 1000, bodyTimeout: 2 * time.Second, loopWorkers: 8, alone: 3 * time.Second,
	}
	if quick {
		p.asks, p.stalls, p.alone = 1000, 100, time.Second
	}
	return p
}

// abuseStack is what the run talks to.
type abuseStack struct {
	tg       *proc
	proxy    string // http://host:port of toolgate's proxy listener
	admin    string
	agentKey string
	recv     *receiver
}

func abuseRun(ctx context.Context, o *options, pins pinning, stdout, stderr io.Writer) error {
	p := abuseSizes(o.quick)
	store := "memory"
	if o.redisSet && o.redis != "" {
		if redisAnswers(o.redis) {
			store = "redis"
		} else {
			fmt.Fprintf(stderr, "warning: no Redis answers at %s: parked calls stay in memory\n", o.redis)
		}
	}
	p.stalls = fitDescriptors(p.stalls, stderr)
	s, err := startAbuseStack(ctx, o, pins, p, store)
	if err != nil {
		return err
	}
	defer s.recv.close()
	fmt.Fprintf(stdout, "toolgate-bench -abuse: %s; toolgate on cpu %s, load on cpu %s; parked calls in %s\n\n",
		machine(), orAll(pins.servers), orAll(pins.load), store)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tmeasure\tvalue\tcheck")
	var failed []string
	check := func(scenario, measure, value string, ok bool, why string) {
		mark := ""
		if why != "" {
			mark = "ok"
			if !ok {
				mark = "FAIL"
				failed = append(failed, scenario+": "+why)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", scenario, measure, value, mark)
	}
	if err := s.flood(ctx, p, check); err != nil {
		return err
	}
	if err := s.stall(ctx, p, check); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("-abuse: %s", strings.Join(failed, "; "))
	}
	return nil
}

// fitDescriptors raises this process's soft descriptor limit to what n
// stalled connections and the rest of the run need, or lowers n to what
// fits (with a warning). toolgate, a Go program, raises its own.
func fitDescriptors(n int, stderr io.Writer) int {
	const spare = 256
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return n
	}
	if need := uint64(n + spare); rl.Cur < need {
		rl.Cur = min(need, rl.Max)
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	if fit := int(rl.Cur) - spare; fit < n {
		fit = max(fit, 1)
		fmt.Fprintf(stderr, "warning: descriptor limit %d: %d stalled connections instead of %d\n", rl.Cur, fit, n)
		return fit
	}
	return n
}

// abuseConfig is toolgate's configuration for the run: the rules table
// (read_file docs/** allowed, write_note notes/** asked), one API key,
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
  api_keys: [{key: "${BENCH_AGENT_KEY}", subject: agent-abuse, groups: [agents]}]
policy: {rules_file: ./rules.yaml, watch: false}
pending: %s
approvals:
  secret: "${BENCH_APPROVALS_SECRET}"
  notify: [{url: %q, format: cloudevents}]
limits: {body_timeout: %s, max_parked_per_subject: %d, max_parked: %d}
log: {level: info}
`, proxyAddr, approvalsAddr, adminAddr, upstream, pending, notifyURL, p.bodyTimeout, p.perSubject, p.maxParked)
}

func startAbuseStack(ctx context.Context, o *options, pins pinning, p abuseParams, store string) (*abuseStack, error) {
	addrs := map[string]string{}
	for _, n := range []string{"upstream", "proxy", "approvals", "admin"} {
		a, err := freePort()
		if err != nil {
			return nil, err
		}
		addrs[n] = a
	}
	up, err := startProc(o.dir, "upstream", pins.servers, self("upstream", "-listen", addrs["upstream"]), nil)
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
	s := &abuseStack{proxy: "http://" + addrs["proxy"], admin: "http://" + addrs["admin"], agentKey: secret(), recv: recv}
	if err := writeRules(filepath.Join(o.dir, "rules.yaml")); err != nil {
		return nil, err
	}
	cfg := filepath.Join(o.dir, "toolgate-abuse.yaml")
	text := abuseConfig(p, store, o.redis, "http://"+addrs["upstream"], addrs["proxy"], addrs["approvals"], addrs["admin"], recv.url)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		return nil, err
	}
	env := []string{"BENCH_AGENT_KEY=" + s.agentKey, "BENCH_APPROVALS_SECRET=" + secret()}
	if s.tg, err = startProc(o.dir, "toolgate-abuse", pins.servers, []string{o.toolgate, "serve", "--config", cfg}, env); err != nil {
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

func (r *receiver) requested() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

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
	req, err := http.NewRequest(http.MethodPost, s.proxy+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.agentKey)
	if async {
		req.Header.Set("Prefer", "respond-async")
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// loopResult is the allow loop's throughput and latency.
type loopResult struct {
	calls, bad int
	rps        float64
	p50, p99   time.Duration
}

func (r *loopResult) String() string {
	s := fmt.Sprintf("%.0f req/s, p50 %s, p99 %s (%d calls", r.rps, ms(r.p50), ms(r.p99), r.calls)
	if r.bad > 0 {
		s += fmt.Sprintf(", %d not 200", r.bad)
	}
	return s + ")"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1e3) }

// allowLoop sends the allowed call from workers closed loops until ctx
// ends (a call under way is finished, not cut).
func (s *abuseStack) allowLoop(ctx context.Context, c *http.Client, workers int) *loopResult {
	var mu sync.Mutex
	var lat []time.Duration
	bad := 0
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			var mine []time.Duration
			myBad := 0
			for ctx.Err() == nil {
				t0 := time.Now()
				code, err := s.post(c, "/tools/read_file", readBody, false)
				mine = append(mine, time.Since(t0))
				if err != nil || code != http.StatusOK {
					myBad++
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			bad += myBad
			mu.Unlock()
		})
	}
	wg.Wait()
	r := &loopResult{calls: len(lat), bad: bad, rps: float64(len(lat)) / time.Since(start).Seconds()}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50, r.p99 = percentile(lat, 50), percentile(lat, 99)
	}
	return r
}

// aloneLoop is the allow loop by itself for d.
func (s *abuseStack) aloneLoop(ctx context.Context, c *http.Client, workers int, d time.Duration) *loopResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return s.allowLoop(ctx, c, workers)
}

// during is the allow loop during an attack, in a line with the ratio to
// the loop alone.
func during(r, alone *loopResult) string {
	ratio := 0.0
	if alone.rps > 0 {
		ratio = r.rps / alone.rps
	}
	return fmt.Sprintf("%s = %.2f× alone", r, ratio)
}

type checkFunc func(scenario, measure, value string, ok bool, why string)

// flood sends p.asks distinct asks from one principal with Prefer:
// respond-async, while the allow loop runs beside them.
func (s *abuseStack) flood(ctx context.Context, p abuseParams, check checkFunc) error {
	const sc = "ask flood"
	loopClient := abuseClient(p.loopWorkers)
	alone := s.aloneLoop(ctx, loopClient, p.loopWorkers, p.alone)
	rss0, err := rssKiB(s.tg.pid())
	if err != nil {
		return err
	}
	peak := atomic.Int64{}
	peak.Store(rss0)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			if kib, err := rssKiB(s.tg.pid()); err == nil && kib > peak.Load() {
				peak.Store(kib)
			}
			select {
			case <-sampleCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone := make(chan *loopResult, 1)
	go func() { loopDone <- s.allowLoop(loopCtx, loopClient, p.loopWorkers) }()

	nonce := secret()[:12]
	c := abuseClient(p.workers)
	var next, accepted, refused, other, failures atomic.Int64
	var firstOdd atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range p.workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(p.asks) {
					return
				}
				code, err := s.post(c, "/tools/write_note", fmt.Sprintf(askTemplate, nonce, i), true)
				switch {
				case err != nil:
					failures.Add(1)
					firstOdd.CompareAndSwap(nil, err.Error())
				case code == http.StatusAccepted:
					accepted.Add(1)
				case code == http.StatusTooManyRequests:
					refused.Add(1)
				default:
					other.Add(1)
					firstOdd.CompareAndSwap(nil, "status "+strconv.Itoa(code))
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	stopLoop()
	busy := <-loopDone
	if err := ctx.Err(); err != nil {
		stopSampling()
		return err
	}

	// Every parked call is announced once; wait until each announcement
	// is accounted for (delivered, failed or dropped) or 20 s pass.
	var n notifyCounts
	for deadline := time.Now().Add(20 * time.Second); ; {
		if n, err = s.notifications(); err != nil {
			stopSampling()
			return err
		}
		if n.delivered+n.failed+n.dropped >= int(accepted.Load()) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	stopSampling()
	<-sampled
	final, err := rssKiB(s.tg.pid())
	if err != nil {
		return err
	}
	if n, err = s.notifications(); err != nil {
		return err
	}
	got := s.recv.requested()

	a, r := int(accepted.Load()), int(refused.Load())
	answers := fmt.Sprintf("%d × 202, %d × 429, %d other, %d errors", a, r, other.Load(), failures.Load())
	if v, ok := firstOdd.Load().(string); ok {
		answers += " (first odd: " + v + ")"
	}
	check(sc, fmt.Sprintf("%d asks, %d workers, one API key, cap %d", p.asks, p.workers, p.perSubject), answers,
		a == min(p.perSubject, p.asks) && a+r == p.asks, fmt.Sprintf("want exactly %d × 202 and the rest 429", min(p.perSubject, p.asks)))
	check(sc, "flood duration", fmt.Sprintf("%.2f s (%.0f asks/s)", took.Seconds(), float64(p.asks)/took.Seconds()), true, "")
	check(sc, "toolgate RSS before / peak / final", fmt.Sprintf("%.1f / %.1f / %.1f MiB", mib(rss0), mib(peak.Load()), mib(final)), true, "")
	check(sc, "toolgate_notifications_total", fmt.Sprintf("delivered %d, dropped %d, failed %d, retry %d", n.delivered, n.dropped, n.failed, n.retry), true, "")
	lost, ok := notifyLoss(a, got, n)
	check(sc, "receiver: parked calls announced", fmt.Sprintf("%d of %d (lost %d, counted as dropped/failed %d)", got, a, lost, n.dropped+n.failed),
		ok, "events lost without being counted")
	check(sc, "allow loop alone", alone.String(), alone.bad == 0 && alone.calls > 0, "allowed calls not answered 200")
	check(sc, "allow loop during flood", during(busy, alone), busy.bad == 0 && busy.calls > 0, "allowed calls not answered 200 during the flood")
	return nil
}

// notifyCounts are toolgate_notifications_total by result, over formats.
type notifyCounts struct{ delivered, retry, failed, dropped int }

// notifyLoss is how many announced calls the receiver did not get, and
// whether every one of them is counted as dropped or failed: none lost,
// or exactly the counted ones.
func notifyLoss(parked, received int, n notifyCounts) (int, bool) {
	lost := parked - received
	return lost, lost == 0 || lost == n.dropped+n.failed
}

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

// stalled is one connection that sent its headers and one byte of body.
type stalled struct {
	conn           net.Conn
	sent, closedAt time.Time
	status         string // the status the server answered, if any
}

// stall opens p.stalls connections that each promise a 1000-byte body,
// send one byte and stop; toolgate must close every one within
// body_timeout (+1 s), and its goroutines must come back down.
func (s *abuseStack) stall(ctx context.Context, p abuseParams, check checkFunc) error {
	const sc = "stalled bodies"
	loopClient := abuseClient(p.loopWorkers)
	alone := s.aloneLoop(ctx, loopClient, p.loopWorkers, p.alone)
	before, err := s.goroutines()
	if err != nil {
		return err
	}
	host := strings.TrimPrefix(s.proxy, "http://")
	head := "POST /tools/read_file HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + s.agentKey +
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"

	peak := atomic.Int64{}
	peak.Store(int64(before))
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			if g, err := s.goroutines(); err == nil && int64(g) > peak.Load() {
				peak.Store(int64(g))
			}
			select {
			case <-sampleCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	conns := make([]*stalled, 0, p.stalls)
	dialErrs := 0
	var readers sync.WaitGroup
	for range p.stalls {
		c, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			dialErrs++
			continue
		}
		if _, err := io.WriteString(c, head); err != nil {
			c.Close()
			dialErrs++
			continue
		}
		st := &stalled{conn: c, sent: time.Now()}
		conns = append(conns, st)
		// Read until the server closes; the client never closes first.
		_ = c.SetReadDeadline(st.sent.Add(p.bodyTimeout + 5*time.Second))
		readers.Go(func() {
			var got []byte
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if len(got) < 64 {
					got = append(got, buf[:min(n, 64)]...)
				}
				if err != nil {
					var ne net.Error
					if !errors.As(err, &ne) || !ne.Timeout() {
						st.closedAt = time.Now()
					}
					break
				}
			}
			if f := strings.Fields(string(got)); len(f) > 1 && strings.HasPrefix(f[0], "HTTP/") {
				st.status = f[1]
			}
		})
	}
	if len(conns) == 0 {
		stopSampling()
		return fmt.Errorf("stalled bodies: no connection opened (%d errors)", dialErrs)
	}
	first, last := conns[0].sent, conns[len(conns)-1].sent

	// The allow loop runs while the connections stall and are closed.
	loopCtx, stopLoop := context.WithDeadline(ctx, first.Add(p.bodyTimeout+time.Second))
	allClosed := make(chan struct{})
	go func() { readers.Wait(); close(allClosed) }()
	go func() {
		select {
		case <-allClosed:
			stopLoop()
		case <-loopCtx.Done():
		}
	}()
	busy := s.allowLoop(loopCtx, loopClient, p.loopWorkers)
	stopLoop()

	// Goroutines 2 s after body_timeout has passed for every connection.
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(last.Add(p.bodyTimeout + 2*time.Second))):
	}
	after, err := s.goroutines()
	stopSampling()
	<-sampled
	if err != nil {
		return err
	}
	readers.Wait()
	closed, answered := 0, map[string]int{}
	for _, st := range conns {
		if !st.closedAt.IsZero() && st.closedAt.Sub(st.sent) <= p.bodyTimeout+time.Second {
			closed++
		}
		answered[cmp.Or(st.status, "none")]++
		st.conn.Close()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var codes []string
	for k, v := range answered {
		codes = append(codes, fmt.Sprintf("%d × %s", v, k))
	}
	slices.Sort(codes)
	check(sc, fmt.Sprintf("%d connections, Content-Length 1000, 1 byte sent", p.stalls),
		fmt.Sprintf("%d opened in %.2f s, %d failed to open", len(conns), last.Sub(first).Seconds(), dialErrs), dialErrs == 0, "connections failed to open")
	check(sc, fmt.Sprintf("closed by toolgate within body_timeout %s + 1 s", p.bodyTimeout),
		fmt.Sprintf("%d of %d (answers: %s)", closed, p.stalls, strings.Join(codes, ", ")), closed == p.stalls, "connections left open past body_timeout + 1 s")
	check(sc, "go_goroutines before / peak / 2 s after body_timeout",
		fmt.Sprintf("%d / %d / %d (%+d)", before, peak.Load(), after, after-before), after <= before+20, "goroutines not back within 20 of before")
	check(sc, "allow loop alone", alone.String(), alone.bad == 0 && alone.calls > 0, "allowed calls not answered 200")
	check(sc, "allow loop during stall", during(busy, alone), busy.bad == 0 && busy.calls > 0, "allowed calls not answered 200 during the stall")
	return nil
}
