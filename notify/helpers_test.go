package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// token is the approval link's secret part; no log may contain it.
const token = "tok_Zk3xS3CR3T"

var (
	testExpires = time.Date(2026, 11, 29, 21, 30, 0, 0, time.UTC)
	testTime    = time.Date(2026, 11, 29, 21, 15, 2, 0, time.UTC)
)

// requested returns a fully filled requested event for call id.
func requested(id string) Event {
	return Event{
		Type:        TypeRequested,
		CallID:      id,
		Tool:        "write_note",
		Upstream:    "notes",
		Subject:     "agent-42",
		Method:      "POST",
		Path:        "/tools/write_note",
		ToolTarget:  "notes/today.txt",
		Arguments:   json.RawMessage(`{"path":"notes/today.txt","content":"hello"}`),
		Reasons:     []string{"writing notes needs a human"},
		RuleIDs:     []string{"notes.write"},
		ApprovalURL: "https://approvals.example/approvals/" + id + "?token=" + token,
		StatusURL:   "https://toolgate.example/api/approvals/" + id,
		ExpiresAt:   testExpires,
		Time:        testTime,
	}
}

// resolved returns the resolved event that follows requested(id).
func resolved(id, outcome, by string) Event {
	e := requested(id)
	e.Type = TypeResolved
	e.ApprovalURL = ""
	e.Outcome, e.DecidedBy, e.Comment = outcome, by, "looks fine"
	e.Time = testTime.Add(time.Minute)
	return e
}

// hangingReceiver never answers until the client gives up or the test ends.
func hangingReceiver(t *testing.T) *testkit.Upstream {
	t.Helper()
	release := make(chan struct{})
	rc := testkit.NewUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	return rc
}

// releaser returns a channel and the function that closes it, once; the
// channel is closed when the test ends at the latest, so a receiver that
// waits on it never outlives the test.
func releaser(t *testing.T) (release chan struct{}, open func()) {
	release = make(chan struct{})
	var once sync.Once
	open = func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	return release, open
}

// statuses answers the listed statuses in turn, then 200.
func statuses(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n < len(codes) {
			w.WriteHeader(codes[n])
		}
	}
}

// results records OnDelivery calls.
type results struct {
	mu   sync.Mutex
	list []string
}

func (r *results) record(_ int, _ string, result string) {
	r.mu.Lock()
	r.list = append(r.list, result)
	r.mu.Unlock()
}

func (r *results) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}

func (r *results) count(result string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.list {
		if s == result {
			n++
		}
	}
	return n
}

// final reports whether every one of n events has reached a final result.
func (r *results) final(n int) bool {
	return r.count(ResultDelivered)+r.count(ResultFailed)+r.count(ResultDropped) >= n
}

// fast are Options that keep retries quick.
func fast(res *results, targets ...Target) Options {
	return Options{
		Targets:     targets,
		BaseBackoff: time.Millisecond,
		MaxElapsed:  5 * time.Second,
		OnDelivery:  res.record,
	}
}

// start builds a Notifier and closes it when the test ends.
func start(t *testing.T, opts Options) *Notifier {
	t.Helper()
	n, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return n
}

// deliverOne sends e to a fresh receiver in format and returns what it got.
func deliverOne(t *testing.T, format, secret string, e Event) testkit.Request {
	t.Helper()
	rc := testkit.NewUpstream(t, nil)
	var res results
	n := start(t, fast(&res, Target{URL: rc.URL + "/hook", Format: format, Secret: secret}))
	n.Notify(e)
	testkit.WaitFor(t, "delivery", func() bool { return res.final(1) })
	if got := res.get(); !slices.Equal(got, []string{ResultDelivered}) {
		t.Fatalf("results = %v, want [delivered]", got)
	}
	return rc.Requests()[0]
}

// decode unmarshals a body into a generic JSON value.
func decode(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, body)
	}
	return m
}
