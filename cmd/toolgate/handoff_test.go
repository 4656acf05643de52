package main

import (
	"path/filepath"
	"strconv"
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
	msgs := sub.Channel()
	// The approval can win the race with the request's own registration
	// (the call is listed the moment it is parked, and the request joins
	// the hand-off a step later): then the store publishes it approved and
	// the request claims it the usual way, which is correct, and slower. A
	// loaded machine can lose that race, so a few calls are made; one
	// approved beside its held request must be claimed in the same step.
	const tries = 3
	var states []string
	for try := range tries {
		done := make(chan answer, 1)
		go func() {
			res, body := agentCall(t, a.proxy, "write_note", `{"path":"notes/handoff`+strconv.Itoa(try)+`.txt","content":"x"}`)
			done <- answer{res.StatusCode, body}
		}()
		id := waitingCall(t, a.approvals)
		if code := approveAPI(t, a.approvals, id, "alice-key-0123456789"); code != 200 {
			t.Fatalf("approve: %d", code)
		}
		if got := <-done; got.code != 200 || !strings.Contains(got.body, `"bytes"`) {
			t.Fatalf("agent: %d %s, want the tool's answer", got.code, got.body)
		}
		states = nil
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
		if strings.Join(states, ",") == "executing,executed" {
			if n := len(up.Requests()); n != try+1 {
				t.Errorf("the upstream saw %d requests, want %d", n, try+1)
			}
			return
		}
		t.Logf("try %d: messages for %s: %v (the approval came before the request joined the hand-off)", try, id, states)
	}
	t.Errorf("messages: %v in each of %d tries; want executing, executed: claimed with its approval", states, tries)
}
