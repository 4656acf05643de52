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
	primary, _ = RedisServer(tb, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(primary)
	// No diskless-sync delay on either: after a failover the replica is
	// the primary that syncs the other.
	replica, _ = RedisServer(tb, "--replicaof", host, port, "--repl-diskless-sync-delay", "0")
	waitRedis(tb, "the replica to be in sync", primary, func(c *respConn) bool {
		return strings.Contains(c.do(tb, "INFO", "replication"), "state=online")
	})
	master = "toolgate-test"
	for range 3 {
		dir := tb.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("sentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\n",
			master, host, port, master, master)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			tb.Fatal(err)
		}
		addr, _ := startRedis(tb, []string{conf, "--sentinel"}, nil)
		sentinels = append(sentinels, addr)
	}
	for _, s := range sentinels {
		waitRedis(tb, "a sentinel to know the master", s, func(c *respConn) bool {
			return strings.Contains(c.do(tb, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", master), port)
		})
	}
	return master, sentinels, primary, replica
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

// startRedis runs redis-server with first (a config file, a mode), then
// the port, address and directory of its own, then args.
func startRedis(tb testing.TB, first, args []string) (addr string, stop func()) {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(tb, "redis-server not found")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	// Its own directory: a replica's full sync writes an RDB file there,
	// a cluster node its nodes.conf.
	all := append(append([]string(nil), first...), "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", tb.TempDir())
	srv := exec.Command(bin, append(all, args...)...)
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	done := false
	stop = func() {
		if !done {
			done = true
			_ = srv.Process.Kill()
			_ = srv.Wait()
		}
	}
	tb.Cleanup(stop)
	waitRedis(tb, "redis-server to start", addr, func(*respConn) bool { return true })
	return addr, stop
}

// waitRedis waits up to 10 s for cond on a connection to addr.
func waitRedis(tb testing.TB, what, addr string, cond func(*respConn) bool) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			ok := cond(&respConn{c})
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
type respConn struct{ c net.Conn }

func (r *respConn) do(tb testing.TB, args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_ = r.c.SetDeadline(time.Now().Add(time.Second))
	if _, err := r.c.Write([]byte(b.String())); err != nil {
		return ""
	}
	buf := make([]byte, 64<<10)
	n, _ := r.c.Read(buf)
	return string(buf[:n])
}
