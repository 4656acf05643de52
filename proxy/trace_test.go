package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// The tracing tests run calls through the real engine to a real upstream
// with an SDK tracer provider that keeps every span in memory, and compare
// what was recorded with the traceparent the upstream received.

const (
	agentTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	agentSpanID  = "00f067aa0ba902b7"
	agentParent  = "00-" + agentTraceID + "-" + agentSpanID + "-01"
)

// traced returns a Config mutation that turns tracing on, and the
// exporter the spans end up in.
func traced() (*tracetest.InMemoryExporter, func(*Config)) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	return exp, func(c *Config) { c.TracerProvider = tp }
}

// spansOf waits until the server span of callID has ended (it ends after
// the agent has its answer) and returns every span of its trace.
func spansOf(t *testing.T, exp *tracetest.InMemoryExporter, callID string) (server tracetest.SpanStub, all []tracetest.SpanStub) {
	t.Helper()
	testkit.WaitFor(t, "the server span of call "+callID, func() bool {
		for _, s := range exp.GetSpans() {
			if s.SpanKind == trace.SpanKindServer && attr(s, attrCallID) == callID {
				server = s
			}
		}
		return server.SpanContext.IsValid()
	})
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() == server.SpanContext.TraceID() {
			all = append(all, s)
		}
	}
	return server, all
}

func attr(s tracetest.SpanStub, k attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

func named(spans []tracetest.SpanStub, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func ofKind(spans []tracetest.SpanStub, k trace.SpanKind) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == k {
			out = append(out, s)
		}
	}
	return out
}

// parentOf reads the trace and parent span IDs of a traceparent header.
func parentOf(t *testing.T, traceparent string) (trace.TraceID, trace.SpanID) {
	t.Helper()
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 {
		t.Fatalf("traceparent %q", traceparent)
	}
	tid, err1 := trace.TraceIDFromHex(parts[1])
	sid, err2 := trace.SpanIDFromHex(parts[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("traceparent %q: %v %v", traceparent, err1, err2)
	}
	return tid, sid
}

// TestTraceAllowedCall: an allowed REST tool call continues the agent's
// trace: server span, decision span and client span in it, and the
// upstream receives a traceparent whose parent is the client span.
func TestTraceAllowedCall(t *testing.T) {
	exp, on := traced()
	env := newTestServer(t, seedEngine(t), on)
	res := post(t, env.url+"/tools/Read", `{"path":"a.txt"}`, "traceparent", agentParent)
	_, _ = io.Copy(io.Discard, res.Body)
	callID := res.Header.Get(headerCallID)
	if res.StatusCode != 200 || callID == "" {
		t.Fatalf("status %d call %q", res.StatusCode, callID)
	}
	server, spans := spansOf(t, exp, callID)

	if got := server.SpanContext.TraceID().String(); got != agentTraceID {
		t.Fatalf("server span trace %s, want the agent's %s", got, agentTraceID)
	}
	if server.Parent.SpanID().String() != agentSpanID || !server.Parent.IsRemote() {
		t.Fatalf("server span parent %v, want the agent's span %s", server.Parent, agentSpanID)
	}
	if server.Name != "POST /tools/{tool}" || attr(server, attrHTTPRoute) != "/tools/{tool}" {
		t.Fatalf("server span name %q route %q", server.Name, attr(server, attrHTTPRoute))
	}
	if attr(server, "http.response.status_code") != "200" || attr(server, attrDecision) != "allow" {
		t.Fatalf("server span attributes %v", server.Attributes)
	}

	decide := named(spans, "toolgate.decide")
	if len(decide) != 1 {
		t.Fatalf("%d decide spans in %d", len(decide), len(spans))
	}
	d := decide[0]
	if d.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Fatal("decide span is not a child of the server span")
	}
	for k, want := range map[attribute.Key]string{
		attrCallID: callID, attrDecision: "allow", attrUpstream: "files", attrToolName: "Read",
	} {
		if got := attr(d, k); got != want {
			t.Errorf("decide span %s = %q, want %q", k, got, want)
		}
	}
	if d.Status.Code == codes.Error {
		t.Errorf("decide span status %v", d.Status)
	}

	clients := ofKind(spans, trace.SpanKindClient)
	if len(clients) != 1 || clients[0].Parent.SpanID() != server.SpanContext.SpanID() {
		t.Fatalf("client spans %d (want 1, child of the server span)", len(clients))
	}
	reqs := env.upstream.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests", len(reqs))
	}
	tid, sid := parentOf(t, reqs[0].Header.Get("Traceparent"))
	if tid.String() != agentTraceID || sid != clients[0].SpanContext.SpanID() {
		t.Fatalf("upstream traceparent %q, want trace %s parent %s", reqs[0].Header.Get("Traceparent"), agentTraceID, clients[0].SpanContext.SpanID())
	}
}

// TestTraceNewTrace: an agent that sends no traceparent gets a trace of
// toolgate's, and the upstream joins it.
func TestTraceNewTrace(t *testing.T) {
	exp, on := traced()
	env := newTestServer(t, seedEngine(t), on)
	res := post(t, env.url+"/tools/Read", `{"path":"a.txt"}`)
	_, _ = io.Copy(io.Discard, res.Body)
	server, _ := spansOf(t, exp, res.Header.Get(headerCallID))
	if server.Parent.IsValid() {
		t.Fatalf("server span has a parent %v; the agent sent none", server.Parent)
	}
	reqs := env.upstream.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests", len(reqs))
	}
	if tid, _ := parentOf(t, reqs[0].Header.Get("Traceparent")); tid != server.SpanContext.TraceID() {
		t.Fatalf("upstream trace %s, server span trace %s", tid, server.SpanContext.TraceID())
	}
}

// TestTraceDenied: a denied call has its decision span and no client span.
func TestTraceDenied(t *testing.T) {
	exp, on := traced()
	env := newTestServer(t, seedEngine(t), on)
	res := post(t, env.url+"/tools/Read", `{"path":"secrets.txt"}`, "traceparent", agentParent)
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d", res.StatusCode)
	}
	server, spans := spansOf(t, exp, res.Header.Get(headerCallID))
	decide := named(spans, "toolgate.decide")
	if len(decide) != 1 || attr(decide[0], attrDecision) != "deny" || attr(server, attrDecision) != "deny" {
		t.Fatalf("decide spans %+v", decide)
	}
	if n := len(ofKind(spans, trace.SpanKindClient)); n != 0 || len(env.upstream.Requests()) != 0 {
		t.Fatalf("%d client spans, %d upstream requests for a denied call", n, len(env.upstream.Requests()))
	}
}

// TestTraceRefused: a request refused before any decision (here a body
// with a duplicate key) is still found by its call ID, with its outcome.
func TestTraceRefused(t *testing.T) {
	exp, on := traced()
	env := newTestServer(t, seedEngine(t), on)
	res := post(t, env.url+"/tools/Read", `{"path":"a","path":"b"}`, "traceparent", agentParent)
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d", res.StatusCode)
	}
	server, spans := spansOf(t, exp, res.Header.Get(headerCallID))
	if got := attr(server, attrDecision); got != outcomeInvalid {
		t.Errorf("server span outcome %q, want %q", got, outcomeInvalid)
	}
	if n := len(named(spans, "toolgate.decide")); n != 0 {
		t.Errorf("%d decide spans for a request never decided", n)
	}
}

// TestTracePolicyError: a policy that fails marks the decision span and
// the server span as errors (the call is denied).
func TestTracePolicyError(t *testing.T) {
	exp, on := traced()
	broken := deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
		return policy.Decision{Action: policy.Allow}, errors.New("rego: eval_conflict_error")
	})
	env := newTestServer(t, broken, on)
	res := post(t, env.url+"/tools/Read", `{"path":"a.txt"}`)
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d", res.StatusCode)
	}
	server, spans := spansOf(t, exp, res.Header.Get(headerCallID))
	decide := named(spans, "toolgate.decide")
	if len(decide) != 1 || decide[0].Status.Code != codes.Error || attr(decide[0], attrDecision) != "deny" {
		t.Fatalf("decide spans %+v", decide)
	}
	if server.Status.Code != codes.Error {
		t.Fatalf("server span status %v", server.Status)
	}
	if len(decide[0].Events) == 0 || decide[0].Events[0].Name != "exception" {
		t.Fatalf("decide span events %+v, want the error recorded", decide[0].Events)
	}
}

// TestTraceMCPToolCall: an MCP tools/call carries the MCP semantic
// convention attributes and names the server span after method and tool.
func TestTraceMCPToolCall(t *testing.T) {
	exp, on := traced()
	env := newTestServer(t, seedEngine(t), on, func(c *Config) {
		c.Upstreams[0].Protocol = policy.KindMCP
	})
	res := post(t, env.url+"/mcp",
		`{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"Read","arguments":{"path":"a.txt"}}}`,
		"Accept", "application/json, text/event-stream", "Mcp-Session-Id", "sess-1", "Mcp-Protocol-Version", "2025-06-18",
		"traceparent", agentParent)
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	server, spans := spansOf(t, exp, res.Header.Get(headerCallID))
	if server.Name != "tools/call Read" {
		t.Fatalf("server span name %q", server.Name)
	}
	decide := named(spans, "toolgate.decide")
	if len(decide) != 1 {
		t.Fatalf("%d decide spans", len(decide))
	}
	for _, s := range []tracetest.SpanStub{server, decide[0]} {
		for k, want := range map[attribute.Key]string{
			attrMCPMethod: "tools/call", attrMCPSession: "sess-1", attrMCPVersion: "2025-06-18",
			attrRPCRequestID: "req-7", attrToolName: "Read", attrDecision: "allow",
		} {
			if got := attr(s, k); got != want {
				t.Errorf("%s span %s = %q, want %q", s.Name, k, got, want)
			}
		}
	}
	reqs := env.upstream.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests", len(reqs))
	}
	if tid, _ := parentOf(t, reqs[0].Header.Get("Traceparent")); tid.String() != agentTraceID {
		t.Fatalf("upstream trace %s, want %s", tid, agentTraceID)
	}
}

// TestTraceSweeperExecution: an approved call the sweeper executes gets a
// toolgate.execute span that starts a trace of its own, linked to the
// agent's; the upstream joins the execution's trace.
func TestTraceSweeperExecution(t *testing.T) {
	exp, on := traced()
	pe := newParkEnv(t, func(c *Config) { c.Hold = 50 * time.Millisecond }, on)
	res := post(t, pe.url+"/tools/Write", `{"path":"notes/a.txt","content":"x"}`, "traceparent", agentParent)
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d", res.StatusCode)
	}
	callID := res.Header.Get(headerCallID)
	server, _ := spansOf(t, exp, callID)
	if attr(server, attrDecision) != "ask" {
		t.Fatalf("server span decision %q", attr(server, attrDecision))
	}
	if _, err := pe.store.Decide(context.Background(), callID, pending.Decision{To: pending.Approved, By: "alice", Comment: ""}); err != nil {
		t.Fatal(err)
	}
	pe.server.life.SweepOnce(context.Background(), 0)

	var execs []tracetest.SpanStub
	for _, s := range named(exp.GetSpans(), "toolgate.execute") {
		if attr(s, attrCallID) == callID {
			execs = append(execs, s)
		}
	}
	if len(execs) != 1 {
		t.Fatalf("%d execute spans for %s", len(execs), callID)
	}
	x := execs[0]
	if x.Parent.IsValid() || x.SpanContext.TraceID().String() == agentTraceID {
		t.Fatalf("execute span parent %v trace %s: want a new root", x.Parent, x.SpanContext.TraceID())
	}
	if len(x.Links) != 1 || x.Links[0].SpanContext.TraceID().String() != agentTraceID {
		t.Fatalf("execute span links %+v, want the agent's trace", x.Links)
	}
	if attr(x, attrState) != "executed" || attr(x, attrToolName) != "Write" || x.Status.Code == codes.Error {
		t.Fatalf("execute span %v %v", x.Attributes, x.Status)
	}
	reqs := pe.upstream.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests", len(reqs))
	}
	tid, sid := parentOf(t, reqs[0].Header.Get("Traceparent"))
	var client tracetest.SpanStub
	for _, s := range ofKind(exp.GetSpans(), trace.SpanKindClient) {
		if s.SpanContext.SpanID() == sid {
			client = s
		}
	}
	if tid != x.SpanContext.TraceID() || client.Parent.SpanID() != x.SpanContext.SpanID() {
		t.Fatalf("upstream traceparent %q: want a client span under the execute span", reqs[0].Header.Get("Traceparent"))
	}
}

// TestTraceOff: without a TracerProvider nothing is wrapped: the agent's
// own traceparent reaches the upstream untouched, as any other header.
func TestTraceOff(t *testing.T) {
	env := newTestServer(t, seedEngine(t))
	res := post(t, env.url+"/tools/Read", `{"path":"a.txt"}`, "traceparent", agentParent)
	_, _ = io.Copy(io.Discard, res.Body)
	reqs := env.upstream.Requests()
	if res.StatusCode != 200 || len(reqs) != 1 || reqs[0].Header.Get("Traceparent") != agentParent {
		t.Fatalf("status %d upstream %+v", res.StatusCode, reqs)
	}
	auth, _ := identity.New(identity.Config{Anonymous: true})
	s, err := New(Config{Upstreams: []Upstream{{Name: "u", URL: env.upURL}}, Decider: seedEngine(t), Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	if _, bare := s.upstreams[0].once.(*timedTransport).base.(*http.Transport); !bare || s.tracing != nil {
		t.Fatal("tracing off still wraps the transport")
	}
}

// TestTraceRedactsQuery: the client span's url.full never holds the
// query the agent sent; the upstream still receives it.
func TestTraceRedactsQuery(t *testing.T) {
	exp, on := traced()
	allowAll := deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
		return policy.Decision{Action: policy.Allow}, nil
	})
	env := newTestServer(t, allowAll, on)
	res, err := http.Get(env.url + "/files?token=s3cr3t")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	_, spans := spansOf(t, exp, res.Header.Get(headerCallID))
	clients := ofKind(spans, trace.SpanKindClient)
	if len(clients) != 1 {
		t.Fatalf("%d client spans", len(clients))
	}
	full := attr(clients[0], "url.full")
	if strings.Contains(full, "s3cr3t") || !strings.HasSuffix(full, "/files?REDACTED") {
		t.Fatalf("client span url.full = %q", full)
	}
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), "s3cr3t") {
				t.Errorf("span %q attribute %s holds the query: %q", s.Name, kv.Key, kv.Value.String())
			}
		}
	}
	if reqs := env.upstream.Requests(); len(reqs) != 1 || reqs[0].Query != "token=s3cr3t" {
		t.Fatalf("upstream got %+v", reqs)
	}
}

// TestTraceHeldExecution: an approved call executed for its held agent is a
// toolgate.execute span inside the agent's request, with the client span
// under it.
func TestTraceHeldExecution(t *testing.T) {
	exp, on := traced()
	pe := newParkEnv(t, on)
	go func() {
		pc := pe.nextParked(t)
		if _, err := pe.store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice", Comment: ""}); err != nil {
			t.Error(err)
		}
	}()
	res := post(t, pe.url+"/tools/Write", `{"path":"notes/a.txt","content":"x"}`, "traceparent", agentParent)
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != 200 || res.Header.Get(headerDecision) != "approved" {
		t.Fatalf("status %d decision %q", res.StatusCode, res.Header.Get(headerDecision))
	}
	server, spans := spansOf(t, exp, res.Header.Get(headerCallID))
	execs := named(spans, "toolgate.execute")
	if len(execs) != 1 || execs[0].Parent.SpanID() != server.SpanContext.SpanID() || len(execs[0].Links) != 0 {
		t.Fatalf("execute spans %+v, want one child of the server span", execs)
	}
	clients := ofKind(spans, trace.SpanKindClient)
	if len(clients) != 1 || clients[0].Parent.SpanID() != execs[0].SpanContext.SpanID() {
		t.Fatalf("client spans %+v, want one under the execute span", clients)
	}
	reqs := pe.upstream.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests", len(reqs))
	}
	if tid, sid := parentOf(t, reqs[0].Header.Get("Traceparent")); tid.String() != agentTraceID || sid != clients[0].SpanContext.SpanID() {
		t.Fatalf("upstream traceparent %q", reqs[0].Header.Get("Traceparent"))
	}
}

// BenchmarkToolCallTraced is BenchmarkToolCall's allowed call with tracing
// on, every span sampled and handed to an exporter that drops it: the cost
// of tracing itself, without export.
func BenchmarkToolCallTraced(b *testing.B) {
	up := benchUpstream(b, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":"ok"}`)
	})
	u, _ := url.Parse(up.URL)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discardExporter{}))
	auth, _ := identity.New(identity.Config{Anonymous: true})
	s, err := New(Config{
		Upstreams: []Upstream{{Name: "u", URL: u}}, Auth: auth, TracerProvider: tp,
		Decider: seedEngineRules(b, "rules:\n  - {id: a, effect: allow, tool: tool0, target: \"docs/**\"}\n"),
	})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	body := `{"path":"docs/guide/intro.md","content":"` + strings.Repeat("x", 150) + `"}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest("POST", ts.URL+"/tools/tool0", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
}

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// TestTraceMethodsBounded: the caller picks an MCP message's method and id.
// One longer than maxRPCName is refused before anything is decided, logged
// or traced; a method the protocol does not define names its span "_OTHER",
// so that callers cannot make one span name per request in the backend's
// index.
func TestTraceMethodsBounded(t *testing.T) {
	exp, on := traced()
	env := newTestServer(t, seedEngine(t), on, func(c *Config) { c.Upstreams[0].Protocol = policy.KindMCP })
	send := func(body string) (*http.Response, string) {
		t.Helper()
		res := post(t, env.url+"/mcp", body, "Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2025-06-18")
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(raw)
	}
	long := strings.Repeat("m", 300) // past maxRPCName
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"x/` + long + `","params":{}}`,
		`{"jsonrpc":"2.0","id":"` + long + `","method":"ping"}`,
		`[{"jsonrpc":"2.0","id":"` + long + `","method":"ping"}]`,
	} {
		res, raw := send(body)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(raw, "longer than 256 bytes") || len(raw) > 1024 {
			t.Errorf("%.60s…: %d %.300s; want 400 saying what is too long, short", body, res.StatusCode, raw)
		}
		if len(env.upstream.Requests()) != 0 {
			t.Fatalf("the upstream got a message refused")
		}
	}
	names := map[string]bool{}
	for i := range 20 {
		res, _ := send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"made/up-%d","params":{}}`, i))
		server, _ := spansOf(t, exp, res.Header.Get(headerCallID))
		names[server.Name] = true
	}
	if len(names) != 1 || !names["_OTHER"] {
		t.Errorf("20 made-up methods gave the span names %v, want one: _OTHER", slices.Collect(maps.Keys(names)))
	}
}
