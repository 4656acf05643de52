package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestTamperedCallNotSent: whoever can write to Redis changes a parked
// call's stored request after the policy evaluated it (the body, as a
// SETRANGE would) and the call is approved: toolgate refuses to run it, as
// its record no longer matches its seal, and the upstream receives nothing.
func TestTamperedCallNotSent(t *testing.T) {
	addr := testRedis(t)
	_, up := newNotes(t)
	ev := newEvents(t)
	prefix := newPrefix()
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": e2eConfig(up.URL, "redis://"+addr, prefix, ev.URL),
		"rules.yaml":    seedRulesYAML,
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	id := parkAsync(t, a.proxy, `{"path":"notes/seal.txt","content":"seal-marker-original"}`)

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	all, err := rdb.Keys(t.Context(), "*"+strings.TrimSuffix(prefix, ":")+"*").Result()
	var keys []string
	for _, k := range all {
		if strings.HasSuffix(k, "call:"+id) {
			keys = append(keys, k)
		}
	}
	if err != nil || len(keys) != 1 {
		t.Fatalf("the call's key among %v: %v", all, err)
	}
	v, err := rdb.Get(t.Context(), keys[0]).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	// The stored request is the last copy of the body (the info, which
	// approvers are shown, holds the first): what would be sent changes,
	// what approvers see does not.
	at := bytes.LastIndex(v, []byte("seal-marker-original"))
	if at < 0 || bytes.Count(v, []byte("seal-marker-original")) != 2 {
		t.Fatalf("the body is not stored twice in %q", v)
	}
	if err := rdb.SetRange(t.Context(), keys[0], int64(at), "seal-marker-TAMPERED").Err(); err != nil {
		t.Fatal(err)
	}

	if code := approveAPI(t, a.approvals, id, "alice-key-0123456789"); code != 200 {
		t.Fatalf("approve: %d", code)
	}
	st := waitState(t, a.proxy, id, "failed")
	if b, _ := json.Marshal(st); !strings.Contains(string(b), "does not match its seal") {
		t.Errorf("status %s, want it refused for its seal", b)
	}
	if n := len(up.Requests()); n != 0 {
		t.Errorf("the upstream received %d requests, want none", n)
	}
	if !strings.Contains(a.stderr.String(), "does not match its seal") {
		t.Error("no error logged for the tampered call")
	}
	if got := value(t, scrape(t, a.admin), "toolgate_approved_calls_seal_broken_total"); got != 1 {
		t.Errorf("toolgate_approved_calls_seal_broken_total %v, want 1", got)
	}
}

// TestSealAcrossSecretRotation: a call parked under one approvals secret
// runs on a replica whose secret changed since, as long as the old one is
// in approvals.previous_secrets.
func TestSealAcrossSecretRotation(t *testing.T) {
	addr := testRedis(t)
	_, up := newNotes(t)
	ev := newEvents(t)
	prefix := newPrefix()
	const newSecret = "a-new-approvals-secret-0123456789abcdef"
	cfg := e2eConfig(up.URL, "redis://"+addr, prefix, ev.URL)
	rotated := strings.Replace(cfg, "secret: "+testSecret, "secret: "+newSecret+"\n  previous_secrets: ["+testSecret+"]", 1)
	if rotated == cfg {
		t.Fatal("the config has no approvals secret to rotate")
	}
	dir := writeFiles(t, t.TempDir(), map[string]string{"old.yaml": cfg, "new.yaml": rotated, "rules.yaml": seedRulesYAML})

	old := startReplica(t, filepath.Join(dir, "old.yaml"))
	id := parkAsync(t, old.proxy, `{"path":"notes/rotated.txt","content":"x"}`)
	old.cancel()           // its sweeper must not be the one that runs the call
	old.done <- <-old.done // stopped; the cleanup reads it again

	b := startReplica(t, filepath.Join(dir, "new.yaml"))
	if code := approveAPI(t, b.approvals, id, "alice-key-0123456789"); code != 200 {
		t.Fatalf("approve: %d", code)
	}
	waitState(t, b.proxy, id, "executed")
	if n := len(up.Requests()); n != 1 {
		t.Errorf("the upstream received %d requests, want 1", n)
	}
}

// parkAsync makes an ask the agent does not wait for and returns its ID.
func parkAsync(t *testing.T, proxyBase, body string) string {
	t.Helper()
	res, out := agentCall(t, proxyBase, "write_note", body, "Prefer", "respond-async")
	var parked struct {
		CallID string `json:"call_id"`
	}
	if res.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(out), &parked) != nil || parked.CallID == "" {
		t.Fatalf("park: %d %s", res.StatusCode, out)
	}
	return parked.CallID
}

// waitState waits until the agent's status URL says the call is in state.
func waitState(t *testing.T, proxyBase, id, state string) map[string]any {
	t.Helper()
	var st map[string]any
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if st = callStatus(t, proxyBase, id, "agent-key-0123456789"); st["status"] == state {
			return st
		}
	}
	t.Fatalf("call %s: %v, want %s", id, st, state)
	return nil
}
