package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
)

// TestMCPProgressWhileHeld: a held tools/call whose client gave a progress
// token and accepts SSE hears notifications/progress while it waits, then
// the tool's answer, with its own JSON-RPC id, on the same stream.
func TestMCPProgressWhileHeld(t *testing.T) {
	old := progressEvery
	progressEvery = 50 * time.Millisecond
	defer func() { progressEvery = old }()

	up := testkit.NewUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		var msg map[string]any
		_ = json.NewDecoder(r.Body).Decode(&msg)
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg["id"], "result": map[string]any{
			"content": []any{map[string]any{"type": "text", "text": "written"}},
		}})
		_, _ = w.Write(b)
	})
	u, _ := url.Parse(up.URL)
	store := pending.NewMemory(pending.Options{})
	parked := make(chan pending.Call, 1)
	env := newTestServer(t, askAll, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "tools", URL: u, Protocol: "mcp", MCPPath: "/mcp"}}
		c.Pending, c.Hold, c.TTL = store, 5*time.Second, time.Minute
		c.OnPark = func(pc pending.Call) { parked <- pc }
	})
	go func() {
		pc := <-parked
		time.Sleep(300 * time.Millisecond)
		_, _ = store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice", Comment: ""})
	}()
	body := `{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"write_note","arguments":{"path":"notes/a"},"_meta":{"progressToken":"tok-1"}}}`
	req, _ := http.NewRequest("POST", env.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d type %q: %s", res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	var progress int
	var final map[string]any
	for line := range strings.SplitSeq(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var msg map[string]any
		if err := json.Unmarshal([]byte(data), &msg); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if msg["method"] == "notifications/progress" {
			if p, _ := msg["params"].(map[string]any); p["progressToken"] != "tok-1" {
				t.Fatalf("progress without the client's token: %v", msg)
			}
			progress++
			continue
		}
		final = msg
	}
	if executed := len(up.Requests()); progress < 2 || final == nil || final["id"] != "req-7" || final["result"] == nil || executed != 1 {
		t.Fatalf("%d progress events, final %v, executed %d; stream:\n%s", progress, final, executed, raw)
	}
}
