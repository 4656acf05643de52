package proxy

import (
	"bufio"
	"bytes"
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
	"time"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestListArrayKeepsOtherMembers: a JSON array of messages is written
// back as it came but for what was filtered: a member the filter did not
// touch keeps its bytes (json.Marshal would compact it and escape its "<"
// and "&").
func TestListArrayKeepsOtherMembers(t *testing.T) {
	other := `{"jsonrpc": "2.0", "id": 2, "result": {"note": "a<b & c>d"}}`
	res, raw := listThrough(t, http.StatusOK, "application/json", "["+listWithSecret+","+other+"]", "2025-03-26")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", res.StatusCode, raw)
	}
	if !strings.Contains(string(raw), other) {
		t.Errorf("a batch member the filter did not touch was rewritten:\nupstream: %s\nclient:   %s", other, raw)
	}
}

// TestListAfterAByteOrderMark: an event stream may begin with a UTF-8 BOM,
// which an SSE reader drops (the TypeScript SDK's client reads the body
// through TextDecoderStream, which strips it): the list answer in the
// event after it is filtered too.
func TestListAfterAByteOrderMark(t *testing.T) {
	body := "\ufeffdata: " + listWithSecret + "\n\n"
	res, raw := listThrough(t, http.StatusOK, "text/event-stream", body, "2025-06-18")
	// Read the answer as a WHATWG SSE client does: drop a leading BOM.
	text := string(bytes.TrimPrefix(raw, []byte("\ufeff")))
	for _, ev := range sseEvents([]byte(text)) {
		if ev.hasData && strings.Contains(ev.data, "secrets/key.pem") {
			t.Errorf("%d: a denied resource reached the client in an event after a BOM: %q", res.StatusCode, ev.data)
		}
	}
}

// TestListBesideANamedKeepAlive: an SSE list answer that carries, beside
// the result, an event of another name whose data is not JSON ("event:
// ping / data: ping") is filtered and relayed: MCP clients skip events
// not named "message", so only those must be JSON.
func TestListBesideANamedKeepAlive(t *testing.T) {
	body := "event: ping\ndata: ping\n\n" + "event: message\ndata: " + listWithSecret + "\n\n"
	res, raw := listThrough(t, http.StatusOK, "text/event-stream", body, "2025-06-18")
	if res.StatusCode != http.StatusOK || strings.Contains(string(raw), "secrets/key.pem") || !strings.Contains(string(raw), "readme.md") {
		t.Errorf("a list answer beside a named keep-alive event: %d %s, want it filtered and relayed", res.StatusCode, raw)
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

// openStream opens the GET stream through toolgate and returns a
// function that reads the next event's data.
func openStream(t *testing.T, base string) func() string {
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
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET stream: %d %s", res.StatusCode, b)
	}
	br := bufio.NewReaderSize(res.Body, 1<<20)
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
