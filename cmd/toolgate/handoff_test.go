package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestApprovalBesideHeldRequest: an approval made on the replica that
// holds the agent's request claims the call for it in the same step (the
// approvals listener and the proxy share one lifecycle.Handoff). The
// store's messages for the call say so: it goes from waiting to executing,
// never published as approved, and the agent gets the tool's answer.
func TestApprovalBesideHeldRequest(t *testing.T) {
	addr := testRedis(t)
	_, up := newNotes(t)
	ev := newEvents(t)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": e2eConfig(up.URL, "redis://"+addr, newPrefix(), ev.URL),
		"rules.yaml":    seedRulesYAML,
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	sub := rdb.PSubscribe(t.Context(), "*")
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(t.Context()); err != nil { // the subscription is live
		t.Fatal(err)
	}

	type answer struct {
		code int
		body string
	}
	done := make(chan answer, 1)
	go func() {
		res, body := agentCall(t, a.proxy, "write_note", `{"path":"notes/handoff.txt","content":"x"}`)
		done <- answer{res.StatusCode, body}
	}()
	id := waitingCall(t, a.approvals)
	if code := approveAPI(t, a.approvals, id, "alice-key-0123456789"); code != 200 {
		t.Fatalf("approve: %d", code)
	}
	if got := <-done; got.code != 200 || !strings.Contains(got.body, `"bytes"`) {
		t.Fatalf("agent: %d %s, want the tool's answer", got.code, got.body)
	}
	var states []string
	msgs := sub.Channel()
	for end := time.After(5 * time.Second); len(states) == 0 || states[len(states)-1] != "executed"; {
		select {
		case m := <-msgs:
			if cid, st, ok := strings.Cut(m.Payload, " "); ok && cid == id {
				states = append(states, st)
			}
		case <-end:
			t.Fatalf("messages for %s: %v, never executed", id, states)
		}
	}
	if strings.Join(states, ",") != "executing,executed" {
		t.Errorf("messages for %s: %v; want executing, executed: claimed with its approval", id, states)
	}
	if n := len(up.Requests()); n != 1 {
		t.Errorf("the upstream saw %d requests, want 1", n)
	}
}
