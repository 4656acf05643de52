package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracing is the trace pipeline the OTEL_* environment asks for. Its zero
// value is tracing off: no provider, nothing to flush.
type tracing struct {
	provider   trace.TracerProvider // nil: off
	propagator propagation.TextMapPropagator
	shutdown   func(context.Context) error
}

// tracingWanted reports whether the standard OTel environment asks for
// traces. toolgate has no tracing keys of its own. Unlike the SDK's
// default (otlp to localhost), nothing set means off: a sidecar must not
// dial a collector nobody configured.
func tracingWanted(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return true
}

// newTracing builds the trace pipeline from the process environment (the
// OTel SDK and exporters read it there): the exporter from
// OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_*, batching from OTEL_BSP_*,
// sampling from OTEL_TRACES_SAMPLER, propagators from OTEL_PROPAGATORS
// (default W3C trace context and baggage), and the resource from
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over service.name toolgate
// and service.version this build's version.
func newTracing(ctx context.Context, log *slog.Logger) (tracing, error) {
	if !tracingWanted(os.Getenv) {
		return tracing{}, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return tracing{}, fmt.Errorf("tracing (OTEL_TRACES_EXPORTER): %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "toolgate"), attribute.String("service.version", version)),
		resource.WithFromEnv(), // later detectors win: the environment overrides the defaults above
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return tracing{}, fmt.Errorf("tracing (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	// OpenTelemetry's errors (a failed export, a caller's baggage it could
	// not read) must not reach stderr as bare text lines: they go to the
	// JSON log, as warnings (tracing never fails a call).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing error", "error", err)
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithRawSpanLimits(spanLimits()))
	log.Info("tracing on", "exporter", fmt.Sprintf("%T", exp))
	return tracing{provider: tp, propagator: autoprop.NewTextMapPropagator(), shutdown: tp.Shutdown}, nil
}

// spanValueLimit bounds each span attribute's value, in bytes, unless
// OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT says otherwise. The SDK's default
// is no bound, and a request's path and User-Agent (up to the header
// limit, from callers without credentials too) become attributes: the
// batch processor's 2,048 queued spans would hold as much as 2,048
// requests' headers while a collector is slow.
const spanValueLimit = 1024

// spanLimits are the SDK's limits from the environment, with
// spanValueLimit unless the environment sets one.
func spanLimits() sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	if _, set := os.LookupEnv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"); !set {
		l.AttributeValueLengthLimit = spanValueLimit
	}
	return l
}

// flush exports the spans still buffered and stops the pipeline.
func (t tracing) flush(ctx context.Context) error {
	if t.shutdown == nil {
		return nil
	}
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("cannot flush spans: %w", err)
	}
	return nil
}
