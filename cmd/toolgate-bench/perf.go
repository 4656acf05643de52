package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// startPerf records a CPU profile of pid with Linux perf until the
// returned function is called. toolgate serves no net/http/pprof and has
// no profiling switch, so a sampling profiler from outside is the way to
// see where its CPU goes (`perf report -i FILE`; Go binaries keep their
// symbols).
func startPerf(file string, pid int) (func() error, error) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		return nil, errors.New("-cpuprofile needs perf (Debian: apt-get install linux-perf)")
	}
	cmd := exec.Command(perf, "record", "-q", "-F", "999", "-g", "-p", strconv.Itoa(pid), "-o", file)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	time.Sleep(200 * time.Millisecond) // perf attaches before the load starts
	return func() error {
		_ = cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		// perf writes its file on SIGINT and may then report the signal
		// as its exit status.
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("perf record: %w", err)
		}
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("perf record wrote no profile: %w", err)
		}
		return nil
	}, nil
}
