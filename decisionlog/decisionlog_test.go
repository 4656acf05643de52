package decisionlog_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/internal/testkit"
)

// TestConsoleEventsThroughProxy runs real calls through the proxy and the
// real engine with a mask policy and reads the console: one event per
// call, in OPA's event shape, with the user's masks applied and listed.
func TestConsoleEventsThroughProxy(t *testing.T) {
	e := newEngine(t, map[string]string{"p.rego": testPolicy, "mask.rego": testMask})
	l, console := newLogger(t, e, decisionlog.Options{Arguments: true, Labels: map[string]string{"team": "a"}})
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
			h.ServeHTTP(w, r.WithContext(trace.ContextWithSpanContext(r.Context(), sc)))
		})
	}
	base := newProxy(t, e, adapter{l, e}, traced)

	if code := call(t, base, "login", `{"user":"ann","password":"hunter2","token":"tok-secret"}`); code != 200 {
		t.Fatalf("login: %d", code)
	}
	if code := call(t, base, "rm", `{"path":"notes/a.txt"}`); code != 403 {
		t.Fatalf("rm: %d", code)
	}
	testkit.WaitFor(t, "two console events", func() bool { return strings.Count(console.String(), "\n") >= 2 })
	out := console.String()
	for _, secret := range []string{"hunter2", "tok-secret"} {
		if strings.Contains(out, secret) {
			t.Errorf("the console holds the masked value %q:\n%s", secret, out)
		}
	}
	evs := consoleEvents(t, out)
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2:\n%s", len(evs), out)
	}

	login := evs[0]
	if login.DecisionID != "call-1" || login.Path != decisionlog.PathDecision {
		t.Errorf("decision_id %q path %q, want call-1 %s", login.DecisionID, login.Path, decisionlog.PathDecision)
	}
	if login.Labels["id"] != "instance-1" || login.Labels["version"] == "" || login.Labels["team"] != "a" {
		t.Errorf("labels = %v", login.Labels)
	}
	if login.Bundles["toolgate"].Revision != e.Revision() {
		t.Errorf("bundles = %v, want the policy revision %s", login.Bundles, e.Revision())
	}
	if login.TraceID != tid.String() || login.SpanID != sid.String() {
		t.Errorf("trace_id %q span_id %q, want the request's span", login.TraceID, login.SpanID)
	}
	if login.RequestedBy == "" || login.Timestamp.IsZero() || time.Since(login.Timestamp) > time.Minute {
		t.Errorf("requested_by %q timestamp %v", login.RequestedBy, login.Timestamp)
	}
	if _, ok := login.Metrics["timer_rego_query_eval_ns"]; !ok {
		t.Errorf("metrics = %v, want timer_rego_query_eval_ns", login.Metrics)
	}
	if got := field(*login.Result, "action"); got != "allow" {
		t.Errorf("result.action = %v", got)
	}
	args, _ := field(*login.Input, "tool", "arguments").(map[string]any)
	if args["user"] != "ann" || args["token"] != "***" {
		t.Errorf("arguments = %v, want user kept and token upserted", args)
	}
	if _, ok := args["password"]; ok {
		t.Errorf("password not erased: %v", args)
	}
	if !slices.Contains(login.Erased, "/input/tool/arguments/password") {
		t.Errorf("erased = %v", login.Erased)
	}
	if !slices.Contains(login.Masked, "/input/tool/arguments/token") {
		t.Errorf("masked = %v", login.Masked)
	}
	if got := field(*login.Input, "call_id"); got != "call-1" {
		t.Errorf("input.call_id = %v", got)
	}

	rm := evs[1]
	if rm.DecisionID != "call-2" || field(*rm.Result, "action") != "deny" {
		t.Errorf("rm event: %s %v", rm.DecisionID, *rm.Result)
	}
	if ids := field(*rm.Result, "rule_ids").([]any); len(ids) != 1 || ids[0] != "t.no_rm" {
		t.Errorf("rule_ids = %v", ids)
	}
	if len(rm.Erased)+len(rm.Masked) != 0 {
		t.Errorf("nothing to mask in rm, got erased %v masked %v", rm.Erased, rm.Masked)
	}
}

// TestArgumentsErasedByDefault: without log.arguments the event has no
// arguments at all, whatever the mask policy says.
func TestArgumentsErasedByDefault(t *testing.T) {
	e := newEngine(t, map[string]string{"p.rego": testPolicy})
	l, console := newLogger(t, e, decisionlog.Options{})
	base := newProxy(t, e, adapter{l, e}, nil)
	if code := call(t, base, "login", `{"user":"ann","password":"hunter2"}`); code != 200 {
		t.Fatalf("login: %d", code)
	}
	testkit.WaitFor(t, "one console event", func() bool { return strings.Contains(console.String(), "\n") })
	evs := consoleEvents(t, console.String())
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	tool, _ := field(*evs[0].Input, "tool").(map[string]any)
	if _, ok := tool["arguments"]; ok || tool["name"] != "login" || strings.Contains(console.String(), "hunter2") {
		t.Errorf("tool = %v, want the name without arguments", tool)
	}
	if evs[0].TraceID != "" || evs[0].SpanID != "" {
		t.Errorf("an untraced request has trace_id %q span_id %q", evs[0].TraceID, evs[0].SpanID)
	}

	// A plain HTTP call's query string is its arguments.
	res, err := http.Get(base + "/search?q=the-secret-query")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	testkit.WaitFor(t, "the second event", func() bool { return strings.Count(console.String(), "\n") == 2 })
	evs = consoleEvents(t, console.String())
	h, _ := field(*evs[1].Input, "http").(map[string]any)
	if _, ok := h["query"]; ok || h["path"] != "/search" || strings.Contains(console.String(), "the-secret-query") {
		t.Errorf("http = %v, want the path without the query", h)
	}
}

// TestDropAndReload: data.system.log.drop drops events, and a policy
// reload reaches the plugin (its mask and drop queries are prepared again).
func TestDropAndReload(t *testing.T) {
	files := map[string]string{"p.rego": testPolicy}
	dir := newMutableFS(files)
	e := newEngineFS(t, dir)
	l, console := newLogger(t, e, decisionlog.Options{})
	base := newProxy(t, e, adapter{l, e}, nil)
	call(t, base, "login", `{}`)
	testkit.WaitFor(t, "the first event", func() bool { return strings.Count(console.String(), "\n") == 1 })

	dir.set("drop.rego", "package system.log\n\ndrop if input.result.action == \"deny\"\n")
	if err := e.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	call(t, base, "rm", `{}`)    // dropped
	call(t, base, "login", `{}`) // logged
	testkit.WaitFor(t, "the third call's event", func() bool { return strings.Contains(console.String(), `"call-3"`) })
	evs := consoleEvents(t, console.String())
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.DecisionID)
	}
	if !slices.Equal(ids, []string{"call-1", "call-3"}) {
		t.Fatalf("events %v, want call-1 and call-3 (call-2 dropped)", ids)
	}
	if evs[1].Bundles["toolgate"].Revision != e.Revision() || evs[0].Bundles["toolgate"].Revision == e.Revision() {
		t.Errorf("revisions %v %v, want the old one then %s", evs[0].Bundles, evs[1].Bundles, e.Revision())
	}
}

// TestAuditEvent: an approval decision is a second event, path
// toolgate/approval, with the call's decision_id.
func TestAuditEvent(t *testing.T) {
	e := newEngine(t, map[string]string{"p.rego": testPolicy})
	l, console := newLogger(t, e, decisionlog.Options{})
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l.LogAudit(context.Background(), decisionlog.Audit{
		CallID: "call-9", Outcome: "approved", DecidedBy: "alice", Comment: "fine", Via: "api", At: at,
		Tool: "publish", Upstream: "tools", Subject: "agent-42", RequestedBy: "10.0.0.9:5555",
	})
	testkit.WaitFor(t, "the audit event", func() bool { return strings.Contains(console.String(), "\n") })
	evs := consoleEvents(t, console.String())
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	ev := evs[0]
	if ev.DecisionID != "call-9" || ev.Path != decisionlog.PathApproval || !ev.Timestamp.Equal(at) || ev.RequestedBy != "10.0.0.9:5555" {
		t.Errorf("event = %+v", ev)
	}
	if field(*ev.Result, "outcome") != "approved" || field(*ev.Result, "decided_by") != "alice" || field(*ev.Result, "comment") != "fine" {
		t.Errorf("result = %v", *ev.Result)
	}
	if field(*ev.Input, "tool") != "publish" || field(*ev.Input, "subject") != "agent-42" {
		t.Errorf("input = %v", *ev.Input)
	}
}

// TestMaskErrorLogsNothing: a mask rule that fails to evaluate must not
// let the unmasked event through (OPA's plugin logs nothing then).
func TestMaskErrorLogsNothing(t *testing.T) {
	e := newEngine(t, map[string]string{
		"p.rego": testPolicy,
		// Two values for one complete rule: a conflict error at evaluation.
		"mask.rego": "package system.log\n\nmask := [\"/input/tool/arguments/password\"] if input.decision_id\n\nmask := [] if input.decision_id\n",
	})
	reports := &testkit.Buffer{}
	l, console := newLogger(t, e, decisionlog.Options{Arguments: true, Logger: slog.New(slog.NewJSONHandler(reports, nil))})
	base := newProxy(t, e, adapter{l, e}, nil)
	call(t, base, "login", `{"password":"hunter2"}`)
	l.Close(context.Background())
	if !strings.Contains(reports.String(), "masking failed") {
		t.Errorf("the mask failure is not reported:\n%s", reports.String())
	}
	if out := console.String(); out != "" {
		t.Fatalf("an event whose mask failed was logged:\n%s", out)
	}
}

// TestMaskReadsPolicyData: mask rules see the policy's data files, as
// every other rule of the policy does.
func TestMaskReadsPolicyData(t *testing.T) {
	e := newEngine(t, map[string]string{
		"p.rego":    testPolicy,
		"log.json":  `{"logging": {"secret_args": ["pin"]}}`,
		"mask.rego": "package system.log\n\nmask contains concat(\"/\", [\"/input/tool/arguments\", a]) if some a in data.logging.secret_args\n",
	})
	l, console := newLogger(t, e, decisionlog.Options{Arguments: true})
	base := newProxy(t, e, adapter{l, e}, nil)
	// A value no timestamp or timer of the event can hold.
	call(t, base, "login", `{"user":"ann","pin":"pin-4321"}`)
	testkit.WaitFor(t, "one console event", func() bool { return strings.Contains(console.String(), "\n") })
	evs := consoleEvents(t, console.String())
	if len(evs) != 1 || !slices.Equal(evs[0].Erased, []string{"/input/tool/arguments/pin"}) || strings.Contains(console.String(), "pin-4321") {
		t.Fatalf("events %+v\n%s", evs, console.String())
	}
}

// TestQueueFullCounted: events past a full queue are dropped, never block
// the caller, and are counted; nothing is lost uncounted.
func TestQueueFullCounted(t *testing.T) {
	e := newEngine(t, map[string]string{"p.rego": testPolicy})
	reg := prometheus.NewRegistry()
	l, console := newLogger(t, e, decisionlog.Options{QueueSize: 1, Registerer: reg})
	const sent = 200
	for i := range sent {
		l.LogAudit(context.Background(), decisionlog.Audit{CallID: fmt.Sprint("call-", i), Outcome: "approved", At: time.Now()})
	}
	l.Close(context.Background())
	logged := len(consoleEvents(t, console.String()))
	dropped := counterValue(t, reg, "toolgate_decision_log_events_dropped_total", "queue_full")
	if dropped == 0 || logged+int(dropped) != sent {
		t.Fatalf("%d logged + %v dropped, want %d with some dropped", logged, dropped, sent)
	}
}

// stalled is a console whose writes wait for release, as stdout does when
// the container's log pipe is read too slowly.
type stalled struct{ release chan struct{} }

func (s stalled) Write(p []byte) (int, error) { <-s.release; return len(p), nil }

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestQueueLetsGoOfArguments: with log.arguments off, a queued event does
// not keep its call's parsed arguments: 40 denied calls of ~180 KiB of tiny
// values, queued behind a console that does not take them, held 3 MiB each
// when the arguments were let go of only as the event was built.
func TestQueueLetsGoOfArguments(t *testing.T) {
	e := newEngine(t, map[string]string{"p.rego": testPolicy})
	s := stalled{release: make(chan struct{})}
	l, _ := newLogger(t, e, decisionlog.Options{Console: slog.NewJSONHandler(s, nil)})
	defer close(s.release) // before the logger closes
	base := newProxy(t, e, adapter{l, e}, nil)
	body := `{"a":[` + strings.Repeat("1,", 90_000) + `1]}`
	before := heapInUse()
	const calls = 40
	denyMany(t, base, body, calls)
	if per := (int64(heapInUse()) - int64(before)) / calls; per > 512<<10 {
		t.Errorf("each queued event holds %d KiB with arguments off", per>>10)
	}
}

// denyMany sends n calls of rm, which testPolicy denies, with body.
func denyMany(t *testing.T, base, body string, n int) {
	t.Helper()
	for range n {
		res, err := http.Post(base+"/tools/rm", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("status %d, want the deny's 403", res.StatusCode)
		}
	}
}

// TestQueueBoundedByBytes: events that log their arguments count them while
// queued: behind a console that takes nothing, events of 1 MiB of arguments
// each are dropped (and counted) once MaxQueueBytes is queued, long before
// the queue's count is reached.
func TestQueueBoundedByBytes(t *testing.T) {
	e := newEngine(t, map[string]string{"p.rego": testPolicy})
	reg := prometheus.NewRegistry()
	s := stalled{release: make(chan struct{})}
	l, _ := newLogger(t, e, decisionlog.Options{Console: slog.NewJSONHandler(s, nil), Arguments: true, Registerer: reg})
	defer close(s.release)
	const sent, each = 200, 1 << 20
	for i := range sent {
		l.LogDecision(context.Background(), decisionlog.Decision{ID: fmt.Sprint("call-", i), Time: time.Now(), ArgumentBytes: each})
	}
	dropped := counterValue(t, reg, "toolgate_decision_log_events_dropped_total", "queue_full")
	if kept := sent - int(dropped); kept > decisionlog.MaxQueueBytes/each+1 || dropped == 0 {
		t.Errorf("%d of %d events of 1 MiB queued (%v dropped), want at most %d", kept, sent, dropped, decisionlog.MaxQueueBytes/each+1)
	}
}
