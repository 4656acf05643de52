package proxy

import (
	"testing"
)

// TestGrantAwsSdkInvocationID: Smithy-generated (AWS) SDKs send a new
// amz-sdk-invocation-id with every call (the same on its retries): a
// usual header, so a grant made from one such call covers the next.
func TestGrantAwsSdkInvocationID(t *testing.T) {
	_, send := grantFromFirstCall(t, "amz-sdk-invocation-id", "7f8a2c1e-0000-4000-8000-000000000001", "amz-sdk-request", "attempt=1; max=3")
	status, decision, _ := send(`{"path":"a.txt","content":"one"}`, "amz-sdk-invocation-id", "7f8a2c1e-0000-4000-8000-000000000002", "amz-sdk-request", "attempt=1; max=3")
	if status != 200 || decision != outcomeAllow {
		t.Errorf("the SDK's next call (new invocation id, first attempt) under the grant: %d %q, want 200 allow", status, decision)
	}
}

// TestGrantStainlessRetry: a Stainless SDK's call that ran under a grant,
// retried by the SDK (same Idempotency-Key, X-Stainless-Retry-Count 1, after
// a 5xx or a read timeout), is covered by the grant as its first attempt
// was, not parked for an approver.
func TestGrantStainlessRetry(t *testing.T) {
	_, send := grantFromFirstCall(t, "X-Stainless-Retry-Count", "0", "X-Stainless-Lang", "python")
	body := `{"path":"a.txt","content":"one"}`
	if status, decision, _ := send(body, "X-Stainless-Retry-Count", "0", "X-Stainless-Lang", "python", "Idempotency-Key", "stainless-python-retry-2"); status != 200 || decision != outcomeAllow {
		t.Fatalf("first attempt under the grant: %d %q", status, decision)
	}
	status, decision, id := send(body, "X-Stainless-Retry-Count", "1", "X-Stainless-Lang", "python", "Idempotency-Key", "stainless-python-retry-2", "Prefer", "respond-async")
	if status != 200 || decision != outcomeAllow {
		t.Errorf("the SDK's retry of a granted call (X-Stainless-Retry-Count: 1): %d %q (call %s), want 200 allow under the grant", status, decision, id)
	}
}
