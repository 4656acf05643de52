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
	// Export failures must not reach stderr as bare text lines: they go
	// to the JSON log, as warnings (tracing never fails a call).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: export failed", "error", err)
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log.Info("tracing on", "exporter", fmt.Sprintf("%T", exp))
	return tracing{provider: tp, propagator: autoprop.NewTextMapPropagator(), shutdown: tp.Shutdown}, nil
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
