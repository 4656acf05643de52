package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The -soak run: a mixed workload for -soak-duration against two toolgate
// replicas sharing a Redis of the run's own. Agents call the tools at
// once: allowed and denied calls, asks that an approver approves or
// rejects through either replica's API, or leaves to expire, and retries
// of parked calls through the other replica (which must attach). The
// upstream is the harness's own and counts what it runs, call by call.
// Every 20 s the run prints each replica's RSS, goroutines, descriptors and
// heap, and the store's keys. When the load stops it waits until every call
// has ended and its result expired, then checks:
//   - every allowed and approved call ran exactly once, and no denied,
//     rejected or expired call ran at all;
//   - every retry found its parked call;
//   - the store holds no call's keys any more;
//   - each replica's goroutines are back near where they started.
//
// A failed check fails the command.

// soakParams are the -soak flags.
type soakParams struct {
	duration time.Duration
	agents   int
}

// soakTTL and soakResultTTL are the replicas' pending.ttl and
// pending.result_ttl: short, so that calls left to expire, and every
// result, are gone within the run.
const (
	soakTTL       = 10 * time.Second
	soakResultTTL = 15 * time.Second
	soakPrefix    = "soak"
)

// expectation is what the upstream must have seen of one call.
type expectation uint8

const (
	never      expectation = iota // denied, rejected, refused, left to expire
	once                          // allowed, or approved and executed
	atMostOnce                    // its outcome is unknown to the agent (a transport error)
)

// ledger is what each call must have done upstream, by the value of its
// path argument (unique to the call).
type ledger struct {
	mu sync.Mutex
	m  map[string]expectation
}

func (l *ledger) expect(path string, e expectation) {
	l.mu.Lock()
	l.m[path] = e
	l.mu.Unlock()
}

// violations compares the ledger with what the upstream ran (path →
// times), and describes at most max of the calls that broke it, and
// every call the upstream ran that no agent made.
func (l *ledger) violations(ran map[string]int, max int) (n int, shown []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	note := func(s string) {
		n++
		if len(shown) < max {
			shown = append(shown, s)
		}
	}
	for p, e := range l.m {
		got := ran[p]
		switch {
		case e == once && got != 1:
			note(fmt.Sprintf("%s: ran %d times, want once", p, got))
		case e == never && got != 0:
			note(fmt.Sprintf("%s: ran %d times, want never", p, got))
		case e == atMostOnce && got > 1:
			note(fmt.Sprintf("%s: ran %d times, want at most once", p, got))
		}
	}
	for p, got := range ran {
		if _, ok := l.m[p]; !ok {
			note(fmt.Sprintf("%s: ran %d times, and no agent made it", p, got))
		}
	}
	sort.Strings(shown)
	return n, shown
}

// soakUpstream answers every call and counts it by its path argument.
type soakUpstream struct {
	mu  sync.Mutex
	ran map[string]int
	n   atomic.Int64
}

func (u *soakUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var args struct{ Path string }
	_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&args)
	u.mu.Lock()
	u.ran[args.Path]++
	u.mu.Unlock()
	u.n.Add(1)
	if rand.IntN(20) == 0 {
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond) // now and then a slow tool
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

func (u *soakUpstream) snapshot() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := make(map[string]int, len(u.ran))
	maps.Copy(m, u.ran)
	return m
}

// soakStack is the run's Redis, upstream and two replicas.
type soakStack struct {
	redis    *redis.Client
	up       *soakUpstream
	upSrv    *http.Server
	replicas []capacityReplica
	approver string
	keys     []string // the agents' API keys
	client   *http.Client
	counts   sync.Map // outcome → *atomic.Int64
	pending  sync.WaitGroup
}

func (s *soakStack) count(what string) {
	v, _ := s.counts.LoadOrStore(what, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (s *soakStack) counted(what string) int64 {
	if v, ok := s.counts.Load(what); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func soakRun(ctx context.Context, o *options, pins pinning, stdout io.Writer) error {
	s, err := startSoakStack(ctx, o, pins)
	if err != nil {
		return err
	}
	defer s.redis.Close()
	p := o.soak
	fmt.Fprintf(stdout, "toolgate-bench -soak: %s; 2 replicas on a Redis of the run's own; %d agents for %v (pending.ttl %v, result_ttl %v)\n\n",
		machine(), p.agents, p.duration, soakTTL, soakResultTTL)
	led := &ledger{m: map[string]expectation{}}
	start := time.Now()
	base, err := s.sample(ctx, start, stdout)
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	var agents sync.WaitGroup
	for i := range p.agents {
		agents.Go(func() { s.agent(ctx, i, stop, led) })
	}
	tick := time.NewTicker(20 * time.Second)
	defer tick.Stop()
	for end := time.After(p.duration); ; {
		select {
		case <-ctx.Done():
			close(stop)
			return ctx.Err()
		case <-tick.C:
			if _, err := s.sample(ctx, start, stdout); err != nil {
				return err
			}
			continue
		case <-end:
		}
		break
	}
	close(stop)
	agents.Wait()
	s.pending.Wait() // every approved call's agent has its outcome
	fmt.Fprintf(stdout, "load stopped after %v; waiting for results to expire\n", time.Since(start).Round(time.Second))
	// Calls left to expire end after the TTL (the sweeper's pass
	// included); their results, and every other, after result_ttl. Idle
	// connections are closed from this side, the agents' and the
	// upstream's, rather than waited for (the replicas keep theirs for
	// minutes): what goroutines are left are toolgate's own.
	s.client.CloseIdleConnections()
	s.upSrv.SetKeepAlivesEnabled(false)
	settle := time.Now().Add(soakTTL + soakResultTTL + 20*time.Second)
	var last soakSample
	for time.Now().Before(settle) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
		if last, err = s.sample(ctx, start, io.Discard); err != nil {
			return err
		}
	}
	if last, err = s.sample(ctx, start, stdout); err != nil {
		return err
	}
	var failed []string
	n, shown := led.violations(s.up.snapshot(), 20)
	fmt.Fprintf(stdout, "\ncalls: %d made, %d run by the upstream; ", len(led.m), s.up.n.Load())
	var outcomes []string
	s.counts.Range(func(k, v any) bool {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(outcomes)
	fmt.Fprintln(stdout, strings.Join(outcomes, ", "))
	if n > 0 {
		failed = append(failed, fmt.Sprintf("%d calls did not run as decided: %s", n, strings.Join(shown, "; ")))
	}
	for _, bad := range []string{"retry not attached", "allow refused", "deny not refused", "decision refused", "transport error", "ask not parked", "outcome not executed"} {
		if c := s.counted(bad); c > 0 {
			failed = append(failed, fmt.Sprintf("%s: %d", bad, c))
		}
	}
	if last.keys > 1 { // the shard layout stays
		failed = append(failed, fmt.Sprintf("the store still holds %d keys", last.keys))
	}
	for i, r := range last.replicas {
		// A handful above the start: the Redis pool keeps idle
		// connections, which need no goroutine each.
		if r.goroutines > base.replicas[i].goroutines+10 {
			failed = append(failed, fmt.Sprintf("replica %d holds %d goroutines at rest, %d at the start", i, r.goroutines, base.replicas[i].goroutines))
		}
	}
	if len(failed) > 0 {
		return errors.New("soak: " + strings.Join(failed, "; "))
	}
	fmt.Fprintf(stdout, "checks: every allowed and approved call ran once, no other ran; every retry attached; the store is empty; goroutines back to %d and %d (%d and %d at the start)\n",
		last.replicas[0].goroutines, last.replicas[1].goroutines, base.replicas[0].goroutines, base.replicas[1].goroutines)
	return nil
}

// startSoakStack starts the Redis, the upstream and the two replicas.
func startSoakStack(ctx context.Context, o *options, pins pinning) (*soakStack, error) {
	s := &soakStack{
		approver: secret(),
		up:       &soakUpstream{ran: map[string]int{}},
		client:   &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	nodes, err := startRedis(ctx, o.dir, pins.load, false, nil)
	if err != nil {
		return nil, err
	}
	s.redis = redis.NewClient(&redis.Options{Addr: nodes[0]})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.upSrv = &http.Server{Handler: s.up, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.upSrv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = s.upSrv.Close() })
	if err := writeRules(filepath.Join(o.dir, "rules.yaml"), o.rules); err != nil {
		return nil, err
	}
	var keys strings.Builder
	for i := range o.soak.agents {
		k := secret()
		s.keys = append(s.keys, k)
		fmt.Fprintf(&keys, "    - {key: %q, subject: agent-%d}\n", k, i)
	}
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	for i := range 2 {
		addrs := ports[3*i : 3*i+3]
		cfg := filepath.Join(o.dir, fmt.Sprintf("toolgate-soak-%d.yaml", i))
		text := fmt.Sprintf(`listen: {proxy: %q, approvals: %q, admin: %q}
upstreams:
  - {name: tools, url: %q, protocol: rest, prefix: /}
identity:
  api_keys:
%spolicy: {rules_file: ./rules.yaml, watch: false}
pending: {store: redis, redis_url: %q, redis_prefix: "`+soakPrefix+`:", hold: 1s, ttl: %s, result_ttl: %s}
approvals:
  secret: "${BENCH_APPROVALS_SECRET}"
  approvers: [{name: alice, key: %q}]
log: {level: warn, decisions: {console: false}}
`, addrs[0], addrs[1], addrs[2], "http://"+ln.Addr().String(), keys.String(), "redis://"+nodes[0], soakTTL, soakResultTTL, s.approver)
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			return nil, err
		}
		env := []string{"BENCH_APPROVALS_SECRET=soak-run-approvals-secret-of-32-bytes-or-more"}
		tg, err := startProc(o.dir, fmt.Sprintf("toolgate-soak-%d", i), pins.servers, []string{o.toolgate, "serve", "--config", cfg}, env)
		if err != nil {
			return nil, err
		}
		r := capacityReplica{p: tg, proxy: "http://" + addrs[0], approvals: "http://" + addrs[1], admin: "http://" + addrs[2]}
		if err := waitReady(ctx, tg, r.admin+"/readyz", 30*time.Second); err != nil {
			return nil, err
		}
		s.replicas = append(s.replicas, r)
	}
	return s, nil
}

// agent calls until stop: allowed (45%), denied (10%) and asked (45%)
// calls, each with a path of its own, through either replica.
func (s *soakStack) agent(ctx context.Context, i int, stop <-chan struct{}, led *ledger) {
	key := s.keys[i]
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		r := s.replicas[rand.IntN(2)]
		id := fmt.Sprintf("a%d-%d-%x", i, n, rand.Uint64())
		switch k := rand.IntN(100); {
		case k < 45:
			path := "docs/" + id
			led.expect(path, once)
			status, _, err := s.call(ctx, r.proxy, key, "read_file", path, nil)
			if err != nil || status != http.StatusOK {
				s.failed(led, path, err, "allow refused")
				continue
			}
			s.count("allowed")
		case k < 55:
			path := "x/" + id + "/.env"
			led.expect(path, never)
			status, _, err := s.call(ctx, r.proxy, key, "read_file", path, nil)
			if err != nil || status != http.StatusForbidden {
				s.failed(led, path, err, "deny not refused")
				continue
			}
			s.count("denied")
		default:
			s.ask(ctx, key, "notes/"+id, led)
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	}
}

// failed records a call that did not get its expected answer: with a
// transport error it may or may not have run.
func (s *soakStack) failed(led *ledger, path string, err error, what string) {
	if err != nil {
		led.expect(path, atMostOnce)
		what = "transport error"
	}
	s.count(what)
}

// ask parks a call (answered at once: Prefer: respond-async), retries it
// through either replica now and then, and approves it (half), rejects
// it (a fifth) or leaves it to expire.
func (s *soakStack) ask(ctx context.Context, key, path string, led *ledger) {
	led.expect(path, never)
	hdr := map[string]string{"Prefer": "respond-async"}
	if rand.IntN(3) == 0 {
		hdr["Idempotency-Key"] = "k-" + path
	}
	status, body, err := s.call(ctx, s.replicas[rand.IntN(2)].proxy, key, "write_note", path, hdr)
	switch {
	case err != nil:
		s.failed(led, path, err, "")
		return
	case status == http.StatusTooManyRequests:
		// The principal's parked calls are at their cap: the calls left
		// to expire hold it for the TTL.
		s.count("ask at the cap (429)")
		time.Sleep(200 * time.Millisecond)
		return
	case status != http.StatusAccepted:
		s.count("ask not parked")
		s.count(fmt.Sprintf("ask answered %d: %.200s", status, body))
		led.expect(path, atMostOnce)
		return
	}
	var parked struct {
		CallID string `json:"call_id"`
	}
	_ = json.Unmarshal(body, &parked)
	if rand.IntN(4) == 0 {
		status, body, err := s.call(ctx, s.replicas[rand.IntN(2)].proxy, key, "write_note", path, hdr)
		var again struct {
			CallID string `json:"call_id"`
		}
		_ = json.Unmarshal(body, &again)
		if err != nil || status != http.StatusAccepted || again.CallID != parked.CallID {
			s.count("retry not attached")
		} else {
			s.count("retries attached")
		}
	}
	switch d := rand.IntN(10); {
	case d < 5:
		led.expect(path, once)
		if status := s.decide(ctx, parked.CallID, "approve"); status != http.StatusOK {
			s.count("decision refused")
			led.expect(path, atMostOnce)
			return
		}
		s.pending.Go(func() {
			if got := s.outcome(ctx, key, parked.CallID); got != "executed" {
				s.count("outcome not executed")
			} else {
				s.count("approved and executed")
			}
		})
	case d < 7:
		if status := s.decide(ctx, parked.CallID, "reject"); status != http.StatusOK {
			s.count("decision refused")
			return
		}
		s.count("rejected")
	default:
		s.count("left to expire")
	}
}

// call sends a tool call and reads its answer.
func (s *soakStack) call(ctx context.Context, proxy, key, tool, path string, hdr map[string]string) (int, []byte, error) {
	body := `{"path":` + strconv.Quote(path) + `,"content":"x"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy+"/tools/"+tool, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// decide approves or rejects a call through either replica's API.
func (s *soakStack) decide(ctx context.Context, id, decision string) int {
	r := s.replicas[rand.IntN(2)]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.approvals+"/api/approvals/"+id, strings.NewReader(`{"decision":"`+decision+`"}`))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+s.approver)
	req.Header.Set("Content-Type", "application/json")
	res, err := s.client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// outcome follows a call's status URL, through either replica, until it
// has ended (or a minute has passed), and returns its status.
func (s *soakStack) outcome(ctx context.Context, key, id string) string {
	for until := time.Now().Add(time.Minute); time.Now().Before(until) && ctx.Err() == nil; time.Sleep(300 * time.Millisecond) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.replicas[rand.IntN(2)].proxy+"/_toolgate/calls/"+id, nil)
		if err != nil {
			return err.Error()
		}
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := s.client.Do(req)
		if err != nil {
			continue
		}
		var st struct{ Status string }
		_ = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		switch st.Status {
		case "waiting", "approved", "executing":
		default:
			return st.Status
		}
	}
	return "still running after a minute"
}

// soakSample is one look at the replicas and the store.
type soakSample struct {
	replicas []replicaSample
	keys     int64
}

type replicaSample struct {
	rssKiB                  int64
	goroutines, fds, heapMB int
}

// sample reads each replica's RSS and admin metrics and the store's key
// count, and prints them.
func (s *soakStack) sample(ctx context.Context, start time.Time, w io.Writer) (soakSample, error) {
	var out soakSample
	var parts []string
	for i, r := range s.replicas {
		kib, err := rssKiB(r.p.pid())
		if err != nil {
			return out, err
		}
		m, err := s.metrics(ctx, r.admin, "go_goroutines", "process_open_fds", "go_memstats_heap_inuse_bytes")
		if err != nil {
			return out, err
		}
		rs := replicaSample{rssKiB: kib, goroutines: int(m[0]), fds: int(m[1]), heapMB: int(m[2] / (1 << 20))}
		out.replicas = append(out.replicas, rs)
		parts = append(parts, fmt.Sprintf("replica %d: RSS %.1f MiB, heap %d MiB, %d goroutines, %d fds", i, mib(kib), rs.heapMB, rs.goroutines, rs.fds))
	}
	n, err := s.redis.DBSize(ctx).Result()
	if err != nil {
		return out, err
	}
	out.keys = n
	fmt.Fprintf(w, "%4.0fs  upstream ran %6d  store keys %5d  %s\n", time.Since(start).Seconds(), s.up.n.Load(), n, strings.Join(parts, "; "))
	return out, nil
}

// metrics reads the named unlabelled series of an admin /metrics.
func (s *soakStack) metrics(ctx context.Context, admin string, names ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	vals := make([]float64, len(names))
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for i, n := range names {
			if name == n {
				vals[i], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return vals, sc.Err()
}
