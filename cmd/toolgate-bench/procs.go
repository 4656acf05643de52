package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one server process the harness started. Each runs in its own
// process group so that stopping it also stops anything it started.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string // its stderr and stdout, shown when it fails to start
}

// procs is every process the harness started; stopAll ends them all, on
// a normal exit, an error and Ctrl-C alike.
var procs struct {
	mu   sync.Mutex
	list []*proc
}

// pinning says which cores the servers and the load generator use; empty
// when taskset or a second core is missing.
type pinning struct{ servers, load string }

func (p pinning) wrap(cpu string, argv []string) []string {
	if cpu == "" {
		return argv
	}
	return append([]string{"taskset", "-c", cpu}, argv...)
}

// startProc starts argv (pinned to cpu when given) with its output in a
// log file of dir. taskset execs the program, so the pid is the server's.
func startProc(dir, name, cpu string, argv []string, env []string) (*proc, error) {
	argv = pinning{}.wrap(cpu, argv)
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath}
	procs.mu.Lock()
	procs.list = append(procs.list, p)
	procs.mu.Unlock()
	go func() { _ = cmd.Wait() }()
	return p, nil
}

// self runs this harness's own binary with a hidden subcommand.
func self(sub string, args ...string) []string {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return append([]string{exe, sub}, args...)
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// tail is the end of the process's log, for error messages.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// stopAll ends every started process group: SIGTERM, then SIGKILL for
// whatever is left after a grace period.
func stopAll() {
	procs.mu.Lock()
	list := procs.list
	procs.list = nil
	procs.mu.Unlock()
	for _, p := range list {
		_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, p := range list {
		for time.Now().Before(deadline) && syscall.Kill(p.pid(), 0) == nil && !exited(p.pid()) {
			time.Sleep(20 * time.Millisecond)
		}
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	}
}

// exited reports whether pid is gone or a zombie waiting to be reaped.
func exited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := statFields(string(b))
	return len(f) == 0 || f[0] == "Z"
}

// statFields are the fields of /proc/<pid>/stat after the command name
// (which may hold spaces); f[0] is the state, field 3 of proc(5).
func statFields(s string) []string {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// clockTick is USER_HZ, the unit of utime and stime in /proc (100 on
// every Linux architecture Go supports).
const clockTick = 100

// cpuTime is the CPU a process used so far, all threads, user + system.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	f := statFields(string(b))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	st, err2 := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// rssKiB is the process's resident set size (VmRSS).
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// freePorts asks the kernel for n free loopback ports, all distinct: each
// is held open until all are taken (a port closed at once may be handed
// out again by the next ask, and two servers would then share it). The
// tests' testkit.FreeAddrs does the same; this command does not import
// testkit, which is built on package testing.
func freePorts(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// namedPorts is freePorts with a name for each port.
func namedPorts(names ...string) (map[string]string, error) {
	addrs, err := freePorts(len(names))
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(names))
	for i, n := range names {
		m[n] = addrs[i]
	}
	return m, nil
}

// waitReady polls url until it answers (any status below 500: a proxy
// may refuse the probe itself), the process dies or the timeout passes.
func waitReady(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode < http.StatusInternalServerError {
				return nil
			}
		}
		if exited(p.pid()) {
			return fmt.Errorf("%s exited before it was ready:\n%s", p.name, p.tail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s after %s:\n%s", p.name, url, timeout, p.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
