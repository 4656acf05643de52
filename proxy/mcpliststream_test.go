package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestStreamAskRefused: the GET of the MCP endpoint carries list answers
// too (a Last-Event-ID replay of a list answer toolgate filtered on its
// POST), so an ask for it is refused as one for a list is: parked, its
// answer would reach the caller unfiltered once approved.
func TestStreamAskRefused(t *testing.T) {
	mod := `package toolgate
ask contains {"id": "stream_look", "message": "the stream needs a look"} if {
	input.kind == "mcp"
	not input.tool
	input.http.method == "GET"
}
`
	engine, err := policy.New(context.Background(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true,
		Policies:  fstest.MapFS{"stream.rego": {Data: []byte(mod)}},
		RulesFile: itemsRulesFile(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: s1_0\nevent: message\ndata: "+listWithSecret+"\n\n")
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	store := pending.NewMemory(pending.Options{})
	parked := make(chan pending.Call, 4)
	env := newTestServer(t, engine, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
		c.Pending, c.Hold, c.TTL = store, 5*time.Second, time.Minute
		c.OnPark = func(pc pending.Call) { parked <- pc }
	})
	req, _ := http.NewRequest(http.MethodGet, env.url+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer agent-key")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Last-Event-ID", "s1_-1")
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(raw), "toolgate.list_ask") || len(parked) != 0 {
		t.Errorf("a GET stream the policy asks about: %d %s (%d parked), want it refused", res.StatusCode, raw, len(parked))
	}
}

// itemsRulesFile writes itemsEngine's rules table.
func itemsRulesFile(t *testing.T) string {
	t.Helper()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	err := os.WriteFile(rules, []byte(`rules:
  - {id: r1, effect: allow, tool: "mcp:resources/read", target: "file:///srv/docs/**"}
  - {id: r4, effect: deny, tool: "mcp:resources/read", target: "file:///srv/docs/secrets/**", message: "never"}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// TestListStreamStillStreams: an SSE GET stream is
// relayed event by event, not buffered until the upstream closes it.
func TestListStreamStillStreams(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "Text/Event-Stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "event: message\ndata: "+listWithSecret+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) })
	upURL, _ := url.Parse(up.URL)
	env := itemsServer(t, upURL)
	req, _ := http.NewRequest(http.MethodGet, env.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer agent-key")
	req.Header.Set("Accept", "text/event-stream")
	res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got := make(chan string, 1)
	go func() {
		br := bufio.NewReader(res.Body)
		for {
			line, err := br.ReadString('\n')
			if strings.HasPrefix(line, "data:") || err != nil {
				got <- line
				return
			}
		}
	}()
	select {
	case line := <-got:
		if strings.Contains(line, "secrets") || !strings.Contains(line, "readme") {
			t.Errorf("first event not filtered: %s", line)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the GET stream's first event did not arrive while the stream stayed open")
	}
}

// gatedStream is an MCP upstream whose GET stream writes events[0],
// then each next event when the test sends on the returned channel.
func gatedStream(t *testing.T, events []string) (*url.URL, chan<- struct{}) {
	t.Helper()
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i, ev := range events {
			if i > 0 {
				select {
				case <-next:
				case <-r.Context().Done():
					return
				}
			}
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	return u, next
}

// streamAnswer is toolgate's answer to a GET of the MCP endpoint (the
// server's stream); the body is closed at the test's end.
func streamAnswer(t *testing.T, base string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer agent-key")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// getStream opens the GET stream through toolgate (streamAnswer), which
// must be a 200.
func getStream(t *testing.T, base string) *http.Response {
	t.Helper()
	res := streamAnswer(t, base)
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET stream: %d %s", res.StatusCode, b)
	}
	return res
}

// openStream opens the GET stream through toolgate and returns a
// function that reads the next event's data.
func openStream(t *testing.T, base string) func() string {
	t.Helper()
	br := bufio.NewReaderSize(getStream(t, base).Body, 1<<20)
	return func() string {
		for {
			line, err := br.ReadString('\n')
			if strings.HasPrefix(line, "data:") {
				return line
			}
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
		}
	}
}

// TestStreamListDecidedAfterReload: a GET stream lives as long as its
// session, and each list answer on it is decided under the policy in
// force when it comes: a resource a reload denies is not listed in a
// later answer on the same stream.
func TestStreamListDecidedAfterReload(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	write := func(body string) {
		if err := os.WriteFile(rules, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`rules:
  - {id: r1, effect: allow, tool: "mcp:resources/read", target: "file:///srv/docs/**"}
`)
	engine, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, RulesFile: rules})
	if err != nil {
		t.Fatal(err)
	}
	ev := func(id int) string {
		return "id: s_" + strconv.Itoa(id) + "\nevent: message\ndata: " + `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) +
			`,"result":{"resources":[{"uri":"file:///srv/docs/readme.md","name":"readme"}]}}` + "\n\n"
	}
	upURL, next := gatedStream(t, []string{ev(1), ev(2)})
	env := newTestServer(t, engine, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
	})
	read := openStream(t, env.url)
	if first := read(); !strings.Contains(first, "readme.md") {
		t.Fatalf("first list answer on the stream: %s, want readme listed", first)
	}
	// The policy changes: docs are no longer readable.
	write(`rules:
  - {id: r4, effect: deny, tool: "mcp:resources/read", target: "file:///srv/docs/**", message: "revoked"}
`)
	if err := engine.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	next <- struct{}{}
	if second := read(); strings.Contains(second, "readme.md") {
		t.Errorf("after a reload that denies it, a later list answer on the same GET stream still lists it: %s", second)
	}
}

// TestStreamListBoundPerEvent: on a GET stream, which has no end, the
// bound on decisions is each event's: three answers of 4,000 tools each
// are listed whole.
func TestStreamListBoundPerEvent(t *testing.T) {
	engine := mcpEngineRules(t, `{id: a1, effect: allow, tool: "*", target: "*"}`)
	const perEvent = 4000
	var tools []string
	for i := range perEvent {
		tools = append(tools, `{"name":"t`+strconv.Itoa(i)+`","inputSchema":{"type":"object"}}`)
	}
	ev := func(id int) string {
		return "id: s_" + strconv.Itoa(id) + "\nevent: message\ndata: " + `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) +
			`,"result":{"tools":[` + strings.Join(tools, ",") + `]}}` + "\n\n"
	}
	upURL, next := gatedStream(t, []string{ev(1), ev(2), ev(3)})
	env := newTestServer(t, engine, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "tools", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: 60 * time.Second}}
	})
	read := openStream(t, env.url)
	count := func(line string) int {
		var msg struct {
			Result struct{ Tools []json.RawMessage }
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data:")), &msg); err != nil {
			t.Fatalf("event data: %v", err)
		}
		return len(msg.Result.Tools)
	}
	for i := 1; i <= 3; i++ {
		if i > 1 {
			next <- struct{}{}
		}
		if n := count(read()); n != perEvent {
			t.Errorf("list answer %d on the GET stream (%d tools, all allowed): %d listed", i, perEvent, n)
		}
	}
}

// TestStreamUnicodeSpaceAndName: on the GET stream the same two readings
// are filtered: data led by U+00A0, and an event named "message " whose
// data is JSON only after the go-sdk's per-line trim.
func TestStreamUnicodeSpaceAndName(t *testing.T) {
	msg := secretList("7")
	i := strings.Index(msg, `"result"`)
	events := []string{
		"event: message\ndata: \u00a0" + msg + "\n\n",
		"event: message \ndata: " + msg[:i] + "\v\ndata: " + msg[i:] + "\n\n",
	}
	upURL, next := gatedStream(t, events)
	env := itemsServer(t, upURL)
	read := openStream(t, env.url)
	if first := read(); strings.Contains(first, "key.pem") {
		t.Errorf("GET stream, data led by U+00A0: unfiltered: %q", first)
	}
	next <- struct{}{}
	// Read as the go-sdk reads it, and written again as one line.
	if second := read(); strings.Contains(second, "key.pem") || !strings.Contains(second, "readme.md") {
		t.Errorf("GET stream, event named \"message \": %q, want it filtered", second)
	}
}
