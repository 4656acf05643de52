package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RedisServer starts a redis-server of the test's own on a free loopback
// port, with no persistence and the given extra arguments, and returns
// its address and a stop function (which kills it; also run at cleanup).
// For tests that stop, pause or replicate a Redis, which they must not do
// to a shared one. Without redis-server the test is Unavailable.
func RedisServer(tb testing.TB, args ...string) (addr string, stop func()) {
	tb.Helper()
	return startRedis(tb, nil, append([]string{"--save", "", "--appendonly", "no"}, args...))
}

// RedisSentinel starts a Sentinel set of the test's own: a primary, one
// replica in sync with it, and three sentinels that monitor the primary
// as master (quorum 2). It returns the master name and the sentinels'
// addresses (redis.FailoverOptions), and the primary's and the replica's.
func RedisSentinel(tb testing.TB) (master string, sentinels []string, primary, replica string) {
	tb.Helper()
	s := NewSentinelSet(tb)
	return s.Master, s.Sentinels, s.Nodes[0].Addr, s.Nodes[1].Addr
}

// SentinelSet is a Sentinel set of the test's own (NewSentinelSet).
type SentinelSet struct {
	Master    string   // the name the sentinels monitor
	Sentinels []string // the sentinels' addresses
	// Nodes are the Redis servers: Nodes[0] started as the primary,
	// Nodes[1] as its replica; which is which changes with failovers.
	Nodes [2]*RedisProc
}

// NewSentinelSet starts a primary with args, one replica of it with the
// same args, in sync, and three sentinels that monitor the primary as
// master (quorum 2, down after 1 s, failover timeout 5 s). Each node reads
// its role from a config file of its own, which the sentinels rewrite
// (CONFIG REWRITE) when they change it: a node killed and started again
// comes back with the role they gave it, as in a real deployment.
func NewSentinelSet(tb testing.TB, args ...string) *SentinelSet {
	tb.Helper()
	// No diskless-sync delay on either: after a failover the replica is
	// the primary that syncs the other.
	args = append([]string{"--save", "", "--repl-diskless-sync-delay", "0"}, args...)
	conf := func(body string) []string {
		p := filepath.Join(tb.TempDir(), "redis.conf")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			tb.Fatal(err)
		}
		return []string{p}
	}
	primary := NewRedisProc(tb, conf(""), args...)
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica := NewRedisProc(tb, conf("replicaof "+host+" "+port+"\n"), args...)
	waitRedis(tb, "the replica to be in sync", primary.Addr, func(c *respConn) bool {
		return strings.Contains(c.do(tb, "INFO", "replication"), "state=online")
	})
	s := &SentinelSet{Master: "toolgate-test", Nodes: [2]*RedisProc{primary, replica}}
	for range 3 {
		dir := tb.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("sentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\n",
			s.Master, host, port, s.Master, s.Master)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			tb.Fatal(err)
		}
		addr, _ := startRedis(tb, []string{conf, "--sentinel"}, nil)
		s.Sentinels = append(s.Sentinels, addr)
	}
	for _, a := range s.Sentinels {
		waitRedis(tb, "a sentinel to know the master", a, func(c *respConn) bool {
			return strings.Contains(c.do(tb, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.Master), port)
		})
	}
	return s
}

// RedisCluster starts a Redis Cluster of the test's own: three primaries
// (no replicas) sharing the slots, created with redis-cli --cluster
// create. It returns their addresses.
func RedisCluster(tb testing.TB) []string {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Unavailable(tb, "redis-cli not found")
	}
	var nodes []string
	for range 3 {
		addr, _ := RedisServer(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		nodes = append(nodes, addr)
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, nodes...), "--cluster-yes")...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range nodes {
		waitRedis(tb, "the cluster to be ok", n, func(c *respConn) bool {
			return strings.Contains(c.do(tb, "CLUSTER", "INFO"), "cluster_state:ok")
		})
	}
	return nodes
}

// NewClusterSet starts a Redis Cluster of the test's own: three primaries
// sharing the slots, each with one replica in sync, every node with args
// and a node timeout of 2 s. A node keeps its role in its nodes.conf: one
// killed and started again rejoins as the cluster has it now.
func NewClusterSet(tb testing.TB, args ...string) []*RedisProc {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Unavailable(tb, "redis-cli not found")
	}
	args = append([]string{
		"--save", "", "--repl-diskless-sync-delay", "0", "--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
	}, args...)
	var nodes []*RedisProc
	var addrs []string
	for range 6 {
		n := NewRedisProc(tb, nil, args...)
		nodes = append(nodes, n)
		addrs = append(addrs, n.Addr)
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range nodes {
		waitRedis(tb, "the cluster to be ok", n.Addr, func(c *respConn) bool {
			return strings.Contains(c.do(tb, "CLUSTER", "INFO"), "cluster_state:ok")
		})
		waitRedis(tb, "every primary's replica in sync", n.Addr, func(c *respConn) bool {
			info := c.do(tb, "INFO", "replication")
			return !strings.Contains(info, "role:master") || strings.Contains(info, "state=online")
		})
	}
	return nodes
}

// startRedis runs redis-server with first (a config file, a mode), then
// the port, address and directory of its own, then args.
func startRedis(tb testing.TB, first, args []string) (addr string, stop func()) {
	tb.Helper()
	p := NewRedisProc(tb, first, args...)
	return p.Addr, p.Kill
}

// waitRedis waits up to 10 s for cond on a connection to addr.
func waitRedis(tb testing.TB, what, addr string, cond func(*respConn) bool) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			ok := cond(&respConn{c: c})
			c.Close()
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("waiting for %s (%s): gave up after 10 s", what, addr)
		}
	}
}

// respConn sends one command and reads its answer as text: enough to
// wait for a server's state without a client library in testkit.
type respConn struct {
	c    net.Conn
	wait time.Duration // for the answer; 0 is a second
}

func (r *respConn) do(tb testing.TB, args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	wait := r.wait
	if wait == 0 {
		wait = time.Second
	}
	_ = r.c.SetDeadline(time.Now().Add(wait))
	if _, err := r.c.Write([]byte(b.String())); err != nil {
		return ""
	}
	buf := make([]byte, 64<<10)
	n, _ := r.c.Read(buf)
	return string(buf[:n])
}
