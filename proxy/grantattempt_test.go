package proxy

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"
)

// grantFromFirstCall parks a first call sending first, grants from it, and
// returns a sender for later calls.
func grantFromFirstCall(t *testing.T, first ...string) (*pending.MemoryStore, func(body string, h ...string) (int, string, string)) {
	t.Helper()
	store := pending.NewMemory(pending.Options{})
	env := newTestServer(t, seedEngineRules(t, "rules:\n  - {id: r3, effect: ask, tool: Write, target: \"*\"}\n"), func(c *Config) {
		c.Pending, c.Grants, c.Hold = store, store, 100*time.Millisecond
		c.GrantKey = grantKeyForTests
	})
	ctx := context.Background()
	send := func(body string, h ...string) (int, string, string) {
		t.Helper()
		res := post(t, env.url+"/tools/Write", body, append([]string{"Authorization", "Bearer agent-key"}, h...)...)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, res.Header.Get(headerDecision), res.Header.Get(headerCallID)
	}
	if status, _, _ := send(`{"path":"a.txt","content":"zero"}`, append(first, "Prefer", "respond-async")...); status != 202 {
		t.Fatalf("first call: %d", status)
	}
	calls, err := store.List(ctx, pending.Waiting, 10)
	if err != nil || len(calls) != 1 {
		t.Fatalf("listed %d waiting calls, %v", len(calls), err)
	}
	p0 := calls[0]
	if _, err := store.Grant(ctx, pending.Grant{
		Subject: p0.Principal, Upstream: p0.Upstream, Tool: p0.Tool, Target: "a.txt",
		Extras: callinfo.Decode(p0.Info).GrantExtras, Approver: "alice", CallID: p0.ID,
	}, time.Hour); err != nil {
		t.Fatal(err)
	}
	return store, send
}

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
