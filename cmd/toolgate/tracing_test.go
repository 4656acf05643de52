package main

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/toolgate/toolgate/internal/testkit"
)

func TestTracingWanted(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false}, // nothing set: off, not the SDK's otlp-to-localhost
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_METRICS_EXPORTER": "otlp"}, false},
	} {
		if got := tracingWanted(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: tracing %v, want %v", tc.env, got, tc.want)
		}
	}
}

// otlpReceiver is an OTLP/HTTP trace endpoint that decodes what it is
// sent, as a collector would.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
	bad   []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err == nil && r.Header.Get("Content-Encoding") == "gzip" {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
			body, err = io.ReadAll(zr)
		}
	}
	var req collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		o.bad = append(o.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+errString(err))
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	o.spans = append(o.spans, req.ResourceSpans...)
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// exported is every span received, with its resource's attributes.
type exportedSpan struct {
	resource map[string]string
	span     *tracepb.Span
}

func (o *otlpReceiver) exported() ([]exportedSpan, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []exportedSpan
	for _, rs := range o.spans {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out = append(out, exportedSpan{res, s})
			}
		}
	}
	return out, append([]string(nil), o.bad...)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv.Key] = kv.GetValue().GetStringValue()
	}
	return m
}

// TestServeExportsTraces runs `toolgate serve` configured only through the
// OTEL_* environment, exporting OTLP/HTTP protobuf to an in-process
// receiver. The batch delay is a minute, so the spans can only arrive
// through the flush at shutdown. (t.Setenv: the SDK reads the process
// environment, so this test cannot run in parallel.)
func TestServeExportsTraces(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	defer collector.Close()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	t.Setenv("OTEL_SERVICE_NAME", "")

	up := testkit.NewUpstream(t, nil)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": testConfig(up.URL),
		"rules.yaml":    "rules:\n  - {id: r1, effect: allow, tool: Read, target: \"*\"}\n  - {id: r2, effect: deny, tool: Read, target: secrets.txt}\n",
		"policy/p.rego": "package toolgate\n",
	})
	environ := []string{"AGENT_KEY=agent-key-1-0123456789", "TOOLGATE_APPROVALS_SECRET=" + testSecret}
	r := startServe(t, []string{"serve", "--config", filepath.Join(dir, "toolgate.yaml")}, environ)

	const agentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	call := func(path string) string {
		req, _ := http.NewRequest("POST", r.proxy+"/tools/Read", strings.NewReader(`{"path":"`+path+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer agent-key-1-0123456789")
		req.Header.Set("Traceparent", "00-"+agentTrace+"-00f067aa0ba902b7-01")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.Header.Get("X-Toolgate-Decision") + " " + res.Header.Get("X-Toolgate-Call-Id")
	}
	allowed, denied := call("a.txt"), call("secrets.txt")
	if !strings.HasPrefix(allowed, "allow ") || !strings.HasPrefix(denied, "deny ") {
		t.Fatalf("calls: %q %q", allowed, denied)
	}
	var traceparents []string
	for _, req := range up.Requests() {
		traceparents = append(traceparents, req.Header.Get("Traceparent"))
	}
	if len(traceparents) != 1 || !strings.HasPrefix(traceparents[0], "00-"+agentTrace+"-") || strings.HasSuffix(traceparents[0], "-00f067aa0ba902b7-01") {
		t.Fatalf("upstream traceparents %q: want the agent's trace with toolgate's client span as parent", traceparents)
	}
	if spans, _ := recv.exported(); len(spans) != 0 {
		t.Fatalf("%d spans exported before shutdown with a one-minute batch delay", len(spans))
	}

	r.cancel() // SIGTERM
	select {
	case code := <-r.done:
		if code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, r.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	r.done <- 0 // for startServe's cleanup

	spans, bad := recv.exported()
	if len(bad) > 0 {
		t.Fatalf("receiver refused exports: %q", bad)
	}
	decisions := map[string]string{} // call ID -> decision
	var servers, clients int
	for _, s := range spans {
		if s.resource["service.name"] != "toolgate" || s.resource["service.version"] != version {
			t.Fatalf("span %q resource %v", s.span.Name, s.resource)
		}
		if got := hex.EncodeToString(s.span.TraceId); got != agentTrace {
			t.Errorf("span %q in trace %s, want the agent's", s.span.Name, got)
		}
		a := attrMap(s.span.Attributes)
		switch {
		case s.span.Name == "toolgate.decide":
			decisions[a["toolgate.call_id"]] = a["toolgate.decision"]
		case s.span.Kind == tracepb.Span_SPAN_KIND_SERVER:
			servers++
			if s.span.Name != "POST /tools/{tool}" {
				t.Errorf("server span name %q", s.span.Name)
			}
		case s.span.Kind == tracepb.Span_SPAN_KIND_CLIENT:
			clients++
		}
	}
	allowedID, deniedID := strings.Fields(allowed)[1], strings.Fields(denied)[1]
	if decisions[allowedID] != "allow" || decisions[deniedID] != "deny" || servers != 2 || clients != 1 {
		t.Fatalf("exported %d spans: decisions %v, %d server, %d client", len(spans), decisions, servers, clients)
	}
}

// TestSpanLimits: span attribute values are bounded by default (a path or
// User-Agent up to the header limit would otherwise be kept whole in every
// queued span), and the environment's own bound wins.
func TestSpanLimits(t *testing.T) {
	t.Setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "")
	os.Unsetenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT")
	if got := spanLimits().AttributeValueLengthLimit; got != spanValueLimit {
		t.Errorf("default attribute value limit %d, want %d", got, spanValueLimit)
	}
	t.Setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "50")
	if got := spanLimits().AttributeValueLengthLimit; got != 50 {
		t.Errorf("with OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT=50: limit %d", got)
	}
}
