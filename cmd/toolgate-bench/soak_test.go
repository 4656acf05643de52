package main

import (
	"strings"
	"testing"
)

// TestLedgerViolations: the soak run's check finds a call that ran twice,
// one that should never have run, an allowed call that never ran, and a
// call no agent made; a call of unknown outcome may have run once.
func TestLedgerViolations(t *testing.T) {
	l := &ledger{m: map[string]expectation{
		"ok-once": once, "ok-never": never, "ok-maybe": atMostOnce, "ok-maybe-not": atMostOnce,
		"twice": once, "lost": once, "rejected-ran": never, "maybe-twice": atMostOnce,
	}}
	ran := map[string]int{"ok-once": 1, "ok-maybe": 1, "twice": 2, "rejected-ran": 1, "maybe-twice": 2, "stranger": 1}
	n, shown := l.violations(ran, 10)
	if n != 5 {
		t.Fatalf("violations = %d, want 5: %v", n, shown)
	}
	for _, want := range []string{"twice: ran 2", "lost: ran 0", "rejected-ran: ran 1", "maybe-twice: ran 2", "stranger: ran 1 times, and no agent"} {
		if !strings.Contains(strings.Join(shown, "\n"), want) {
			t.Errorf("no %q in %v", want, shown)
		}
	}
	if n, shown := l.violations(ran, 2); n != 5 || len(shown) != 2 {
		t.Errorf("with max 2: %d violations, %d shown", n, len(shown))
	}
}
