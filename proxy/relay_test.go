package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/pending"
)

// TestApprovedAnswerStreams: an approved MCP call's SSE answer reaches the
// held agent event by event: the agent sees the upstream's first event
// (a progress notification, with the agent's own progress token) before
// the upstream writes its second (the result, with the agent's id).
func TestApprovedAnswerStreams(t *testing.T) {
	firstSeen := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\n" +
			"data: \"params\":{\"progressToken\":\"p-stored\",\"progress\":1}}\n\n"))
		_ = rc.Flush()
		select { // the second event is written only once the agent saw the first
		case <-firstSeen:
		case <-time.After(5 * time.Second):
			return
		}
		_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n"))
	}))
	res, store := heldRelayCall(t, upstream, 0)
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("answer %d %s, want an SSE stream", res.StatusCode, ct)
	}
	var msgs []map[string]any
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if m["method"] == "notifications/progress" && m["params"].(map[string]any)["progress"] == float64(1) {
			close(firstSeen) // only a relayed event can unblock the upstream
		}
		msgs = append(msgs, m)
	}
	var progress, result map[string]any
	for _, m := range msgs {
		if m["method"] == "notifications/progress" && m["params"].(map[string]any)["progress"] == float64(1) {
			progress = m
		}
		if m["result"] != nil {
			result = m
		}
	}
	if progress == nil || result == nil {
		t.Fatalf("events %v: want the upstream's progress, then its result", msgs)
	}
	if tok := progress["params"].(map[string]any)["progressToken"]; tok != "p-agent" {
		t.Errorf("relayed progress token %v, want the agent's p-agent", tok)
	}
	if result["id"] != "agent-7" {
		t.Errorf("relayed result id %v, want the agent's agent-7", result["id"])
	}
	if pc, _ := store.Get(context.Background(), callIDOf(t, res)); pc.State != pending.Executed || pc.Result == nil || !strings.Contains(string(pc.Result.Body), "done") {
		t.Errorf("stored result: %s %+v", pc.State, pc.Result)
	}
}

// heldRelayCall sends an MCP tools/call, asked and approved at once, whose
// agent waits on an SSE stream, to a toolgate in front of upstream (with
// maxResult as MaxResultBytes when not 0). The answer's body is the
// caller's to close; it is closed at the end of the test too.
func heldRelayCall(t *testing.T, upstream *httptest.Server, maxResult int64) (*http.Response, *pending.MemoryStore) {
	t.Helper()
	t.Cleanup(upstream.Close)
	u, _ := url.Parse(upstream.URL)
	store := pending.NewMemory(pending.Options{})
	parked := make(chan pending.Call, 1)
	env := newTestServer(t, askAll, func(c *Config) {
		c.Upstreams[0].URL, c.Upstreams[0].Protocol, c.Upstreams[0].MCPPath = u, "mcp", "/mcp"
		c.Pending, c.Hold, c.MaxBodyBytes = store, 10*time.Second, 1<<16
		if maxResult > 0 {
			c.MaxResultBytes = maxResult
		}
		c.OnPark = func(pc pending.Call) { parked <- pc }
	})
	go func() {
		pc := <-parked
		_, _ = store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice"})
	}()
	body := `{"jsonrpc":"2.0","id":"agent-7","method":"tools/call","params":{"name":"write_note","arguments":{"path":"a"},"_meta":{"progressToken":"p-agent"}}}`
	req, _ := http.NewRequest(http.MethodPost, env.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Authorization", "Bearer agent-key")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res, store
}

func callIDOf(t *testing.T, res *http.Response) string {
	t.Helper()
	id := res.Header.Get(headerCallID)
	if id == "" {
		t.Fatal("no call ID header")
	}
	return id
}

// TestRelayBoundsAnEvent: an upstream event larger than the relay holds
// (maxRelayEvent) is not relayed, and the events after it are; the stored
// result keeps whole lines up to MaxResultBytes and says it was cut.
func TestRelayBoundsAnEvent(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		progress := func(n int) string {
			return `event: message` + "\n" + `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":` + strconv.Itoa(n) + `}}` + "\n\n"
		}
		_, _ = io.WriteString(w, progress(1))
		_, _ = io.WriteString(w, `event: message`+"\n"+`data: {"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`)
		chunk := strings.Repeat("x", 64<<10)
		for range maxRelayEvent/len(chunk) + 1 {
			_, _ = io.WriteString(w, chunk)
		}
		_, _ = io.WriteString(w, `"}}`+"\n\n")
		_, _ = io.WriteString(w, progress(2))
		_, _ = io.WriteString(w, `event: message`+"\n"+`data: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}]}}`+"\n\n")
	}))
	res, store := heldRelayCall(t, upstream, 4<<10)
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if !strings.Contains(text, `"progress":1`) || !strings.Contains(text, `"progress":2`) {
		t.Errorf("the events around the large one were not relayed: %.400s", text)
	}
	if !strings.Contains(text, `"id":"agent-7"`) || !strings.Contains(text, `"done"`) {
		t.Errorf("the result did not reach the agent: %.400s", text)
	}
	if strings.Contains(text, "notifications/message") || len(raw) > 64<<10 {
		t.Errorf("the event past maxRelayEvent was relayed (%d bytes answered)", len(raw))
	}
	pc, _ := store.Get(context.Background(), callIDOf(t, res))
	if pc.Result == nil || !pc.Result.Truncated || len(pc.Result.Body) > 4<<10 {
		t.Errorf("stored result: %+v, want one cut to MaxResultBytes", pc.Result)
	}
}
