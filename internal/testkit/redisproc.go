package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisProc is a redis-server (or sentinel) process of the test's own on a
// fixed loopback port, which a test can kill, pause and start again: it
// keeps its port and its directory (its AOF, RDB and config files) across
// restarts unless Wipe empties it. It is killed at cleanup.
type RedisProc struct {
	Addr string

	tb   testing.TB
	bin  string
	args []string
	dir  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// NewRedisProc prepares a redis-server with first (a config file, a mode),
// then its port, address and directory, then args, and starts it. Without
// redis-server the test is Unavailable.
func NewRedisProc(tb testing.TB, first []string, args ...string) *RedisProc {
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
	p := &RedisProc{Addr: fmt.Sprintf("127.0.0.1:%d", port), tb: tb, bin: bin, dir: tb.TempDir()}
	p.args = append(append(append([]string(nil), first...), "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", p.dir), args...)
	tb.Cleanup(p.Kill)
	p.Start()
	return p
}

// Dir is the process' own directory.
func (p *RedisProc) Dir() string { return p.dir }

// Start starts the process if it is not running, and waits until it
// answers.
func (p *RedisProc) Start() {
	p.tb.Helper()
	p.mu.Lock()
	if p.cmd == nil {
		cmd := exec.Command(p.bin, p.args...)
		cmd.SysProcAttr = ChildAttr()
		if err := cmd.Start(); err != nil {
			p.mu.Unlock()
			p.tb.Fatal(err)
		}
		p.cmd = cmd
	}
	p.mu.Unlock()
	waitRedis(p.tb, "redis-server to start", p.Addr, func(*respConn) bool { return true })
}

// Kill kills the process with SIGKILL (nothing is flushed) and reaps it.
func (p *RedisProc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused process dies as well
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// Pause stops the process with SIGSTOP: its connections stay open and
// unanswered, as a stalled server's would.
func (p *RedisProc) Pause() { p.signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p *RedisProc) Resume() { p.signal(syscall.SIGCONT) }

func (p *RedisProc) signal(sig os.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Wipe removes the data files (AOF, RDB) of a killed process, so that it
// starts again empty, as a server without persistence does; its config
// files (a cluster node's nodes.conf) stay.
func (p *RedisProc) Wipe() {
	p.tb.Helper()
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		p.tb.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "sentinel.conf" || e.Name() == "redis.conf" || e.Name() == "nodes.conf" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(p.dir, e.Name())); err != nil {
			p.tb.Fatal(err)
		}
	}
}

// Do sends one command and returns the reply as raw RESP text, or "" when
// the process does not answer within a second: enough to read a server's
// state without a client library.
func (p *RedisProc) Do(args ...string) string { return Do(p.Addr, args...) }

// Do sends one command to the Redis at addr (see RedisProc.Do).
func Do(addr string, args ...string) string { return DoWithin(addr, time.Second, args...) }

// DoWithin is Do waiting up to wait for the answer, for a command that
// takes its time (MIGRATE waits for the node it moves keys to).
func DoWithin(addr string, wait time.Duration, args ...string) string {
	c, err := net.DialTimeout("tcp", addr, 500e6)
	if err != nil {
		return ""
	}
	defer c.Close()
	return (&respConn{c: c, wait: wait}).do(nil, args...)
}
