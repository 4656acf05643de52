package decisionlog_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/policy"
)

// logService is an OPA-compatible decision-log service: it takes gzip JSON
// arrays of events on POST /logs. The first upload fails, to make the
// plugin retry.
type logService struct {
	t        *testing.T
	mu       sync.Mutex
	attempts int
	events   []logs.EventV1
}

func (s *logService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if r.Method != http.MethodPost || r.URL.Path != "/v1/logs" {
		s.t.Errorf("%s %s, want POST /v1/logs", r.Method, r.URL.Path)
	}
	if r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("Content-Type") != "application/json" {
		s.t.Errorf("headers %v, want gzip JSON", r.Header)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer log-token" {
		s.t.Errorf("Authorization %q", got)
	}
	if s.attempts == 1 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		s.t.Errorf("body is not gzip: %v", err)
		return
	}
	body, _ := io.ReadAll(zr)
	var raw []json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		s.t.Errorf("body is not a JSON array: %v\n%s", err, body)
		return
	}
	for _, ev := range raw {
		s.events = append(s.events, decodeEvent(s.t, ev))
	}
}

func (s *logService) got() []logs.EventV1 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// TestRemoteUpload: events reach an OPA-compatible log service, masked,
// after a failed first upload, and Close flushes the buffer.
func TestRemoteUpload(t *testing.T) {
	svc := &logService{t: t}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	e := newEngine(t, map[string]string{"p.rego": testPolicy, "mask.rego": testMask})
	reg := prometheus.NewRegistry()
	l, _ := newLogger(t, e, decisionlog.Options{
		Arguments: true, Registerer: reg,
		Service: decisionlog.Service{
			URL: srv.URL, Resource: "/v1/logs", Token: "log-token", Timeout: 2 * time.Second,
			BufferBytes: 1 << 20, MinDelay: time.Second, MaxDelay: time.Second,
		},
	})
	in := policy.Input{CallID: "call-1", Kind: policy.KindREST, Tool: policy.NewTool("login", map[string]any{"password": "hunter2", "user": "ann"}, nil)}
	l.LogDecision(context.Background(), decisionlog.Decision{
		ID: "call-1", Time: time.Now(), Input: in, Result: policy.Decision{Action: policy.Ask, Reasons: []policy.Reason{{ID: "r", Message: "m"}}},
		Revision: e.Revision(), RequestedBy: "127.0.0.1:1",
	})
	l.LogAudit(context.Background(), decisionlog.Audit{CallID: "call-1", Outcome: "approved", DecidedBy: "alice", Via: "api", At: time.Now()})

	// The periodic upload: the first attempt fails, a retry delivers.
	testkit.WaitFor(t, "the upload", func() bool { return len(svc.got()) == 2 })
	evs := svc.got()
	if evs[0].DecisionID != "call-1" || evs[0].Path != decisionlog.PathDecision || field(*evs[0].Result, "action") != "ask" {
		t.Errorf("first event %+v", evs[0])
	}
	if _, ok := field(*evs[0].Input, "tool", "arguments").(map[string]any)["password"]; ok || !slices.Contains(evs[0].Erased, "/input/tool/arguments/password") {
		t.Errorf("the uploaded event is not masked: %v erased %v", *evs[0].Input, evs[0].Erased)
	}
	if evs[1].DecisionID != "call-1" || evs[1].Path != decisionlog.PathApproval {
		t.Errorf("second event %+v", evs[1])
	}

	// Close uploads what is still buffered.
	l.LogAudit(context.Background(), decisionlog.Audit{CallID: "call-2", Outcome: "rejected", DecidedBy: "bob", Via: "link", At: time.Now()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.Close(ctx)
	if evs := svc.got(); len(evs) != 3 || evs[2].DecisionID != "call-2" {
		t.Fatalf("after Close the service has %d events, want the third flushed", len(evs))
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.attempts < 3 {
		t.Errorf("%d uploads, want a failed one, a retried one and the flush", svc.attempts)
	}
	if got := counterValue(t, reg, "toolgate_decision_log_uploads_total", "success"); got < 2 {
		t.Errorf("uploads{result=success} = %v, want at least 2", got)
	}
	if got := counterValue(t, reg, "toolgate_decision_log_uploads_total", "failure"); got < 1 {
		t.Errorf("uploads{result=failure} = %v, want at least 1", got)
	}
	if got := counterValue(t, reg, "toolgate_decision_log_events_dropped_total", "queue_full"); got != 0 {
		t.Errorf("events_dropped{reason=queue_full} = %v", got)
	}
}

// counterValue reads the series of family name whose one label is label.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if f.GetName() == name && m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s}", name, label)
	return 0
}

// TestUploadURLWithQuery: a service URL with a path and a query (a token
// there is common) gets its events at the path joined with the resource,
// the query after them; and a failed upload's report names the URL
// without its query or password.
func TestUploadURLWithQuery(t *testing.T) {
	const token, pass = "DL-QUERY-TOKEN", "DL-PASS"
	up := testkit.NewUpstream(t, nil)
	e := newEngine(t, map[string]string{"p.rego": testPolicy})
	in := policy.Input{CallID: "call-1", Kind: policy.KindREST, Tool: policy.NewTool("login", nil, nil)}
	logOne := func(l *decisionlog.Logger) {
		l.LogDecision(context.Background(), decisionlog.Decision{
			ID: "call-1", Time: time.Now(), Input: in, Result: policy.Decision{Action: policy.Allow}, Revision: e.Revision(),
		})
	}

	l, _ := newLogger(t, e, decisionlog.Options{Service: decisionlog.Service{
		URL: up.URL + "/svc/?token=" + token, MinDelay: time.Second, MaxDelay: time.Second,
	}})
	logOne(l)
	testkit.WaitFor(t, "the upload", func() bool { return len(up.Requests()) > 0 })
	if r := up.Requests()[0]; r.Method != http.MethodPost || r.Path != "/svc/logs" || r.Query != "token="+token {
		t.Errorf("upload to %s %s?%s, want POST /svc/logs?token=%s", r.Method, r.Path, r.Query, token)
	}

	gone := testkit.FreeAddrs(t, 1)[0] // nothing listens there
	reports := &testkit.Buffer{}
	l, _ = newLogger(t, e, decisionlog.Options{
		Logger: slog.New(slog.NewJSONHandler(reports, nil)),
		Service: decisionlog.Service{
			URL: "http://dl:" + pass + "@" + gone + "/svc?token=" + token, MinDelay: time.Second, MaxDelay: time.Second,
		},
	})
	logOne(l)
	testkit.WaitFor(t, "the failure's report", func() bool { return strings.Contains(reports.String(), "upload failed") })
	if s := reports.String(); strings.Contains(s, token) || strings.Contains(s, pass) || !strings.Contains(s, "/svc/logs?REDACTED") {
		t.Errorf("the report shows the query or the password, or not the path: %s", s)
	}
}

// TestUploadTricklingAnswerBounded: a service that answers 200 and then
// trickles its body does not hold the uploader: the whole exchange is
// bounded (three times the timeout for the headers), and the next upload
// is attempted. (Without the bound, the first upload never ends, and
// neither does closing the logger.)
func TestUploadTricklingAnswerBounded(t *testing.T) {
	var mu sync.Mutex
	posts := 0
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		posts++
		first := posts == 1
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
		for first {
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
				_, _ = w.Write([]byte(" "))
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	l, _ := newLogger(t, newEngine(t, map[string]string{"p.rego": testPolicy}), decisionlog.Options{
		Service: decisionlog.Service{URL: srv.URL, Timeout: time.Second, MinDelay: time.Second, MaxDelay: time.Second},
	})
	// The first upload after a second, bounded at three, the next a
	// second later: well within 12 s, where a held uploader never posts
	// again.
	for deadline := time.Now().Add(12 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		l.LogAudit(context.Background(), decisionlog.Audit{CallID: "call-x", Outcome: "approved", DecidedBy: "alice", Via: "api", At: time.Now()})
		mu.Lock()
		n := posts
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d upload in 12 s: the trickling answer holds the uploader", n)
		}
	}
}
