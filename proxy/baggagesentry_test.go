package proxy

import (
	"testing"
)

// TestGrantSentryBaggage: Sentry SDKs send, beside sentry-trace, a
// Baggage header whose sentry-trace_id (and sentry-sample_rand) is new
// with every trace. A grant is bound to Baggage but for a tracer's own
// members: one made from a Sentry-instrumented agent's call covers its
// call in the next trace.
func TestGrantSentryBaggage(t *testing.T) {
	bag := func(trace string) string {
		return "sentry-trace_id=" + trace + ",sentry-environment=production,sentry-public_key=49d0f7386ad645858ae85020e393bef3,sentry-sample_rate=1,sentry-sampled=true"
	}
	_, send := grantFromFirstCall(t, "Sentry-Trace", "771a43a4192642f0b136d5159a501700-b1a2c3d4e5f60708-1", "Baggage", bag("771a43a4192642f0b136d5159a501700"))
	status, decision, _ := send(`{"path":"a.txt","content":"one"}`, "Sentry-Trace", "88e1b2c3d4e5f60718293a4b5c6d7e8f-c1a2c3d4e5f60708-1", "Baggage", bag("88e1b2c3d4e5f60718293a4b5c6d7e8f"))
	if status != 200 || decision != outcomeAllow {
		t.Errorf("the agent's next call (next trace) under the grant: %d %q, want 200 allow", status, decision)
	}
}

// TestRetrySentryBaggage: the same agent's retry of its parked call
// (same Idempotency-Key, same arguments) made from a new trace attaches:
// only Sentry's per-trace baggage differs.
func TestRetrySentryBaggage(t *testing.T) {
	pe, send := retryEnv(t)
	first := parkApproved(t, pe, send, "Idempotency-Key", "k1", "Sentry-Trace", "771a43a4192642f0b136d5159a501700-b1a2c3d4e5f60708-1", "Baggage", "sentry-trace_id=771a43a4192642f0b136d5159a501700,sentry-public_key=49d0")
	if status, id := send("Idempotency-Key", "k1", "Sentry-Trace", "88e1b2c3d4e5f60718293a4b5c6d7e8f-c1a2c3d4e5f60708-1", "Baggage", "sentry-trace_id=88e1b2c3d4e5f60718293a4b5c6d7e8f,sentry-public_key=49d0"); status != 200 || id != first.ID {
		t.Errorf("retry from a new trace: %d as call %q, want the parked call's answer (200, %s)", status, id, first.ID)
	}
}

// TestGrantBaggageApplicationMembers: the application's members of
// Baggage stay bound beside a tracer's: a grant made from a call on
// tenant=sandbox does not cover one on tenant=prod, whatever the trace.
func TestGrantBaggageApplicationMembers(t *testing.T) {
	_, send := grantFromFirstCall(t, "Baggage", "tenant=sandbox,sentry-trace_id=771a43a4192642f0b136d5159a501700")
	if status, decision, _ := send(`{"path":"a.txt","content":"one"}`, "Baggage", "sentry-trace_id=88e1b2c3d4e5f60718293a4b5c6d7e8f, tenant=sandbox"); status != 200 || decision != outcomeAllow {
		t.Errorf("tenant=sandbox in another trace: %d %q, want 200 allow", status, decision)
	}
	if status, decision, _ := send(`{"path":"a.txt","content":"two"}`, "Baggage", "tenant=prod,sentry-trace_id=88e1b2c3d4e5f60718293a4b5c6d7e8f"); status == 200 {
		t.Errorf("tenant=prod under a grant made on tenant=sandbox: %d %q, want it to ask", status, decision)
	}
}
