// Command toolgate-bench measures toolgate side by side with the floor and
// with the architecture it replaces, in one command, on loopback:
//
//	go run ./cmd/toolgate-bench            # 5 interleaved repetitions of 5 s runs, medians
//	go run ./cmd/toolgate-bench -quick     # 1 s runs, once (CI smoke)
//	go run ./cmd/toolgate-bench -rss       # 60 s at 1,000 req/s, toolgate's RSS every second
//	go run ./cmd/toolgate-bench -abuse     # an ask flood and stalled bodies against one toolgate
//	go run ./cmd/toolgate-bench -mcp       # MCP tools/call against a real MCP server: JSON, SSE, stateless
//	toolgate-bench split -cpu 63.7,85.4 a.perf b.perf   # -cpuprofile's profiles side by side, by category
//
// It starts a recording upstream, a bare httputil.ReverseProxy, toolgate
// (allow, deny, ask with an instant approver, MCP tools/call; parked calls
// in memory and in Redis) and a proxy asking a separate OPA server over
// HTTP, each its own process pinned to one core; drives them with wrk
// (saturation) and vegeta (fixed rate) on the other core; reads each
// server's CPU from /proc; and prints Markdown tables.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	duration   time.Duration
	reps       int
	conns      []int
	rate       int
	rateDur    time.Duration
	quick      bool
	rss        bool
	rssDur     time.Duration
	abuse      bool
	mcp        bool
	capacity   capacityParams
	capacityOn bool
	soak       soakParams
	soakOn     bool
	// rules is the rules table toolgate and the external OPA decide
	// with: table, then -rows' other rows.
	rules      []rule
	redis      string
	redisSet   bool // -redis given on the command line
	redisOwn   bool // redis is the run's own, on the load core (-redis own)
	toolgate   string
	only       string
	cpuprofile string
	// baseline is a second toolgate binary whose rows run beside
	// toolgate's own, so that a change is measured against the build
	// before it under the same noise.
	baseline   string
	profileRow string
	keep       bool
	dir        string
	noPin      bool
}

func main() {
	if len(os.Args) > 1 {
		if run, ok := hidden[os.Args[1]]; ok {
			if err := run(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "toolgate-bench %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// hidden are the servers the harness starts by re-executing itself.
var hidden = map[string]func([]string) error{
	"split":     runSplit, // not a server: splits -cpuprofile's profiles by category (split.go)
	"upstream":  runUpstream,
	"bare":      runBare,
	"bareask":   runBareAsk,
	"extopa":    runExtOPA,
	"approver":  runApprover,
	"mcpserver": runMCPServer,
}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("toolgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each saturation run (whole seconds)")
	fs.IntVar(&o.reps, "reps", 5, "interleaved repetitions; the tables show medians")
	conns := fs.String("conns", "1,8,64", "wrk connection counts (concurrency), comma-separated (-mcp: 1,16)")
	fs.IntVar(&o.rate, "rate", 1000, "requests per second of the fixed-rate runs (0: none)")
	fs.DurationVar(&o.rateDur, "rate-duration", 5*time.Second, "length of each fixed-rate run")
	fs.BoolVar(&o.quick, "quick", false, "smoke: 1 s runs, 1 repetition, 8 connections")
	fs.BoolVar(&o.rss, "rss", false, "only the memory run: toolgate's RSS every second at -rate for -rss-duration")
	fs.DurationVar(&o.rssDur, "rss-duration", 60*time.Second, "length of the -rss run")
	fs.BoolVar(&o.abuse, "abuse", false, "only the abuse run: an ask flood from one principal and stalled request bodies (memory store; Redis with -redis)")
	fs.BoolVar(&o.mcp, "mcp", false, "only the MCP rows: tools/call to a go-sdk MCP server (JSON, SSE, stateless) direct, through a bare proxy and through toolgate (rules table + a Rego rule)")
	fs.BoolVar(&o.capacityOn, "capacity", false, "only the capacity run: many calls parked through many replicas on a Redis of the run's own, then memory, RSS, approval latency and sweeper throughput")
	fs.IntVar(&o.capacity.calls, "capacity-calls", 100000, "calls the -capacity run parks")
	fs.IntVar(&o.capacity.replicas, "capacity-replicas", 10, "toolgate replicas of the -capacity run")
	fs.IntVar(&o.capacity.principals, "capacity-principals", 50, "agents (API keys) the -capacity run parks as")
	fs.IntVar(&o.capacity.rounds, "capacity-rounds", 200, "held calls approved on another replica in the -capacity run")
	fs.IntVar(&o.capacity.sweep, "capacity-sweep", 5000, "parked calls the -capacity run approves for the sweepers to execute")
	fs.BoolVar(&o.capacity.cluster, "capacity-cluster", false, "run -capacity on a three-primary Redis Cluster instead of one Redis")
	fs.StringVar(&o.capacity.redisArgs, "capacity-redis-args", "", `more redis-server arguments for the -capacity run's Redis (e.g. "--zset-max-listpack-entries 2048")`)
	fs.BoolVar(&o.soakOn, "soak", false, "only the soak run: allowed, denied, approved, rejected, expired and retried calls from many agents through two replicas on a Redis of the run's own, checked call by call, with resources watched")
	fs.DurationVar(&o.soak.duration, "soak-duration", 5*time.Minute, "length of the -soak run's load (-quick: 20 s)")
	fs.IntVar(&o.soak.agents, "soak-agents", 12, "agents (API keys) of the -soak run, each one call at a time")
	fs.StringVar(&o.redis, "redis", ownRedis, `Redis for the ask (Redis) rows: "own" starts a redis-server of the run's own on the load generator's core; an address uses that Redis where it runs; empty leaves the rows out`)
	fs.StringVar(&o.toolgate, "toolgate", "", "a toolgate binary to measure (default: go build ./cmd/toolgate of this module)")
	fs.StringVar(&o.baseline, "baseline", "", "another toolgate binary (an earlier build) measured in the same run: rows \"baseline allow\" and \"baseline ask (memory)\", interleaved with the others repetition by repetition")
	fs.StringVar(&o.only, "only", "", "comma-separated row names to run (e.g. \"bare proxy,toolgate allow\")")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a perf profile of toolgate during its allow runs to this file (needs perf)")
	fs.StringVar(&o.profileRow, "cpuprofile-row", "", "the row -cpuprofile records (default: toolgate allow; with -mcp, MCP toolgate (json))")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (configs, logs)")
	fs.BoolVar(&o.noPin, "no-pin", false, "do not pin servers and load generator to separate cores")
	rows := fs.Int("rows", defaultRows, fmt.Sprintf("rows of the rules table: the %d the calls meet, then rows for other tools", len(table)))
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *rows < len(table) {
		return nil, fmt.Errorf("-rows: at least %d, the rows the harness's calls meet", len(table))
	}
	o.rules = withRows(table, *rows)
	connsSet, soakSet := false, false
	fs.Visit(func(f *flag.Flag) {
		o.redisSet = o.redisSet || f.Name == "redis"
		connsSet = connsSet || f.Name == "conns"
		soakSet = soakSet || f.Name == "soak-duration"
	})
	if o.mcp && !connsSet {
		*conns = "1,16"
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.quick {
		o.duration, o.reps, *conns, o.rateDur = time.Second, 1, "8", time.Second
		if !soakSet {
			o.soak.duration = 20 * time.Second
		}
	}
	for c := range strings.SplitSeq(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-conns: %q is not a positive number", c)
		}
		o.conns = append(o.conns, n)
	}
	if o.reps < 1 || o.duration < time.Second {
		return nil, errors.New("-reps must be at least 1 and -duration at least 1s")
	}
	return o, nil
}

// pinEnv marks the re-executed harness that already runs on the load
// generator's core.
const pinEnv = "TGBENCH_PINNED" // not TOOLGATE_*: toolgate refuses unknown keys there

// pin decides the cores. With taskset and two or more cores, the harness
// re-executes itself on core 0 (it and wrk generate the load) and starts
// every server on core 1.
func pin(o *options, stderr io.Writer) (pinning, error) {
	if os.Getenv(pinEnv) == "1" {
		return pinning{servers: "1", load: "0"}, nil
	}
	if o.noPin {
		return pinning{}, nil
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		fmt.Fprintln(stderr, "warning: taskset not found: servers and load generator share all cores (numbers are noisier)")
		return pinning{}, nil
	}
	if runtime.NumCPU() < 2 {
		fmt.Fprintln(stderr, "warning: fewer than 2 cores: servers and load generator share one core")
		return pinning{}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return pinning{}, err
	}
	taskset, _ := exec.LookPath("taskset")
	env := append(os.Environ(), pinEnv+"=1")
	return pinning{}, syscall.Exec(taskset, append([]string{"taskset", "-c", "0", exe}, os.Args[1:]...), env)
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "toolgate-bench:", err)
		return 2
	}
	pins, err := pin(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "toolgate-bench:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer stopAll()
	if err := bench(ctx, o, pins, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "toolgate-bench:", err)
		return 1
	}
	return 0
}

func bench(ctx context.Context, o *options, pins pinning, stdout, stderr io.Writer) error {
	if _, err := exec.LookPath("wrk"); err != nil && !o.rss && !o.abuse && !o.capacityOn && !o.soakOn {
		return errors.New("wrk not found: install it (Debian: apt-get install wrk)")
	}
	dir, err := os.MkdirTemp("", "toolgate-bench-")
	if err != nil {
		return err
	}
	o.dir = dir
	if o.keep {
		fmt.Fprintln(stderr, "work directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if o.toolgate == "" {
		fmt.Fprintln(stderr, "building toolgate…")
		if o.toolgate, err = buildToolgate(ctx, dir); err != nil {
			return err
		}
	}
	if o.redis == ownRedis && !o.capacityOn && !o.soakOn && !o.mcp && (!o.abuse || o.redisSet) {
		if o.redis, err = startOwnRedis(ctx, dir, pins.load, stderr); err != nil {
			return err
		}
		o.redisOwn = o.redis != ""
	}
	if o.abuse {
		return abuseRun(ctx, o, pins, stdout, stderr)
	}
	if o.capacityOn {
		return capacityRun(ctx, o, pins, stdout, stderr)
	}
	if o.soakOn {
		return soakRun(ctx, o, pins, stdout)
	}
	if o.mcp {
		return mcpRun(ctx, o, pins, stdout, stderr)
	}
	if o.redis != "" && !redisAnswers(o.redis) {
		fmt.Fprintf(stderr, "warning: no Redis answers at %s: the ask (Redis) rows are left out\n", o.redis)
		o.redis = ""
	}
	s, err := startStack(ctx, o, pins)
	if err != nil {
		return err
	}
	targets := s.targets(o)
	if err := s.check(ctx, targets); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "toolgate-bench: %s; servers on cpu %s, load on cpu %s; %d-byte POST bodies; %s\n\n",
		machine(), orAll(pins.servers), orAll(pins.load), bodySize, o.redisWhere())
	if o.rss {
		return s.rssRun(ctx, o, stdout)
	}
	sat, err := s.saturation(ctx, o, targets, stderr)
	if err != nil {
		return err
	}
	report(stdout, o, targets, sat)
	var rates map[*target][]*rateResult
	if o.rate > 0 {
		if rates, err = s.fixedRate(ctx, o, targets, stderr); err != nil {
			return err
		}
		reportRate(stdout, o, targets, rates)
	}
	return failedChecks(sat, rates)
}

// mcpRun measures the -mcp rows: saturation only (a fixed-rate run would
// send one body, and MCP calls carry ids and sessions).
func mcpRun(ctx context.Context, o *options, pins pinning, stdout, stderr io.Writer) error {
	s, err := startMCPStack(ctx, o, pins)
	if err != nil {
		return err
	}
	targets := s.mcpTargets(o)
	if err := s.check(ctx, targets); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "toolgate-bench -mcp: %s; servers on cpu %s, load on cpu %s; %d-byte tools/call bodies\n\n",
		machine(), orAll(pins.servers), orAll(pins.load), mcpBodySize)
	sat, err := s.saturation(ctx, o, targets, stderr)
	if err != nil {
		return err
	}
	report(stdout, o, targets, sat)
	return failedChecks(sat, nil)
}

func orAll(cpu string) string {
	if cpu == "" {
		return "any"
	}
	return cpu
}
