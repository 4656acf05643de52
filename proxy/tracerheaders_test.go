package proxy

import (
	"testing"
)

// perAttemptTracers are per-attempt trace headers of widespread tracers that
// inject them into every outgoing HTTP request (a new span, so a new
// parent ID, on each attempt; a new trace ID for a retry from a new
// trace), as Traceparent, B3 and Sentry-Trace, which are usual headers.
var perAttemptTracers = []struct {
	name          string
	first, second []string
}{
	{
		"datadog",
		[]string{"X-Datadog-Trace-Id", "1234567890123456789", "X-Datadog-Parent-Id", "987654321098765432", "X-Datadog-Sampling-Priority", "1", "X-Datadog-Tags", "_dd.p.dm=-0,_dd.p.tid=66f1a2b300000000"},
		[]string{"X-Datadog-Trace-Id", "2234567890123456789", "X-Datadog-Parent-Id", "887654321098765432", "X-Datadog-Sampling-Priority", "1", "X-Datadog-Tags", "_dd.p.dm=-0,_dd.p.tid=66f1a2c400000000"},
	},
	{
		"jaeger",
		[]string{"Uber-Trace-Id", "6d7a1b2c3d4e5f60:1a2b3c4d5e6f7081:0:1"},
		[]string{"Uber-Trace-Id", "7e8b2c3d4e5f6071:2b3c4d5e6f708192:0:1"},
	},
	{
		"elastic",
		[]string{"Elastic-Apm-Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		[]string{"Elastic-Apm-Traceparent", "00-1bf7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"},
	},
}

// TestTracerRetryAttaches: an agent instrumented with Datadog (or
// Jaeger, or Elastic APM) retries its parked call with the same
// Idempotency-Key from a new attempt: only the tracer's per-attempt
// headers differ. It is a genuine retry and attaches, as one differing
// only in Traceparent, B3 or Sentry-Trace does.
func TestTracerRetryAttaches(t *testing.T) {
	for _, tc := range perAttemptTracers {
		t.Run(tc.name, func(t *testing.T) {
			pe, send := retryEnv(t)
			first := parkApproved(t, pe, send, append([]string{"Idempotency-Key", "k-" + tc.name}, tc.first...)...)
			if status, id := send(append([]string{"Idempotency-Key", "k-" + tc.name}, tc.second...)...); status != 200 || id != first.ID {
				t.Errorf("the SDK's retry with new %s trace headers: %d as call %q, want the parked call's answer (200, %s)", tc.name, status, id, first.ID)
			}
		})
	}
}

// TestTracerGrantCovers: a grant made from such an agent's call covers
// its next call, whose trace headers are new; so does one made from an
// Azure SDK's call, whose x-ms-client-request-id (kept across its
// retries, as Amz-Sdk-Invocation-Id) is new with every call.
func TestTracerGrantCovers(t *testing.T) {
	azure := struct {
		name          string
		first, second []string
	}{"azure", []string{"X-Ms-Client-Request-Id", "0f8fad5b-d9cb-469f-a165-70867728950e"}, []string{"X-Ms-Client-Request-Id", "7c9e6679-7425-40de-944b-e07fc1f90ae7"}}
	for _, tc := range append(perAttemptTracers, azure) {
		t.Run(tc.name, func(t *testing.T) {
			_, send := grantFromFirstCall(t, tc.first...)
			if status, decision, _ := send(`{"path":"a.txt","content":"one"}`, tc.second...); status != 200 || decision != outcomeAllow {
				t.Errorf("the agent's next call (new %s trace) under the grant: %d %q, want 200 allow", tc.name, status, decision)
			}
		})
	}
}
