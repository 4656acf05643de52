// Package testkit holds the helpers toolgate's tests share: a settable
// clock, a log buffer safe for concurrent writers, a recording upstream,
// test signing keys and tokens, dependency rules, polling, and the rule for
// services a test cannot reach. Only tests import it.
package testkit

import (
	"os"
	"testing"
	"time"
)

// Unavailable reports that something the test needs (a Redis, a tool) is
// not there. It skips the test, except under CI=true, where every test must
// run and a missing service fails the test instead of letting it pass
// silently.
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("CI=true: "+format, args...)
	}
	tb.Skipf(format, args...)
}

// WaitFor polls cond until it holds, and fails the test if it does not
// within 5 seconds.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	WaitForWithin(tb, 5*time.Second, what, cond)
}

// WaitForWithin is WaitFor for up to d: for what moves megabytes, which
// takes longer under the race detector on a loaded machine.
func WaitForWithin(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
