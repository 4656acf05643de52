package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestQueueBoundedByBytes: against a target that never answers, the
// events of calls with large arguments (one agent parking and cancelling
// in a loop, half a megabyte each) fill MaxQueuedBytes long before the
// 1,024 places of the queue; past it they are dropped, as for a full
// queue. Bounded by count alone, the notifier held half a gigabyte.
func TestQueueBoundedByBytes(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	var res results
	n := start(t, Options{Targets: []Target{{URL: srv.URL + "/hook"}}, OnDelivery: res.record, MaxElapsed: time.Minute})

	const argBytes = 512 << 10
	args := append(append([]byte(`{"content":"`), bytes.Repeat([]byte("a"), argBytes)...), `"}`...)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const events = 1100
	for i := range events {
		e := requested(fmt.Sprintf("call-%04d", i))
		e.Arguments = args
		n.Notify(e)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if most := MaxQueuedBytes / argBytes; n.Pending() > most || res.count(ResultDropped) < events-most {
		t.Errorf("%d events pending, %d dropped; want at most %d pending", n.Pending(), res.count(ResultDropped), most)
	}
	if held > 2*MaxQueuedBytes {
		t.Errorf("the queues hold %d MiB, want about MaxQueuedBytes (%d MiB)", held>>20, MaxQueuedBytes>>20)
	}
	runtime.KeepAlive(n)
}

// TestEventSizeCountsWhatIsQueued: an event's headers and other params
// (up to 16 KiB each in a call's record) and its target (an argument's
// value) count against MaxQueuedBytes as its arguments do.
func TestEventSizeCountsWhatIsQueued(t *testing.T) {
	e := Event{Type: TypeRequested, CallID: "c1", Arguments: json.RawMessage(`{}`), Headers: &Headers{}}
	for i := range 16 {
		e.Headers.List = append(e.Headers.List, Header{Name: fmt.Sprintf("X-Pad-%d", i), Value: strings.Repeat("v", 1000)})
	}
	e.OtherParams = &Params{List: []Param{{Name: "_meta", Value: `"` + strings.Repeat("m", 16000) + `"`}}}
	if got := eventSize(&e); got < 32000 {
		t.Errorf("eventSize = %d bytes for an event holding ~32 KB of headers and params", got)
	}
	t2 := Event{Type: TypeRequested, CallID: "c2", ToolTarget: strings.Repeat("a/", 100000)}
	if got := eventSize(&t2); got < 200000 {
		t.Errorf("eventSize = %d bytes for an event holding a 200 KB target", got)
	}
}
