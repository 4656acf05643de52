package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
)

// TestRedisUnsafeSettings: on a Redis that evicts keys when full, toolgate
// starts and serves, and says so: an error in its log, the metric
// toolgate_redis_unsafe_settings, and the store's part of /readyz, which
// stays ready (and says the transitions run as
// Redis functions).
func TestRedisUnsafeSettings(t *testing.T) {
	testRedis(t)
	addr, _ := testkit.RedisServer(t, "--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl", "--appendonly", "yes", "--appendfsync", "always")
	_, up := newNotes(t)
	dir := writeFiles(t, t.TempDir(), map[string]string{
		"toolgate.yaml": e2eConfig(up.URL, "redis://"+addr, newPrefix(), "http://127.0.0.1:1"),
		"rules.yaml":    seedRulesYAML,
	})
	a := startReplica(t, filepath.Join(dir, "toolgate.yaml"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, store := readyStore(t, a.admin)
		if p, _ := store["unsafe_settings"].([]any); len(p) == 1 {
			if s, _ := p[0].(string); !strings.Contains(s, addr+": maxmemory-policy is volatile-ttl") || status != 200 || store["ok"] != true {
				t.Fatalf("readyz: %d %v", status, store)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz never listed the eviction policy: %v", store)
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, err := http.Get(a.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), "\ntoolgate_redis_unsafe_settings 1\n") {
		t.Error("the metric toolgate_redis_unsafe_settings is not 1")
	}
	if log := a.stderr.String(); !strings.Contains(log, `"msg":"Redis may lose parked calls"`) {
		t.Errorf("no error logged about the eviction policy:\n%s", log)
	}
	if res, body := agentCall(t, a.proxy, "write_note", `{"path":"notes/x.txt","content":"x"}`, "Prefer", "respond-async"); res.StatusCode != 202 {
		t.Fatalf("ask on a Redis that may evict: %d %s, want it parked all the same", res.StatusCode, body)
	}
	// the function library the transitions run as is loaded (by a
	// readiness check or that park)
	if _, store := readyStore(t, a.admin); store["scripts"] != "functions" {
		t.Errorf("readyz after a park: store %v, want scripts: functions", store)
	}
}
