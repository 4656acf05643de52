package main

import (
	"strings"
	"testing"
	"time"
)

// TestHistoryCheck: the checker's judgement finds each kind of anomaly in
// a history made up for it, and nothing in calls that ended as they may.
func TestHistoryCheck(t *testing.T) {
	h := newHistory()
	t0 := time.Now()
	set := func(id string, c callRecord) {
		c.id, c.firstAt = id, t0
		h.calls[id] = &c
	}
	set("ok-executed", callRecord{parkAck: true, approve: true, ackedAs: "approved", final: "executed", execs: 1})
	set("ok-unknown", callRecord{parkAck: true, approve: true, ackedAs: "approved", final: "unknown"})
	set("ok-rejected", callRecord{parkAck: true, ackedAs: "rejected", refused: true, final: "rejected"})
	set("ok-never-stored", callRecord{final: "gone"})
	set("twice", callRecord{approve: true, final: "executed", execs: 2})
	set("unapproved", callRecord{final: "executed", execs: 1})
	set("after-refusal", callRecord{approve: true, refused: true, final: "executed", execs: 1})
	set("ran-then-expired", callRecord{approve: true, final: "expired", execs: 1})
	set("executed-no-run", callRecord{approve: true, final: "executed"})
	set("still-waiting", callRecord{parkAck: true, final: "waiting"})
	set("lost-park", callRecord{parkAck: true, final: "gone"})
	// Expired after an acknowledged approval while the store took writes
	// (a request decided every 4 s): an anomaly. The same during an
	// outage of nearly its whole window (writes only in its first 2 s):
	// explained.
	set("approval-expired", callRecord{parkAck: true, approve: true, ackedAs: "approved", ackedAt: t0, final: "expired"})
	for i := range 10 {
		h.ops = append(h.ops, opRecord{at: t0.Add(time.Duration(i) * 4 * time.Second), decided: true})
	}
	tOut := t0.Add(time.Hour)
	set("ok-expired-in-outage", callRecord{parkAck: true, approve: true, ackedAs: "approved", ackedAt: tOut, final: "expired"})
	h.ops = append(h.ops, opRecord{at: tOut.Add(2 * time.Second), decided: true}, opRecord{at: tOut.Add(31 * time.Second), decided: true})

	bad := strings.Join(h.check(), "\n")
	for _, want := range []string{
		"twice: executed 2 times", "unapproved: executed without an approval",
		"after-refusal: executed after an acknowledged rejection", "ran-then-expired: executed, yet it ended expired",
		"executed-no-run: ended executed with no execution", "still-waiting: still waiting",
		"lost-park: acknowledged, then gone", "approval-expired: an acknowledged approval ended expired; in its 30s approved window no agent request was decided for 4s",
	} {
		if !strings.Contains(bad, want) {
			t.Errorf("no %q among the anomalies:\n%s", want, bad)
		}
	}
	if strings.Contains(bad, "ok-") {
		t.Errorf("a call that ended as it may is an anomaly:\n%s", bad)
	}

	// A restart without data explains a call gone, never a second run.
	h.faults = append(h.faults, faultRecord{kind: "redis-restart-empty", start: t0, end: t0.Add(time.Second)})
	bad = strings.Join(h.check(), "\n")
	if strings.Contains(bad, "lost-park") || !strings.Contains(bad, "twice: executed 2 times") {
		t.Errorf("after a wipe:\n%s", bad)
	}
}
