package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/testkit"
)

func TestNewValidates(t *testing.T) {
	const credential = "T000/B000/XXXXsecretpath"
	tests := []struct {
		name   string
		target Target
	}{
		{"empty URL", Target{}},
		{"relative URL", Target{URL: "/services/" + credential}},
		{"other scheme", Target{URL: "ftp://hooks.example/" + credential}},
		{"no host", Target{URL: "https:///services/" + credential}},
		{"unparsable", Target{URL: "https://hooks.example/%zz" + credential}},
		{"unknown format", Target{URL: "https://hooks.example/" + credential, Format: "email"}},
		{"secret not base64", Target{URL: "https://hooks.example/" + credential, Secret: "whsec_!!" + credential}},
		{"empty whsec key", Target{URL: "https://hooks.example/", Secret: "whsec_"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok := Target{URL: "https://hooks.example/ok"}
			n, err := New(Options{Targets: []Target{ok, tt.target}})
			if err == nil {
				_ = n.Close(t.Context())
				t.Fatal("New = nil error, want one")
			}
			if !strings.Contains(err.Error(), "targets[1]") {
				t.Errorf("error %q does not name targets[1]", err)
			}
			if strings.Contains(err.Error(), credential) {
				t.Errorf("error %q repeats the URL or secret", err)
			}
		})
	}

	n, err := New(Options{Targets: []Target{
		{URL: "https://hooks.slack.com/services/x", Format: "slack"},
		{URL: "http://127.0.0.1:9/teams", Format: "teams", Secret: "raw"},
		{URL: "https://example.com/ce", Secret: "whsec_c2VjcmV0"},
	}})
	if err != nil {
		t.Fatalf("New(valid targets) = %v", err)
	}
	if err := n.Close(t.Context()); err != nil {
		t.Errorf("Close = %v", err)
	}
}

func TestNoTargets(t *testing.T) {
	n := start(t, Options{})
	n.Notify(requested("c1")) // nothing to do, nothing to break
}

func TestNotifyNeverBlocks(t *testing.T) {
	rc := hangingReceiver(t)
	var res results
	opts := fast(&res, Target{URL: rc.URL})
	opts.QueueSize, opts.Lanes = 100, 1
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}

	const events = 10000
	batch := make([]Event, events)
	for i := range batch {
		batch[i] = requested(fmt.Sprint("c", i))
	}
	// The receiver hangs until the test ends: a Notify that waited for it
	// would never return.
	began := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, e := range batch {
			n.Notify(e)
		}
	}()
	select {
	case <-done:
		t.Logf("%d Notify calls: %v", events, time.Since(began))
	case <-time.After(10 * time.Second):
		t.Fatalf("%d Notify calls to a hanging receiver have not returned after 10s", events)
	}
	// One event may be in flight, QueueSize wait; the rest were dropped.
	if got := res.count(ResultDropped); got < events-opts.QueueSize-1 || got > events-opts.QueueSize {
		t.Errorf("dropped %d, want %d or %d", got, events-opts.QueueSize-1, events-opts.QueueSize)
	}

	// Closing gives up on the hanging receiver and accounts for every event.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := n.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want DeadlineExceeded", err)
	}
	if got := res.count(ResultDelivered) + res.count(ResultFailed) + res.count(ResultDropped); got != events {
		t.Errorf("%d events accounted for, want %d", got, events)
	}
	if got := res.count(ResultFailed); got != 1 {
		t.Errorf("failed = %d, want 1 (the delivery in flight)", got)
	}
}

// TestOrderingPerCall: each target receives a call's events in order
// (requested, then resolved), retries in the middle included, over lanes
// that send different calls side by side. Each call is resolved once its
// requested event is in delivery to both targets (a call resolved before
// that is announced to nobody: TestResolvedBeforeSentSkipsBoth).
func TestOrderingPerCall(t *testing.T) {
	// Every fourth request fails once, so retries happen in the middle.
	var mu sync.Mutex
	got := map[string][]string{} // Content-Type (one per target) → webhook-ids in arrival order
	tried := map[string]bool{}   // Content-Type and webhook-id of every attempt, failed ones too
	rc := testkit.NewUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tried[r.Header.Get("Content-Type")+" "+r.Header.Get("webhook-id")] = true
		mu.Unlock()
		if n%4 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		ct := r.Header.Get("Content-Type")
		got[ct] = append(got[ct], r.Header.Get("webhook-id"))
		mu.Unlock()
	})
	var res results
	n := start(t, fast(&res, Target{URL: rc.URL}, Target{URL: rc.URL, Format: FormatSlack}))

	const calls = 20
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			id := fmt.Sprint("c", i)
			n.Notify(requested(id))
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				mu.Lock()
				both := tried["application/cloudevents+json "+id] && tried["application/json "+id]
				mu.Unlock()
				if both {
					break
				}
			}
			n.Notify(resolved(id, "approved", "alice"))
		})
	}
	wg.Wait()
	testkit.WaitFor(t, "every delivery", func() bool { return res.count(ResultDelivered) == 2*2*calls })
	if res.count(ResultRetry) == 0 {
		t.Fatal("no retries happened; the test proves nothing")
	}

	mu.Lock()
	defer mu.Unlock()
	for _, ct := range []string{"application/cloudevents+json", "application/json"} {
		at := map[string]int{}
		for i, id := range got[ct] {
			at[id] = i
		}
		if len(at) != 2*calls || len(got[ct]) != 2*calls {
			t.Fatalf("%s received %v, want each of %d events once", ct, got[ct], 2*calls)
		}
		for i := range calls {
			id := fmt.Sprint("c", i)
			if at[id] > at[id+".resolved"] {
				t.Errorf("%s received %s's resolved event before its requested event: %v", ct, id, got[ct])
			}
		}
	}
}

// TestOneLaneInOrder: a target with one lane receives every event in the
// order Notify was given them, retries in the middle included, beside a
// target with the default lanes; a negative lane count is refused.
func TestOneLaneInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []string
	rc := testkit.NewUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n%4 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/one" {
			mu.Lock()
			got = append(got, r.Header.Get("webhook-id"))
			mu.Unlock()
		}
	})
	var res results
	n := start(t, fast(&res, Target{URL: rc.URL + "/one", Lanes: 1}, Target{URL: rc.URL + "/many"}))
	var want []string
	for i := range 20 {
		id := fmt.Sprint("c", i)
		n.Notify(requested(id))
		want = append(want, id)
	}
	testkit.WaitFor(t, "every delivery", func() bool { return res.count(ResultDelivered) == 2*len(want) })
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("one lane's delivery order (-want +got):\n%s", diff)
	}
	if _, err := New(Options{Targets: []Target{{URL: rc.URL, Lanes: -1}}}); err == nil {
		t.Error("New took a target with -1 lanes")
	}
}

// TestLanesSideBySide: a call whose delivery hangs holds up its own lane
// only; other calls reach the same target meanwhile.
func TestLanesSideBySide(t *testing.T) {
	release, open := releaser(t)
	rc := testkit.NewUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		if r.Header.Get("webhook-id") == "slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	var res results
	opts := fast(&res, Target{URL: rc.URL})
	opts.MaxElapsed = time.Minute // the slow call hangs until released
	n := start(t, opts)
	n.Notify(requested("slow"))
	testkit.WaitFor(t, "the slow call in delivery", func() bool { return len(rc.Requests()) == 1 })
	for i := range 20 {
		n.Notify(requested(fmt.Sprint("c", i)))
	}
	// 20 calls all hashed to the slow call's lane: one chance in 4^20.
	testkit.WaitFor(t, "other calls delivered while one hangs", func() bool { return res.count(ResultDelivered) > 0 })
	if !n.InFlight(Event{Type: TypeRequested, CallID: "slow"}) {
		t.Fatal("the hanging call is no longer in flight: the others may have waited for it")
	}
	open()
	testkit.WaitFor(t, "every delivery", func() bool { return res.count(ResultDelivered) == 21 })
}

func TestCloseDrains(t *testing.T) {
	rc := testkit.NewUpstream(t, func(int, http.ResponseWriter, *http.Request) { time.Sleep(5 * time.Millisecond) })
	var res results
	n, err := New(fast(&res, Target{URL: rc.URL}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		n.Notify(requested(fmt.Sprint("c", i)))
	}
	if err := n.Close(t.Context()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if got := res.count(ResultDelivered); got != 20 {
		t.Errorf("delivered %d before Close returned, want 20", got)
	}
	if got := len(rc.Requests()); got != 20 {
		t.Errorf("receiver saw %d, want 20", got)
	}

	n.Notify(requested("late"))
	if got := res.count(ResultDropped); got != 1 {
		t.Errorf("Notify after Close: dropped = %d, want 1", got)
	}
	if err := n.Close(t.Context()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestUnknownTypeDropped(t *testing.T) {
	rc := testkit.NewUpstream(t, nil)
	var res results
	n := start(t, fast(&res, Target{URL: rc.URL}))
	e := requested("c1")
	e.Type = "dev.toolgate.approval.other"
	n.Notify(e)
	if diff := cmp.Diff([]string{ResultDropped}, res.get()); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

func TestNotifyCopiesEvent(t *testing.T) {
	rc := testkit.NewUpstream(t, nil)
	var res results
	n := start(t, fast(&res, Target{URL: rc.URL}))
	e := requested("c1")
	n.Notify(e)
	e.Reasons[0] = "changed after Notify"
	e.Arguments[2] = 'X'
	testkit.WaitFor(t, "delivery", func() bool { return res.final(1) })
	body := string(rc.Requests()[0].Body)
	if !strings.Contains(body, "writing notes needs a human") || !strings.Contains(body, `"path"`) {
		t.Errorf("the caller's later changes reached the body:\n%s", body)
	}
}

func TestLogsHoldNoSecrets(t *testing.T) {
	const secret = "whsec_c2VjcmV0LWtleS1ieXRlcw=="
	// The receiver echoes the request, as some error pages do.
	var rc *testkit.Upstream
	rc = testkit.NewUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader([]int{503, 429, 400}[min(n, 2)])
		_, _ = w.Write(rc.Requests()[n].Body)
	})
	var logs testkit.Buffer
	var res results
	opts := fast(&res,
		Target{URL: rc.URL + "/services/T000/B000/XXXXsecretpath", Secret: secret},
		Target{URL: rc.URL + "/services/T000/B000/XXXXsecretpath", Format: FormatSlack})
	opts.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts.QueueSize, opts.Lanes = 1, 1
	n := start(t, opts)
	for i := range 5 { // overflow the queue too, so drops are logged
		n.Notify(requested(fmt.Sprint("c", i)))
	}
	testkit.WaitFor(t, "every result", func() bool { return res.final(10) })

	out := logs.String()
	for _, leak := range []string{token, "XXXXsecretpath", "c2VjcmV0LWtleS1ieXRlcw", "approvals.example"} {
		if strings.Contains(out, leak) {
			t.Errorf("logs contain %q:\n%s", leak, out)
		}
	}
	for _, want := range []string{`"call_id":"c0"`, `"target":1`, "retrying", "failed permanently", "queue full"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %s:\n%s", want, out)
		}
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	rc := testkit.NewUpstream(t, statuses(503))
	hang := hangingReceiver(t)
	before := runtime.NumGoroutine()

	var res results
	n, err := New(fast(&res, Target{URL: rc.URL}, Target{URL: rc.URL, Format: FormatTeams},
		Target{URL: hang.URL}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		n.Notify(requested(fmt.Sprint("c", i)))
	}
	testkit.WaitFor(t, "deliveries", func() bool { return res.count(ResultDelivered) == 10 })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_ = n.Close(ctx) // gives up on the hanging target

	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: %d before, %d after Close\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// TestLanesKeepTheirConnections: a target's lanes, sending side by side,
// each keep their connection to it, so no event waits for a new one (a
// TLS handshake, on a real receiver). The events come in bursts, each
// delivered before the next, so every lane's connection goes idle between
// them: a pool that keeps fewer idle connections than there are lanes
// closes some after every burst and dials again in the next.
//
// While the lanes first dial, net/http may hand a lane whose dial is still
// pending a connection another lane just freed; the dial then finishes
// into the pool, and the receiver sees that connection only when it is
// first used, maybe after the warm-up. The test allows for those.
func TestLanesKeepTheirConnections(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{} // the receiver's peers: one per connection
	rc := testkit.NewUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		time.Sleep(200 * time.Microsecond)
	})
	var res results
	n := start(t, fast(&res, Target{URL: rc.URL}))
	sent := 0
	burst := func() {
		for range 2 * DefaultLanes {
			n.Notify(requested(fmt.Sprint("c", sent)))
			sent++
		}
		testkit.WaitFor(t, "every delivery", func() bool { return res.count(ResultDelivered) == sent })
	}
	const warm, bursts, raceAllowance = 3, 30, 2
	for range warm {
		burst()
	}
	mu.Lock()
	warmed := maps.Clone(conns)
	mu.Unlock()
	for range bursts {
		burst()
	}
	mu.Lock()
	defer mu.Unlock()
	var opened []string
	for c := range conns {
		if !warmed[c] {
			opened = append(opened, c)
		}
	}
	if len(opened) > raceAllowance {
		t.Fatalf("%d connections opened in %d bursts after the warm-up (%d lanes, %d connections then)",
			len(opened), bursts, DefaultLanes, len(warmed))
	}
}
