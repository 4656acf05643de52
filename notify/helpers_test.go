package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
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

// request is what a receiver saw.
type request struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is a real webhook endpoint. respond decides the answer to the
// n-th request (0-based); nil answers 200.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []request
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{respond: respond}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.reqs)
		rc.reqs = append(rc.reqs, request{header: r.Header.Clone(), body: body, at: time.Now()})
		rc.mu.Unlock()
		if rc.respond != nil {
			rc.respond(n, w, r)
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// hangingReceiver never answers until the client gives up or the test ends.
func hangingReceiver(t *testing.T) *receiver {
	t.Helper()
	release := make(chan struct{})
	rc := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	return rc
}

// statuses answers the listed statuses in turn, then 200.
func statuses(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n < len(codes) {
			w.WriteHeader(codes[n])
		}
	}
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
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

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// deliverOne sends e to a fresh receiver in format and returns what it got.
func deliverOne(t *testing.T, format, secret string, e Event) request {
	t.Helper()
	rc := newReceiver(t, nil)
	var res results
	n := start(t, fast(&res, Target{URL: rc.srv.URL + "/hook", Format: format, Secret: secret}))
	n.Notify(e)
	waitFor(t, "delivery", func() bool { return res.final(1) })
	if got := res.get(); !slices.Equal(got, []string{ResultDelivered}) {
		t.Fatalf("results = %v, want [delivered]", got)
	}
	return rc.requests()[0]
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
