package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestRelayMidStreamByteOrderMark: a byte order mark before an event in
// mid-stream is kept by every SSE reader (the field is "\ufeffdata",
// ignored), so the live relay, which reads the stream event by event, does
// not take that event's data for the answer either.
func TestRelayMidStreamByteOrderMark(t *testing.T) {
	real := `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"REAL"}]}}`
	fake := `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"FAKE"}]}}`
	body := "data: " + real + "\n\n" + "\ufeffdata: " + fake + "\n\n"
	// What a client reading the upstream's stream (and toolgate's stored
	// result) takes as the response: only REAL.
	var datas []string
	for _, ev := range sseEvents([]byte(body)) {
		if ev.hasData {
			datas = append(datas, ev.data)
		}
	}
	if len(datas) != 1 || !strings.Contains(datas[0], "REAL") {
		t.Fatalf("whole-stream reading: %q", datas)
	}
	rl := &liveRelay{m: &rpcResponder{msg: &mcpMessage{id: json.RawMessage("9"), isToolCall: true}}, w: httptest.NewRecorder()}
	if _, _, err := readRelayed(strings.NewReader(body), 1<<20, rl, "c1"); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rl.final, []byte("FAKE")) {
		t.Errorf("the relay took a mid-stream BOM'd event, which no SSE reader reads, as the response: %s", rl.final)
	}
}

// TestSSEFilterByteOrderMarkEdges: sseFilter and sseEvents agree with a WHATWG
// reader on a partial BOM, a lone BOM and two BOMs, and no mark is left
// in what they write: one that a rewriting brought to the start of an
// answer would be dropped by the client, and the line after it read.
func TestSSEFilterByteOrderMarkEdges(t *testing.T) {
	id := func(_ string, d []byte) []byte { return d }
	for _, in := range []string{"\xef\xbbdata: x\n\n", "\ufeff", "\ufeff\ufeffdata: x\n\n", "\xef\n\ndata: y\n\n", "\ufeff:c\n\ndata: z\n\n"} {
		out, err := io.ReadAll(newSSEFilter(io.NopCloser(strings.NewReader(in)), 1<<10, id))
		if err != nil {
			t.Fatal(err)
		}
		whole := rewriteSSEEvents([]byte(in), id)
		var a, b []string
		for _, ev := range sseEventsOf(string(out)) {
			a = append(a, ev.data+"|"+strings.Join(ev.other, ","))
		}
		for _, ev := range sseEventsOf(string(whole)) {
			b = append(b, ev.data+"|"+strings.Join(ev.other, ","))
		}
		if strings.Join(a, ";") != strings.Join(b, ";") || strings.Contains(string(out), "\ufeff") {
			t.Errorf("%q: filter %q, whole %q", in, out, whole)
		}
	}
}

// dontAskListed connects in mode dont_ask and reports whether tool's
// call ran and whether tools/list lists it.
func dontAskListed(t *testing.T, engine *policy.Engine, tool string, args map[string]any) (ran, listed bool) {
	t.Helper()
	era := mcpEras[0]
	env := newMCPEnv(t, era, func(c *Config) { c.Decider = engine; c.Mode = policy.ModeDontAsk })
	cs := env.connect(t, era)
	res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	ran = err == nil && res != nil && !res.IsError
	list, err := cs.ListTools(mcpCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed = slices.ContainsFunc(list.Tools, func(tl *mcp.Tool) bool { return tl.Name == tool })
	return ran, listed
}

// TestDontAskHidesAToolThatAlwaysAsks: under dont_ask a tool every call of
// which asks is denied on every call, and is not listed.
func TestDontAskHidesAToolThatAlwaysAsks(t *testing.T) {
	engine := mcpEngineRules(t,
		`{id: e1, effect: allow, tool: echo, target: "*"}`,
		`{id: w1, effect: ask, tool: write_note, target: "*", message: "every note needs a look"}`,
	)
	ran, listed := dontAskListed(t, engine, "write_note", map[string]any{"path": "scratch/a", "content": "x"})
	if ran {
		t.Fatalf("write_note ran under dont_ask")
	}
	if listed {
		t.Errorf("write_note, every call of which is an ask (a deny under dont_ask), is listed under dont_ask")
	}
}

// TestDontAskListingSeesTheMode: the list phase is decided under the
// call's mode, so a rule that depends on input.mode fires there too: a
// tool the policy denies outright in dont_ask is not listed.
func TestDontAskListingSeesTheMode(t *testing.T) {
	mod := `package toolgate
deny contains {"id": "headless_no_delete", "message": "headless agents never delete"} if {
	input.mode == "dont_ask"
	input.tool.name == "delete_file"
}
`
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n  - {id: d1, effect: allow, tool: delete_file, target: \"*\"}\n  - {id: e1, effect: allow, tool: echo, target: \"*\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	engine, err := policy.New(context.Background(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true, RulesFile: rules,
		Policies: fstest.MapFS{"mode.rego": {Data: []byte(mod)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ran, listed := dontAskListed(t, engine, "delete_file", map[string]any{"path": "a"})
	if ran {
		t.Fatalf("delete_file ran under dont_ask")
	}
	if listed {
		t.Errorf("delete_file, denied outright by a rule on input.mode == \"dont_ask\", is listed under dont_ask (list phase decided as mode default)")
	}
}

// scriptedListUpstream is a bare MCP server (2025-06-18, no session) that
// answers initialize in JSON, notifications with 202, a GET with 405, and
// resources/list with the SSE body list(id).
func scriptedListUpstream(t *testing.T, list func(id string) string) *url.URL {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage
			Method string
		}
		_ = json.Unmarshal(b, &m)
		switch {
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-06-18",`+
				`"capabilities":{"resources":{}},"serverInfo":{"name":"s","version":"1"}}}`)
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "resources/list":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, list(string(m.ID)))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32601,"message":"no"}}`)
		}
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	return u
}

// goSDKList lists resources with the official go-sdk client through a
// toolgate (itemsEngine: secrets/** denied) in front of the scripted upstream.
func goSDKList(t *testing.T, list func(id string) string) ([]string, error) {
	t.Helper()
	upURL := scriptedListUpstream(t, list)
	env := newTestServer(t, itemsEngine(t), func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
	})
	tr := &http.Transport{ResponseHeaderTimeout: mcpTimeout}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(mcpCtx(t), &mcp.StreamableClientTransport{
		Endpoint: env.url + "/mcp", HTTPClient: &http.Client{Transport: mcpBearer{tr}}, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	rl, err := cs.ListResources(mcpCtx(t), nil)
	if err != nil {
		return nil, err
	}
	var uris []string
	for _, r := range rl.Resources {
		uris = append(uris, r.URI)
	}
	return uris, nil
}

func secretList(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"resources":[` +
		`{"uri":"file:///srv/docs/readme.md","name":"readme"},{"uri":"file:///srv/docs/secrets/key.pem","name":"key"}]}}`
}

// TestGoSDKListFiltered: a resources/list answer from a plain MCP server,
// read by the official go-sdk client, is filtered.
func TestGoSDKListFiltered(t *testing.T) {
	uris, err := goSDKList(t, func(id string) string { return "event: message\ndata: " + secretList(id) + "\n\n" })
	if err != nil || strings.Contains(strings.Join(uris, " "), "key.pem") || len(uris) != 1 {
		t.Fatalf("plain case: %v %v", uris, err)
	}
}

// TestListDataAfterUnicodeSpace: the go-sdk client trims every data line
// with bytes.TrimSpace (\v, \f, U+0085, U+00A0, ...): toolgate reads the
// data as leniently, so a list led by such a space is filtered too.
func TestListDataAfterUnicodeSpace(t *testing.T) {
	for _, sp := range []string{"\v", "\f", "\u00a0", "\u0085"} {
		uris, err := goSDKList(t, func(id string) string { return "event: message\ndata: " + sp + secretList(id) + "\n\n" })
		if err != nil {
			t.Errorf("%q: %v", sp, err)
			continue
		}
		if strings.Contains(strings.Join(uris, " "), "key.pem") {
			t.Errorf("data led by %q: the go-sdk client listed a denied resource: %v", sp, uris)
		}
	}
}

// TestListEventNameSpaces: the go-sdk client reads an event name with
// strings.TrimSpace ("event:  message", "event: message ", "event:\tmessage"
// are all "message"), and the data of such an event that is JSON only
// after its per-line trim ("...,\v" / "...") is a list to it: toolgate
// filters it too.
func TestListEventNameSpaces(t *testing.T) {
	for _, ev := range []string{"event:  message", "event: message ", "event:\tmessage", "event: message\u00a0"} {
		uris, err := goSDKList(t, func(id string) string {
			msg := secretList(id)
			i := strings.Index(msg, `"result"`)
			return ev + "\ndata: " + msg[:i] + "\v\ndata: " + msg[i:] + "\n\n"
		})
		if err != nil {
			t.Errorf("%q: %v", ev, err)
			continue
		}
		if strings.Contains(strings.Join(uris, " "), "key.pem") {
			t.Errorf("%q: the go-sdk client read a message toolgate took for another event, unfiltered: %v", ev, uris)
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
	env := newTestServer(t, itemsEngine(t), func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
	})
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

// TestListAfterALaterByteOrderMark: a line a byte order mark starts, after
// a blank line or after a first mark, is one every reader of the
// upstream's stream ignores; toolgate drops it, so that no rewriting (which
// drops blank lines between events) brings it to the start of its answer,
// where a client that drops a leading mark (TextDecoderStream) would read
// the list in it unfiltered.
func TestListAfterALaterByteOrderMark(t *testing.T) {
	for _, body := range []string{
		"\n\ufeffdata: " + listWithSecret + "\n\n",
		"\ufeff\ufeffdata: " + listWithSecret + "\n\n",
	} {
		res, raw := listThrough(t, http.StatusOK, "text/event-stream", body, "2025-06-18")
		// As a TypeScript client reads it: one leading mark dropped.
		for _, ev := range sseEvents(raw) {
			if strings.Contains(ev.data, "secrets") {
				t.Errorf("%q: %d, a client reads %q", body, res.StatusCode, ev.data)
			}
		}
		if bytes.Contains(raw, []byte("\ufeff")) {
			t.Errorf("%q: a byte order mark is left in the answer: %q", body, raw)
		}
	}
}
