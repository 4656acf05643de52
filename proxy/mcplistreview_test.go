package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// TestListedToolWithSomeCallsAllowed: the list phase lets an ask row fire
// whatever its target, so a tool the policy allows on some targets and
// asks about on others ("write scratch, ask for notes") is decided ask
// there; its calls on the allowed targets run, so it stays listed, marked,
// without approvals configured (its other calls ask, and are refused).
func TestListedToolWithSomeCallsAllowed(t *testing.T) {
	era := mcpEras[0]
	engine := mcpEngineRules(t,
		`{id: w1, effect: allow, tool: write_note, target: "scratch/*"}`,
		`{id: w2, effect: ask, tool: write_note, target: "notes/*", message: "notes need a look"}`,
	)
	for _, tc := range []struct {
		name   string
		config func(*Config)
		marked bool
	}{
		{"no approvals", func(c *Config) { c.Pending, c.OnPark = nil, nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newMCPEnv(t, era, func(c *Config) { c.Decider = engine }, tc.config)
			cs := env.connect(t, era)
			res := mcpCall(t, cs, "write_note", map[string]any{"path": "scratch/a", "content": "x"})
			mcpWantResult(t, res, "wrote scratch/a: x")
			list, err := cs.ListTools(mcpCtx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(list.Tools, func(tl *mcp.Tool) bool { return tl.Name == "write_note" })
			if i < 0 {
				t.Fatalf("write_note, whose call on scratch/a was just allowed and ran, is not listed")
			}
			if marked := list.Tools[i].Meta["toolgate/may_ask"] == true; marked != tc.marked {
				t.Errorf("write_note marked may_ask: %v, want %v", marked, tc.marked)
			}
		})
	}
}

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

// TestListDecisionsPerCall: the bound on a list's decisions is the call's,
// not a message's: an SSE answer of one small resources/list request with
// several result events costs maxListDecisions evaluations in all.
func TestListDecisionsPerCall(t *testing.T) {
	engine := itemsEngine(t)
	var n atomic.Int64
	counting := deciderFunc(func(ctx context.Context, in *policy.Input) (policy.Decision, error) {
		n.Add(1)
		return engine.Decide(ctx, in)
	})
	const events = 4
	var body strings.Builder
	for e := range events {
		var entries []string
		for i := range maxListDecisions {
			entries = append(entries, `{"uri":"file:///srv/docs/`+strconv.Itoa(e)+`/`+strconv.Itoa(i)+`"}`)
		}
		body.WriteString("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resources\":[" + strings.Join(entries, ",") + "]}}\n\n")
	}
	if body.Len() > maxListBytes {
		t.Fatalf("answer of %d bytes, over the 8 MiB bound", body.Len())
	}
	upURL := rawMCPUpstream(t, http.StatusOK, "text/event-stream", body.String())
	env := newTestServer(t, counting, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: 20 * time.Second}}
	})
	n.Store(0)
	res, _, _ := postMCP(t, &mcpEnv{url: env.url}, `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`,
		"Authorization", "Bearer agent-key", "Mcp-Protocol-Version", "2025-06-18")
	if got := n.Load() - 1; got > maxListDecisions { // less the request's own decision
		t.Errorf("one resources/list answer (%d, %d bytes) cost %d list decisions, want at most %d", res.StatusCode, body.Len(), got, maxListDecisions)
	}
}

// TestListAnswerAsArray: a JSON answer that is an array of responses (the
// 2025-03-26 batch form, which the TypeScript SDK's client reads from a
// JSON answer to a single request) is filtered member by member.
func TestListAnswerAsArray(t *testing.T) {
	res, raw := listThrough(t, http.StatusOK, "application/json", "["+listWithSecret+"]", "2025-03-26")
	if res.StatusCode != http.StatusOK || strings.Contains(string(raw), "secrets/key.pem") || !strings.Contains(string(raw), "readme.md") {
		t.Errorf("a list answer sent as a JSON array: %d %s, want it filtered", res.StatusCode, raw)
	}
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
	env := newTestServer(t, itemsEngine(t), func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
	})
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

// TestListMediaTypeReadTwoWays: toolgate reads a list answer's media type
// with mime.ParseMediaType, the TypeScript SDK's client with
// contentType.includes("text/event-stream") first. An answer typed
// `application/json; profile="text/event-stream"` whose body is an event
// stream is JSON toolgate cannot read: it is refused (502), not handed on
// to a client that reads the event stream it is.
func TestListMediaTypeReadTwoWays(t *testing.T) {
	body := "event: message\ndata: " + listWithSecret + "\n\n"
	res, raw := listThrough(t, http.StatusOK, `application/json; profile="text/event-stream"`, body, "2025-11-25")
	if res.StatusCode != http.StatusBadGateway || strings.Contains(string(raw), "secrets/key.pem") {
		t.Errorf("an answer typed JSON that holds an event stream: %d %s, want 502", res.StatusCode, raw)
	}
}
