package main

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestReannounceNeverQueued: a call whose event no queue can ever take
// (its arguments alone pass the 64 MiB a target may queue, which a
// max_body_bytes that large allows) is given up, once, and the calls
// dropped after it are announced again as the queue has room: listed
// first and alone in every round, it held back every call behind it.
func TestReannounceNeverQueued(t *testing.T) {
	tg, ev, open, park := announcing(t, 4, "limits: {max_body_bytes: 104857600, max_body_bytes_total: 1073741824}\n")
	small := []string{park("0")}
	testkit.WaitFor(t, "the first event at the receiver", func() bool { return len(ev.Requests()) == 1 })
	huge := park(strings.Repeat("x", 65<<20))
	eventually(t, tg.admin, "toolgate_notifications_total", 1, "format", "cloudevents", "result", "dropped")
	for i := range 8 { // the queue holds 4: the others are dropped
		small = append(small, park(strings.Repeat("s", i+1)))
	}
	open()
	testkit.WaitForWithin(t, 2*time.Minute, "every small call announced", func() bool { return allRequested(t, ev, small) })
	time.Sleep(reannounceAfter + 10*reannounceEvery)
	if !strings.Contains(tg.stderr.String(), "notification larger than a target may queue") {
		t.Error("the call no queue takes was not reported")
	}
	if allRequested(t, ev, []string{huge}) {
		t.Error("the call no queue takes reached the receiver")
	}
}
