package proxy

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/logurl"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// tracerName names the instrumentation scope of toolgate's own spans.
const tracerName = "github.com/toolgate/toolgate/proxy"

// Attribute keys. The MCP and gen_ai ones follow the OpenTelemetry MCP
// semantic conventions (Development status, so spelled out here rather than
// taken from a semconv package that may rename them).
const (
	attrCallID        = attribute.Key("toolgate.call_id")
	attrDecision      = attribute.Key("toolgate.decision")
	attrUpstream      = attribute.Key("toolgate.upstream")
	attrState         = attribute.Key("toolgate.state")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrOperationName = attribute.Key("gen_ai.operation.name")
	attrMCPMethod     = attribute.Key("mcp.method.name")
	attrMCPSession    = attribute.Key("mcp.session.id")
	attrMCPVersion    = attribute.Key("mcp.protocol.version")
	attrRPCRequestID  = attribute.Key("jsonrpc.request.id")
	attrHTTPRoute     = attribute.Key("http.route")
)

// tracing is the proxy's tracer and propagator. A nil *tracing is tracing
// off: every method is then a no-op that allocates nothing, and neither
// the handler nor the transports are wrapped, so the hot path pays one nil
// check per call.
type tracing struct {
	tracer trace.Tracer
	tp     trace.TracerProvider
	prop   propagation.TextMapPropagator
	// meters is a no-op: toolgate's metrics are Prometheus's (Metrics);
	// otelhttp would otherwise record its own through the global provider.
	meters metricnoop.MeterProvider
}

// newTracing returns the tracing cfg asks for, nil when it asks for none.
func newTracing(cfg Config) *tracing {
	if cfg.TracerProvider == nil {
		return nil
	}
	prop := cfg.Propagator
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return &tracing{tracer: cfg.TracerProvider.Tracer(tracerName), tp: cfg.TracerProvider, prop: prop}
}

// handler wraps the proxy listener's handler in a server span per request
// that continues the agent's trace (traceparent). It is named by method
// until the call is read; decide renames it.
func (t *tracing) handler(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	return otelhttp.NewHandler(h, "toolgate.proxy",
		otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(t.prop), otelhttp.WithMeterProvider(t.meters))
}

// transport wraps an upstream transport in a client span per request and
// writes the span's context into the request (traceparent), so the tool
// server's own spans join the call's trace.
func (t *tracing) transport(rt http.RoundTripper) http.RoundTripper {
	if t == nil {
		return rt
	}
	return otelhttp.NewTransport(redactQuery{rt},
		otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(t.prop), otelhttp.WithMeterProvider(t.meters))
}

// redactQuery runs inside the client span and rewrites its url.full
// without the query: a query string is what the agent sent and may hold
// credentials or tool arguments, which spans never carry.
type redactQuery struct{ base http.RoundTripper }

func (t redactQuery) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.RawQuery != "" {
		if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
			span.SetAttributes(attribute.String("url.full", logurl.URL(r.URL)))
		}
	}
	return t.base.RoundTrip(r)
}

// startDecide starts the toolgate.decide span around one policy decision.
// The span is nil when tracing is off.
func (t *tracing) startDecide(ctx context.Context) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	return t.tracer.Start(ctx, "toolgate.decide", trace.WithSpanKind(trace.SpanKindInternal))
}

// endDecide ends the decide span with what the call was and what was
// decided, and names the request's server span after the call: route-like
// for a REST tool call, "{mcp.method.name} {gen_ai.tool.name}" for MCP
// (both bounded by configuration and the upstream's tools, never by
// arguments). A policy error marks both spans as errors.
func (t *tracing) endDecide(span trace.Span, r *http.Request, c *call, err error) {
	if span == nil {
		return
	}
	server := trace.SpanFromContext(r.Context())
	if !span.IsRecording() && !server.IsRecording() {
		span.End()
		return
	}
	attrs := callAttributes(r, c)
	server.SetAttributes(attrs...)
	if name, route := spanName(r, c); name != "" {
		server.SetName(name)
		if route != "" {
			server.SetAttributes(attrHTTPRoute.String(route))
		}
	}
	span.SetAttributes(attrs...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "policy error")
		server.SetStatus(codes.Error, "policy error")
	}
	span.End()
}

// refused marks the request's server span with the call ID and outcome of
// a request toolgate refused before deciding it (401, 404, 400, 413...),
// so such requests can be found by call ID like decided ones.
func (t *tracing) refused(r *http.Request, c *call, outcome string) {
	if t == nil {
		return
	}
	if server := trace.SpanFromContext(r.Context()); server.IsRecording() {
		server.SetAttributes(attrCallID.String(c.id), attrDecision.String(outcome))
	}
}

// callAttributes describes a decided call: never its arguments or subject.
func callAttributes(r *http.Request, c *call) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, attrCallID.String(c.id), attrUpstream.String(c.up.Name), attrDecision.String(c.decision.Action.String()))
	if c.input != nil && c.input.Tool != nil {
		attrs = append(attrs, attrToolName.String(c.input.Tool.Name), attrOperationName.String("execute_tool"))
	}
	if c.mcp == nil {
		return attrs
	}
	if c.mcp.method != "" {
		attrs = append(attrs, attrMCPMethod.String(spanMethod(c.mcp.method)))
	}
	if v := r.Header.Get("Mcp-Session-Id"); v != "" {
		attrs = append(attrs, attrMCPSession.String(v))
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		attrs = append(attrs, attrMCPVersion.String(v))
	}
	if id := rpcIDString(c.mcp.id); id != "" {
		attrs = append(attrs, attrRPCRequestID.String(id))
	}
	return attrs
}

// spanMethod is an MCP method as spans name it: the protocol's own by
// name, any other "_OTHER", as the semantic conventions name an unknown
// HTTP method. The caller picks the method: as a span name it would make
// one name per request in the trace backend's index.
func spanMethod(method string) string {
	if policy.IsMCPMethod(method) {
		return method
	}
	return "_OTHER"
}

// rpcIDString is a JSON-RPC id as the semantic conventions spell it: a
// string id unquoted, a number as written.
func rpcIDString(id json.RawMessage) string {
	if len(id) == 0 || string(id) == "null" {
		return ""
	}
	var s string
	if id[0] == '"' && json.Unmarshal(id, &s) == nil {
		return s
	}
	return string(id)
}

// spanName is the server span's name for a decided call and its http.route
// when it has one; "" keeps the name the span started with (the method).
func spanName(r *http.Request, c *call) (name, route string) {
	switch {
	case c.mcp != nil && c.mcp.method != "":
		if c.mcp.isToolCall {
			return c.mcp.method + " " + c.input.Tool.Name, ""
		}
		return spanMethod(c.mcp.method), ""
	case c.mcp == nil && c.input != nil && c.input.Kind == policy.KindREST:
		route = c.up.Prefix + "tools/{tool}"
		return r.Method + " " + route, route
	}
	return "", ""
}

// startExecute starts the toolgate.execute span around sending an approved
// call. Executed for a held agent, it is a child of that request's span;
// executed by the sweeper, it is the root of a trace of its own, linked to
// the agent's trace when the agent sent a traceparent (stored with the
// call's headers). The span is nil when tracing is off.
func (t *tracing) startExecute(ctx context.Context, pc pending.Call) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrCallID.String(pc.ID), attrUpstream.String(pc.Upstream)),
	}
	if pc.Tool != "" {
		opts = append(opts, trace.WithAttributes(attrToolName.String(pc.Tool), attrOperationName.String("execute_tool")))
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		opts = append(opts, trace.WithNewRoot())
		if sr, err := decodeStored(pc.Request); err == nil {
			agent := trace.SpanContextFromContext(t.prop.Extract(context.Background(), propagation.HeaderCarrier(sr.Header)))
			if agent.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: agent}))
			}
		}
	}
	return t.tracer.Start(ctx, "toolgate.execute", opts...)
}

// endExecute ends the execute span with the call's final state; anything
// but executed is an error.
func (t *tracing) endExecute(span trace.Span, state pending.State, res pending.Result) {
	if span == nil {
		return
	}
	span.SetAttributes(attrState.String(string(state)), attribute.Int("http.response.status_code", res.Status))
	if state != pending.Executed {
		span.SetStatus(codes.Error, "approved call "+string(state))
	}
	span.End()
}
