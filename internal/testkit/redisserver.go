package testkit

import (
	"fmt"
	"net"
	"os/exec"
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
	// Its own directory: a replica's full sync writes an RDB file there.
	srv := exec.Command(bin, append([]string{"--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--save", "", "--appendonly", "no", "--dir", tb.TempDir()}, args...)...)
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
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, stop
		}
		if time.Now().After(deadline) {
			tb.Fatal("redis-server did not start")
		}
	}
}
