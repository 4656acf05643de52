package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The -capacity run: many parked calls across many replicas on one Redis
// (or a three-primary Cluster with -capacity-cluster), both of the run's
// own. It parks -capacity-calls calls through -capacity-replicas toolgate
// processes, then reports Redis' memory per parked call beside the request
// each holds, every replica's RSS, the approval-to-answer latency of held
// calls approved on another replica while the others stay parked, and how
// fast the sweepers execute approved calls nobody holds.

// capacityPrefix is the replicas' pending.redis_prefix (without its
// colon): toolgate's default, since key names count in the memory of a
// call, and the run has a Redis of its own. The run reads the store's
// keys under it.
const capacityPrefix = "toolgate"

// capacityParams are the -capacity flags.
type capacityParams struct {
	calls, replicas, principals, rounds, sweep int
	cluster                                    bool
	redisArgs                                  string // more redis-server arguments
}

// capacityStack is the run's Redis, upstream and replicas.
type capacityStack struct {
	redis     redis.UniversalClient
	nodes     []string // Redis addresses (one, or the Cluster's primaries)
	upstream  string
	replicas  []capacityReplica
	approver  string
	agentKeys []string
	recv      *receiver
}

type capacityReplica struct {
	p                       *proc
	proxy, approvals, admin string
}

func capacityRun(ctx context.Context, o *options, pins pinning, stdout, stderr io.Writer) error {
	p := o.capacity
	s, err := startCapacityStack(ctx, o, pins)
	if err != nil {
		return err
	}
	defer s.redis.Close()
	defer s.recv.close()
	fmt.Fprintf(stdout, "toolgate-bench -capacity: %s; %d replicas on %s; %d calls of %d principals\n",
		machine(), p.replicas, s.topology(), p.calls, p.principals)
	if p.redisArgs != "" {
		fmt.Fprintf(stdout, "redis-server also given: %s\n", p.redisArgs)
	}
	fmt.Fprintln(stdout)

	before, err := s.usedMemory(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	ids, err := s.park(ctx, p.calls, 64)
	if err != nil {
		return err
	}
	parkTook := time.Since(start)
	after, err := s.usedMemory(ctx)
	if err != nil {
		return err
	}
	perCall := float64(after-before) / float64(len(ids))
	req, keys, err := s.sampleCall(ctx, ids)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "parked:          %d calls in %v (%.0f parks/s through %d replicas)\n", len(ids), parkTook.Round(time.Second), float64(len(ids))/parkTook.Seconds(), p.replicas)
	fmt.Fprintf(stdout, "Redis memory:    %.0f B per parked call (used_memory less client buffers %s → %s), of which %d B the stored request, argument and brief\n",
		perCall, mibs(before), mibs(after), req)
	fmt.Fprintf(stdout, "                 %.0f B per call beyond them (target ≤ 1024); the call's own key: %s B, the rest indexes and attach keys\n", perCall-float64(req), keys)
	var rss []string
	for i, r := range s.replicas {
		kib, err := rssKiB(r.p.pid())
		if err != nil {
			return err
		}
		rss = append(rss, fmt.Sprintf("%.0f", mib(kib)))
		_ = i
	}
	fmt.Fprintf(stdout, "replica RSS:     %s MiB\n", strings.Join(rss, ", "))

	// Every call announced (its notification delivered) before the
	// approvals are timed: a burst of 100,000 notifications is not the
	// steady state the approvals are measured in.
	for deadline := time.Now().Add(10 * time.Minute); s.recv.requested() < len(ids); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of %d calls announced in 10 minutes", s.recv.requested(), len(ids))
		}
	}
	fmt.Fprintf(stdout, "announced:       %d calls %v after the first park (%.0f notifications/s)\n",
		len(ids), time.Since(start).Round(time.Second), float64(len(ids))/time.Since(start).Seconds())
	// Announced, a call leaves the store's work list of calls to announce:
	// what a call waiting for its approver costs from then on.
	if announced, err := s.usedMemory(ctx); err == nil {
		per := float64(announced-before) / float64(len(ids))
		fmt.Fprintf(stdout, "Redis memory:    %.0f B per call once announced (used_memory less client buffers %s), %.0f B beyond the request, argument and brief\n",
			per, mibs(announced), per-float64(req))
	}

	lat, err := s.approvals(ctx, p.rounds)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "approval→answer: %d held calls, each approved on another replica with %d parked: p50 %s, p99 %s, max %s\n",
		len(lat), len(ids), ms(pct(lat, 0.5)), ms(pct(lat, 0.99)), ms(lat[len(lat)-1]))

	rate, took, err := s.sweep(ctx, ids[:min(p.sweep, len(ids))])
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sweepers:        %d approved calls nobody holds executed in %v: %.0f executions/s across %d replicas\n",
		min(p.sweep, len(ids)), took.Round(10*time.Millisecond), rate, p.replicas)
	if len(s.nodes) > 1 {
		spread, err := s.spread(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "spread:          %s\n", spread)
	}
	return nil
}

// spread tells each primary's keys and the commands it ran.
func (s *capacityStack) spread(ctx context.Context) (string, error) {
	var parts []string
	for _, a := range s.nodes {
		c := redis.NewClient(&redis.Options{Addr: a})
		keys, err := c.DBSize(ctx).Result()
		if err != nil {
			c.Close()
			return "", err
		}
		stats, err := c.Info(ctx, "commandstats").Result()
		c.Close()
		if err != nil {
			return "", err
		}
		calls := 0
		for line := range strings.Lines(stats) {
			if i := strings.Index(line, "calls="); i >= 0 && strings.HasPrefix(line, "cmdstat_") {
				n, _ := strconv.Atoi(line[i+6 : i+6+strings.IndexByte(line[i+6:], ',')])
				calls += n
			}
		}
		parts = append(parts, fmt.Sprintf("%s %d keys, %d commands", a, keys, calls))
	}
	return strings.Join(parts, "; "), nil
}

func pct(d []time.Duration, p float64) time.Duration {
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

func mibs(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (s *capacityStack) topology() string {
	if len(s.nodes) > 1 {
		return fmt.Sprintf("a %d-primary Redis Cluster (16 shards)", len(s.nodes))
	}
	return "one Redis"
}

// startCapacityStack starts Redis (one server, or a Cluster), the
// counting upstream and the replicas, and waits until all answer.
func startCapacityStack(ctx context.Context, o *options, pins pinning) (*capacityStack, error) {
	p := o.capacity
	s := &capacityStack{approver: secret()}
	// A notification target, as every deployment has: a call announced
	// leaves the store's list of calls to announce again.
	recv, err := startReceiver()
	if err != nil {
		return nil, err
	}
	s.recv = recv
	nodes, err := startRedis(ctx, o.dir, pins.servers, p.cluster, strings.Fields(p.redisArgs))
	if err != nil {
		return nil, err
	}
	s.nodes = nodes
	url := "redis://" + nodes[0]
	if p.cluster {
		s.redis = redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes})
		url = "redis+cluster://" + nodes[0] + "?addr=" + strings.Join(nodes[1:], "&addr=")
	} else {
		s.redis = redis.NewClient(&redis.Options{Addr: nodes[0]})
	}
	ports, err := freePorts(1 + 3*p.replicas)
	if err != nil {
		return nil, err
	}
	upAddr := ports[0]
	up, err := startProc(o.dir, "upstream", pins.servers, self("upstream", "-listen", upAddr), nil)
	if err != nil {
		return nil, err
	}
	s.upstream = "http://" + upAddr
	if err := waitReady(ctx, up, s.upstream+"/_bench/count", 10*time.Second); err != nil {
		return nil, err
	}
	if err := writeRules(filepath.Join(o.dir, "rules.yaml"), o.rules); err != nil {
		return nil, err
	}
	var keys strings.Builder
	for i := range p.principals {
		k := secret()
		s.agentKeys = append(s.agentKeys, k)
		fmt.Fprintf(&keys, "    - {key: %q, subject: agent-%d}\n", k, i)
	}
	for i := range p.replicas {
		addrs := ports[1+3*i : 4+3*i]
		cfg := filepath.Join(o.dir, fmt.Sprintf("toolgate-capacity-%d.yaml", i))
		text := fmt.Sprintf(`listen: {proxy: %q, approvals: %q, admin: %q}
upstreams:
  - {name: tools, url: %q, protocol: rest, prefix: /}
identity:
  api_keys:
%spolicy: {rules_file: ./rules.yaml, watch: false}
pending: {store: redis, redis_url: %q, redis_prefix: "`+capacityPrefix+`:", hold: 30s, ttl: 1h}
approvals:
  secret: "${BENCH_APPROVALS_SECRET}"
  approvers: [{name: alice, key: %q}]
  notify: [{url: %q, format: cloudevents}]
limits: {max_parked_per_subject: %d, max_parked: %d}
log: {level: warn, decisions: {console: false}}
`, addrs[0], addrs[1], addrs[2], s.upstream, keys.String(), url, s.approver, recv.url, p.calls, 2*p.calls)
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			return nil, err
		}
		env := []string{"BENCH_APPROVALS_SECRET=capacity-run-approvals-secret-of-32-bytes-or-more"}
		tg, err := startProc(o.dir, fmt.Sprintf("toolgate-capacity-%d", i), pins.servers, []string{o.toolgate, "serve", "--config", cfg}, env)
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

// startRedis starts a redis-server of the run's own, or three in a
// Cluster, without persistence, pinned to cpu when given, and returns
// their addresses.
func startRedis(ctx context.Context, dir, cpu string, cluster bool, extra []string) ([]string, error) {
	n := 1
	if cluster {
		n = 3
	}
	var nodes []string
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	for i, addr := range ports {
		_, port, _ := strings.Cut(addr, ":")
		nodeDir := filepath.Join(dir, fmt.Sprintf("redis-%d", i))
		if err := os.MkdirAll(nodeDir, 0o700); err != nil {
			return nil, err
		}
		argv := []string{"redis-server", "--bind", "127.0.0.1", "--port", port, "--dir", nodeDir, "--save", "", "--appendonly", "no"}
		if cluster {
			argv = append(argv, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		}
		argv = append(argv, extra...)
		if _, err := startProc(dir, fmt.Sprintf("redis-%d", i), cpu, argv, nil); err != nil {
			return nil, err
		}
		nodes = append(nodes, addr)
	}
	for _, a := range nodes {
		c := redis.NewClient(&redis.Options{Addr: a})
		err := errors.New("no answer")
		for deadline := time.Now().Add(10 * time.Second); err != nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			err = c.Ping(ctx).Err()
		}
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("redis-server %s: %w", a, err)
		}
	}
	if cluster {
		out, err := exec.CommandContext(ctx, "redis-cli", append(append([]string{"--cluster", "create"}, nodes...), "--cluster-yes")...).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
		}
		for _, a := range nodes {
			c := redis.NewClient(&redis.Options{Addr: a})
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if info, _ := c.ClusterInfo(ctx).Result(); strings.Contains(info, "cluster_state:ok") {
					break
				}
			}
			c.Close()
		}
	}
	return nodes, nil
}

// usedMemory is used_memory summed over the nodes, less the clients'
// buffers (mem_clients_normal): those belong to the connections, not to
// the calls, and are large just after a burst of commands (Redis shrinks
// an idle client's query buffer only after a while), which is when the
// figure once every call is announced is read when announcing keeps up
// with parking.
func (s *capacityStack) usedMemory(ctx context.Context) (int64, error) {
	var total int64
	for _, a := range s.nodes {
		c := redis.NewClient(&redis.Options{Addr: a})
		info, err := c.Info(ctx, "memory").Result()
		c.Close()
		if err != nil {
			return 0, err
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "mem_clients_normal:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total -= n
			}
		}
	}
	return total, nil
}

// sampleCall returns, for one parked call, the bytes of its request,
// arguments and brief (the large fields of its key, see pending's
// redis_scripts.go) and the memory of its key (MEMORY USAGE).
func (s *capacityStack) sampleCall(ctx context.Context, ids []string) (req int64, keys string, err error) {
	id := ids[len(ids)/2]
	base := "{" + capacityPrefix + "}:"
	for i := range 16 {
		if len(s.nodes) == 1 {
			break
		}
		// the shard is the principal's; find it by trying each
		cand := fmt.Sprintf("{%s:%d}:", capacityPrefix, i)
		if n, _ := s.redis.Exists(ctx, cand+"call:"+id).Result(); n == 1 {
			base = cand
		}
	}
	v, err := s.redis.Get(ctx, base+"call:"+id).Result()
	if err != nil {
		return 0, "", err
	}
	// "<state> <header> <bf> <in> <rq> <rb>\n": the lengths after the
	// header's
	line, _, _ := strings.Cut(v, "\n")
	words := strings.Fields(line)
	if len(words) != 6 {
		return 0, "", fmt.Errorf("call %s: %q is no call's first line", id, line)
	}
	for _, w := range words[2:] {
		n, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			return 0, "", fmt.Errorf("call %s: %q is no call's first line", id, line)
		}
		req += n
	}
	n, err := s.redis.MemoryUsage(ctx, base+"call:"+id, 0).Result()
	if err != nil {
		return 0, "", err
	}
	return req, fmt.Sprintf("%d (one key, %d B long)", n, len(v)), nil
}

// post sends one asked call as agent i to replica r.
func (s *capacityStack) post(c *http.Client, r capacityReplica, agent, n int, prefer string) (string, int, error) {
	req, err := http.NewRequest(http.MethodPost, r.proxy+"/tools/write_note", strings.NewReader(fmt.Sprintf(askTemplate, "cap", n)))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.agentKeys[agent%len(s.agentKeys)])
	req.Header.Set("Prefer", prefer)
	res, err := c.Do(req)
	if err != nil {
		return "", 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.Header.Get("X-Toolgate-Call-Id"), res.StatusCode, nil
}

// park parks n calls (Prefer: respond-async) with workers at once, round
// robin over the replicas and principals, and returns their IDs.
func (s *capacityStack) park(ctx context.Context, n, workers int) ([]string, error) {
	c := abuseClient(workers)
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				id, code, err := s.post(c, s.replicas[i%len(s.replicas)], i, i, "respond-async")
				if err == nil && code != http.StatusAccepted {
					err = fmt.Errorf("park %d: status %d", i, code)
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return ids, firstErr
}

// decide approves call id on replica r through the approvals API.
func (s *capacityStack) decide(c *http.Client, r capacityReplica, id string) error {
	req, err := http.NewRequest(http.MethodPost, r.approvals+"/api/approvals/"+id, strings.NewReader(`{"decision":"approve"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.approver)
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("approve %s: status %d", id, res.StatusCode)
	}
	return nil
}

// approvals holds a call on one replica, approves it on the next, and
// measures from the approval's answer to the held agent's answer (the
// call went to the upstream and back in between), rounds times, one at a
// time.
func (s *capacityStack) approvals(ctx context.Context, rounds int) ([]time.Duration, error) {
	c := abuseClient(4)
	var lat []time.Duration
	for i := range rounds {
		holder, approver := s.replicas[i%len(s.replicas)], s.replicas[(i+1)%len(s.replicas)]
		type answer struct {
			id   string
			code int
			err  error
			at   time.Time
		}
		prev, err := s.newestWaiting(ctx)
		if err != nil {
			return nil, err
		}
		done := make(chan answer, 1)
		go func() {
			id, code, err := s.post(c, holder, i, 1e9+i, "wait=30")
			done <- answer{id, code, err, time.Now()}
		}()
		id, err := s.heldCall(ctx, prev)
		if err != nil {
			return nil, err
		}
		if err := s.decide(c, approver, id); err != nil {
			return nil, err
		}
		approved := time.Now()
		a := <-done
		if a.err != nil || a.code != http.StatusOK || a.id != id {
			return nil, fmt.Errorf("held call %s: status %d, %v", id, a.code, a.err)
		}
		lat = append(lat, a.at.Sub(approved))
	}
	slices.Sort(lat)
	return lat, nil
}

// newestWaiting returns the call that entered waiting last, read from
// the state indexes of every shard.
func (s *capacityStack) newestWaiting(ctx context.Context) (string, error) {
	keys := []string{"{" + capacityPrefix + "}:state:waiting"}
	if len(s.nodes) > 1 {
		keys = keys[:0]
		for i := range 16 {
			keys = append(keys, fmt.Sprintf("{%s:%d}:state:waiting", capacityPrefix, i))
		}
	}
	id, best := "", -1.0
	for _, k := range keys {
		zs, err := s.redis.ZRevRangeWithScores(ctx, k, 0, 0).Result()
		if err != nil {
			return "", err
		}
		if len(zs) == 1 && zs[0].Score > best {
			id, best = zs[0].Member.(string), zs[0].Score
		}
	}
	return id, nil
}

// heldCall waits for the call parked after prev, as an approver learns
// of it from a notification.
func (s *capacityStack) heldCall(ctx context.Context, prev string) (string, error) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Millisecond) {
		id, err := s.newestWaiting(ctx)
		if err != nil {
			return "", err
		}
		if id != "" && id != prev {
			return id, nil
		}
	}
	return "", errors.New("the held call was not parked within 10 s")
}

// sweep approves calls nobody holds, 16 at a time over the replicas, and
// measures until the upstream has executed them all.
func (s *capacityStack) sweep(ctx context.Context, ids []string) (float64, time.Duration, error) {
	c := abuseClient(16)
	base, err := upstreamCount(c, s.upstream)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				if err := s.decide(c, s.replicas[i%len(s.replicas)], ids[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	for deadline := time.Now().Add(5 * time.Minute); ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		n, err := upstreamCount(c, s.upstream)
		if err != nil {
			return 0, 0, err
		}
		if n-base >= int64(len(ids)) {
			took := time.Since(start)
			return float64(len(ids)) / took.Seconds(), took, nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("the sweepers executed %d of %d approved calls in 5 minutes", n-base, len(ids))
		}
	}
	return 0, 0, ctx.Err()
}

func upstreamCount(c *http.Client, upstream string) (int64, error) {
	res, err := c.Get(upstream + "/_bench/count")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var v struct {
		Count int64 `json:"count"`
	}
	return v.Count, json.NewDecoder(res.Body).Decode(&v)
}
