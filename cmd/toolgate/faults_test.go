package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/callinfo/callinfotest"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// TestMain lets the fault-injection checker run toolgate replicas as
// processes of their own, which it can SIGKILL: the test binary started
// with TOOLGATE_TEST_SERVE=<config> is `toolgate serve --config <config>`.
func TestMain(m *testing.M) {
	if cfg := os.Getenv("TOOLGATE_TEST_SERVE"); cfg != "" {
		var environ []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "TOOLGATE_") {
				environ = append(environ, kv)
			}
		}
		os.Exit(run(context.Background(), []string{"serve", "--config", cfg}, environ, os.Stdout, os.Stderr))
	}
	// The replicas run in this process share callinfo's memo: no reader
	// may have written to an Info that Decode shares.
	os.Exit(callinfotest.RunCheckingKept(m))
}

// TestFaultInjection is toolgate's fault-injection checker. Three toolgate
// replicas (processes) share a Sentinel set (a primary and a replica with
// AOF, appendfsync always, min-replicas-to-write 1; three sentinels) with
// pending.redis_min_replicas 1. Agents send calls that ask; an approver
// approves, rejects, cancels or leaves them to expire, on any replica;
// a recording upstream counts executions per call ID. Meanwhile the
// checker injects a fault per cycle: SIGKILL or SIGSTOP of a toolgate
// replica, a forced failover (SENTINEL FAILOVER), SIGKILL or SIGSTOP of
// the primary, SIGKILL of the replica, a restart of the primary from its
// AOF, and (rarely) a restart of the primary without its data. Then
// every fault is healed, the calls settle, and the history is judged: no
// call executed twice, none executed without an approval or after an
// acknowledged rejection or cancel, none ended rejected, expired or
// cancelled after it ran, an acknowledged approval ends executed or
// unknown, and every call ends in a terminal state (or is gone, only
// after Redis lost its data).
//
// TOOLGATE_FAULT_CYCLES sets the number of cycles (default 6: the short
// run of the test suite). TOOLGATE_FAULT_UNSAFE=1 runs without either
// confirmation (pending.redis_min_replicas 0, and no min-replicas-to-write
// on Redis), to show what asynchronous replication alone loses: there the
// checker is expected to fail. The long run is
//
//	TOOLGATE_FAULT_CYCLES=1000 go test -run TestFaultInjection -v -timeout 0 ./cmd/toolgate
func TestFaultInjection(t *testing.T) {
	testRedis(t) // it runs where the Redis tests run
	if _, err := exec.LookPath("redis-server"); err != nil {
		testkit.Unavailable(t, "redis-server not found")
	}
	minReplicas := 1
	if os.Getenv("TOOLGATE_FAULT_UNSAFE") == "1" {
		minReplicas = 0
	}
	set := testkit.NewSentinelSet(t, "--appendonly", "yes", "--appendfsync", "always",
		"--min-replicas-to-write", strconv.Itoa(minReplicas), "--min-replicas-max-lag", "2")
	runFaults(t, newSentinelFaults(t, set, minReplicas), minReplicas, envCount(t, "TOOLGATE_FAULT_CYCLES", 6))
}

// writeProber is a topology whose write availability, as toolgate sees
// it, a probe can measure: one primary for every call.
type writeProber interface {
	probeWrite(ctx context.Context) error
}

// probeWrites records, every 100 ms until ctx ends, whether a write to
// Redis is taken.
func probeWrites(ctx context.Context, p writeProber, h *history) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, pending.DefaultReplicaTimeout+500*time.Millisecond)
		err := p.probeWrite(pctx)
		cancel()
		if err == nil {
			h.wrote(time.Now())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// faultRedis is a Redis topology under faults: the URL toolgate takes, the
// faults it can suffer, and when it has recovered from them.
type faultRedis interface {
	url() string
	// kinds are the faults inject runs; the rare wipe aside.
	kinds() []string
	inject(w *faultWorld, kind string)
	// healthy reports whether every node is up, every primary with its
	// replica online, and if not what is wrong.
	healthy() (bool, string)
	heal()
}

// runFaults runs the checker on topology r: the replicas, the workload,
// cycles faults, the settling, the judgement.
func runFaults(t *testing.T, r faultRedis, minReplicas, cycles int) {
	h := newHistory()
	up := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		h.update(r.Header.Get("X-Toolgate-Call-Id"), func(c *callRecord) { c.execs++ })
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	var replicas []*tgProc
	for i := range 3 {
		replicas = append(replicas, startTGProc(t, i, up.URL, r.url(), minReplicas))
	}
	w := &faultWorld{t: t, redis: r, replicas: replicas, h: h}
	w.waitHealthy(time.Minute)

	// The probe runs until the judgement: approvals acknowledged late in
	// the run have their windows in the settling.
	probeCtx, stopProbe := context.WithCancel(t.Context())
	var probing sync.WaitGroup
	if p, ok := r.(writeProber); ok {
		h.probed = true
		probing.Go(func() { probeWrites(probeCtx, p, h) })
	}

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range 4 {
		wg.Go(func() { w.agent(ctx, &seq) })
	}
	wg.Go(func() { w.approver(ctx) })
	for i := range cycles {
		start := time.Now()
		kind := w.inject()
		// A fault lasts until the system has recovered from it, or for 3 s:
		// the next may come before (a Sentinel set takes about 10 s to
		// turn a demoted primary into a replica), as faults do. Every
		// 20th cycle waits for a full recovery, so that they cannot pile
		// up into one long outage.
		limit := 3 * time.Second
		if (i+1)%20 == 0 {
			limit = time.Minute
		}
		w.waitHealthy(limit)
		h.fault(kind, start, time.Now())
		if testing.Verbose() && (i+1)%50 == 0 {
			t.Logf("cycle %d of %d: %s", i+1, cycles, kind)
		}
		time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond)
	}
	stop()
	wg.Wait()
	w.heal()
	w.waitHealthy(time.Minute)
	w.settle()
	stopProbe()
	probing.Wait()
	t.Logf("fault-injection run:\n%s", h.report(cycles))
	if bad := h.check(); len(bad) > 0 {
		t.Errorf("%d anomalies:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// faultWorld is the checker's cluster: Redis, the toolgate replicas, the
// history.
type faultWorld struct {
	t        *testing.T
	redis    faultRedis
	replicas []*tgProc
	h        *history
}

// waitHealthy waits up to limit until Redis is healthy and every toolgate
// replica answers. A limit of a minute or more must be met: the system
// has to recover.
func (w *faultWorld) waitHealthy(limit time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, why := w.redis.healthy()
		if ok && w.replicasReady() {
			return
		}
		if time.Now().After(deadline) {
			if limit >= time.Minute {
				w.t.Fatalf("the system did not recover within %v: %s", limit, why)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (w *faultWorld) replicasReady() bool {
	client := &http.Client{Timeout: time.Second}
	for _, r := range w.replicas {
		res, err := client.Get(r.admin + "/livez")
		if err != nil {
			return false
		}
		res.Body.Close()
	}
	return true
}

// inject runs one fault, chosen at random: on a toolgate replica, or on
// Redis (r.kinds), or rarely a restart of Redis without its data.
func (w *faultWorld) inject() string {
	w.t.Helper()
	kinds := append([]string{"toolgate-kill", "toolgate-pause"}, w.redis.kinds()...)
	kind := kinds[rand.IntN(len(kinds))]
	if rand.IntN(20) == 0 {
		kind = "redis-restart-empty"
	}
	switch kind {
	case "toolgate-kill":
		r := w.replicas[rand.IntN(len(w.replicas))]
		r.kill()
		time.Sleep(time.Duration(200+rand.IntN(1000)) * time.Millisecond)
		r.start(w.t)
	case "toolgate-pause":
		r := w.replicas[rand.IntN(len(w.replicas))]
		r.signal(syscall.SIGSTOP)
		time.Sleep(time.Duration(500+rand.IntN(2500)) * time.Millisecond)
		r.signal(syscall.SIGCONT)
	case "redis-restart-empty":
		w.waitHealthy(time.Minute) // replicas in sync, so only the wipe loses data
		w.snapshot()
		w.redis.inject(w, kind)
	default:
		w.redis.inject(w, kind)
	}
	return kind
}

// heal undoes whatever a fault left: every process running and resumed.
func (w *faultWorld) heal() {
	w.redis.heal()
	for _, r := range w.replicas {
		r.signal(syscall.SIGCONT)
	}
}

// agent sends calls that ask, each with arguments of its own, to a
// random replica, held for the default hold, a second, or not at all.
func (w *faultWorld) agent(ctx context.Context, seq *atomic.Int64) {
	client := &http.Client{Timeout: 15 * time.Second}
	for ctx.Err() == nil {
		n := seq.Add(1)
		r := w.replicas[rand.IntN(len(w.replicas))]
		req, _ := http.NewRequest("POST", r.proxy+"/tools/write_note", strings.NewReader(fmt.Sprintf(`{"path":"notes/%d.txt","content":"%d"}`, n, n)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer agent-key-0123456789")
		mode := rand.IntN(3)
		switch mode {
		case 0:
			req.Header.Set("Prefer", "respond-async")
		case 1:
			req.Header.Set("Prefer", "wait=1")
		}
		start := time.Now()
		res, err := client.Do(req)
		o := opRecord{at: start, async: mode == 0}
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			o.took = time.Since(start)
			o.status = res.StatusCode
			o.decided = res.StatusCode == 200 || res.StatusCode == 202 || res.StatusCode == 403
			if id := res.Header.Get("X-Toolgate-Call-Id"); id != "" {
				w.h.update(id, func(c *callRecord) {
					c.parkAck = c.parkAck || res.StatusCode == 202
					c.heldDone = c.heldDone || res.StatusCode == 200
				})
			}
		}
		w.h.op(o)
		sleepCtx(ctx, time.Duration(50+rand.IntN(150))*time.Millisecond)
	}
}

// approver lists waiting calls on a random replica and decides each once:
// approve (60%), reject (20%), cancel as the agent (10%) or leave it to
// expire (10%). A decision that gets no answer or 503 is sent again, up to
// three times.
func (w *faultWorld) approver(ctx context.Context) {
	client := &http.Client{Timeout: 10 * time.Second}
	seen := map[string]bool{}
	for ctx.Err() == nil {
		r := w.replicas[rand.IntN(len(w.replicas))]
		var list struct {
			Calls []struct {
				CallID string `json:"call_id"`
			} `json:"calls"`
		}
		if req, _ := http.NewRequest("GET", r.approvals+"/api/approvals?limit=1000", nil); req != nil {
			req.Header.Set("Authorization", "Bearer alice-key-0123456789")
			if res, err := client.Do(req); err == nil {
				_ = json.NewDecoder(res.Body).Decode(&list)
				res.Body.Close()
			}
		}
		for _, c := range list.Calls {
			if seen[c.CallID] || ctx.Err() != nil {
				continue
			}
			seen[c.CallID] = true
			switch p := rand.IntN(10); {
			case p < 6:
				w.h.update(c.CallID, func(c *callRecord) { c.approve = true })
				w.decide(ctx, client, c.CallID, "approve")
			case p < 8:
				w.decide(ctx, client, c.CallID, "reject")
			case p < 9:
				w.cancel(ctx, client, c.CallID)
			}
		}
		sleepCtx(ctx, time.Duration(100+rand.IntN(200))*time.Millisecond)
	}
}

func (w *faultWorld) decide(ctx context.Context, client *http.Client, id, decision string) {
	code, status := w.send(ctx, client, "POST", func(r *tgProc) string { return r.approvals + "/api/approvals/" + id },
		"alice-key-0123456789", `{"decision":"`+decision+`"}`)
	if code == 200 {
		w.h.update(id, func(c *callRecord) {
			c.ackedAs, c.ackedAt = status, time.Now()
			c.refused = c.refused || status == "rejected"
		})
	}
}

func (w *faultWorld) cancel(ctx context.Context, client *http.Client, id string) {
	code, _ := w.send(ctx, client, "DELETE", func(r *tgProc) string { return r.proxy + "/_toolgate/calls/" + id }, "agent-key-0123456789", "")
	if code/100 == 2 {
		w.h.update(id, func(c *callRecord) { c.refused = true })
	}
}

// send sends a request with key to a random replica (url picks where),
// again after no answer or a 503, up to three times, and returns the last
// answer's status code (0: none came) and the call's status in its body.
func (w *faultWorld) send(ctx context.Context, client *http.Client, method string, url func(*tgProc) string, key, body string) (int, string) {
	code := 0
	for range 3 {
		req, _ := http.NewRequest(method, url(w.replicas[rand.IntN(len(w.replicas))]), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := client.Do(req)
		if err == nil {
			var doc struct {
				Status string `json:"status"`
			}
			_ = json.NewDecoder(res.Body).Decode(&doc)
			res.Body.Close()
			if code = res.StatusCode; code != 503 {
				return code, doc.Status
			}
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return code, ""
}

// snapshot records the calls that have ended, before Redis loses them.
func (w *faultWorld) snapshot() {
	client := &http.Client{Timeout: 5 * time.Second}
	for _, id := range w.h.ids() {
		w.h.mu.Lock()
		frozen := w.h.calls[id].final != ""
		w.h.mu.Unlock()
		if frozen {
			continue
		}
		if state := w.state(client, id); state != "" && state != "waiting" && state != "approved" && state != "executing" && state != "gone" {
			w.h.update(id, func(c *callRecord) { c.final = state })
		}
	}
}

// state returns the state of call id on a random replica: "gone" when it
// is not found, "" when the replica does not answer.
func (w *faultWorld) state(client *http.Client, id string) string {
	r := w.replicas[rand.IntN(len(w.replicas))]
	req, _ := http.NewRequest("GET", r.approvals+"/api/approvals/"+id, nil)
	req.Header.Set("Authorization", "Bearer alice-key-0123456789")
	res, err := client.Do(req)
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	var doc struct {
		Status string `json:"status"`
	}
	_ = json.NewDecoder(res.Body).Decode(&doc)
	switch res.StatusCode {
	case 200:
		return doc.Status
	case 404:
		return "gone"
	}
	return ""
}

// settle waits until every call seen is in a terminal state (or gone),
// up to two minutes, and records how each ended. A call whose end was
// recorded before Redis lost its data keeps that end.
func (w *faultWorld) settle() {
	w.t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for _, id := range w.h.ids() {
		for {
			w.h.mu.Lock()
			frozen := w.h.calls[id].final != ""
			w.h.mu.Unlock()
			if frozen {
				break
			}
			state := w.state(client, id)
			live := state == "" || state == "waiting" || state == "approved" || state == "executing"
			if !live || time.Now().After(deadline) {
				w.h.update(id, func(c *callRecord) { c.final = state })
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// envCount reads a count from the environment variable name, or def.
func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a number", name, s)
	}
	return n
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// tgProc is a toolgate replica run as a process of its own (TestMain), on
// fixed ports so that it comes back where it was after a kill.
type tgProc struct {
	cfg, logPath            string
	proxy, approvals, admin string

	mu  sync.Mutex
	cmd *exec.Cmd
}

func startTGProc(t *testing.T, i int, upstream, redisURL string, minReplicas int) *tgProc {
	t.Helper()
	ports := testkit.FreeAddrs(t, 3)
	dir := t.TempDir()
	cfg := `listen: {proxy: ` + ports[0] + `, approvals: ` + ports[1] + `, admin: ` + ports[2] + `}
public_url: http://approvals.invalid
upstreams:
  - {name: notes, url: ` + upstream + `}
identity:
  api_keys: [{key: agent-key-0123456789, subject: agent-42}]
policy:
  rules_file: ./rules.yaml
pending:
  store: redis
  redis_url: "` + redisURL + `"
  redis_prefix: "tg-faults:"
  redis_min_replicas: ` + strconv.Itoa(minReplicas) + `
  redis_replica_timeout: 1s
  hold: 3s
  ttl: 6s
approvals:
  secret: ` + testSecret + `
  approvers: [{name: alice, key: alice-key-0123456789}]
# The history check reads every call's final state after the run, and a
# call gone without a data loss to explain it is an anomaly: the one agent's
# ended calls must all be kept (the cap also bounds how many are).
limits: {max_parked_per_subject: 100000, max_parked: 100000}
shutdown_grace: 1s
`
	writeFiles(t, dir, map[string]string{"toolgate.yaml": cfg, "rules.yaml": seedRulesYAML})
	p := &tgProc{
		cfg: filepath.Join(dir, "toolgate.yaml"), logPath: filepath.Join(dir, fmt.Sprintf("replica-%d.log", i)),
		proxy: "http://" + ports[0], approvals: "http://" + ports[1], admin: "http://" + ports[2],
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(p.logPath)
			var warn []string
			for line := range strings.Lines(string(b)) {
				if !strings.Contains(line, `"level":"INFO"`) {
					warn = append(warn, line)
				}
			}
			t.Logf("replica %d log, warnings and errors (the last 20):\n%s", i, strings.Join(warn[max(0, len(warn)-20):], ""))
		}
	})
	p.start(t)
	return p
}

func (p *tgProc) start(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TOOLGATE_TEST_SERVE="+p.cfg)
	cmd.Dir = filepath.Dir(p.cfg)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = testkit.ChildAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res, err := http.Get(p.admin + "/livez"); err == nil {
			res.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(p.logPath)
			t.Fatalf("a toolgate replica did not start within 20 s:\n%s", b)
		}
	}
}

func (p *tgProc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

func (p *tgProc) signal(sig os.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}
