package proxy

import (
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

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// itemsEngine reads docs and notes (notes after a look) and a summary
// prompt; secrets and the admin prompt are denied, and nothing else is
// allowed.
func itemsEngine(t *testing.T) *policy.Engine {
	t.Helper()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	err := os.WriteFile(rules, []byte(`rules:
  - {id: r1, effect: allow, tool: "mcp:resources/read", target: "file:///srv/docs/**"}
  - {id: r2, effect: allow, tool: "mcp:resources/read", target: "file:///srv/notes/**"}
  - {id: r3, effect: ask, tool: "mcp:resources/read", target: "file:///srv/notes/**", message: "notes need a look"}
  - {id: r4, effect: deny, tool: "mcp:resources/read", target: "file:///srv/docs/secrets/**", message: "never"}
  - {id: p1, effect: allow, tool: "mcp:prompts/get", target: "summarize"}
  - {id: p2, effect: deny, tool: "mcp:prompts/get", target: "admin_*", message: "never"}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, RulesFile: rules})
	if err != nil {
		t.Fatal(err)
	}
	return engine
}

// TestMCPResourcesAndPromptsListFiltered: a resources/list and a
// prompts/list answer are filtered per caller, every era, JSON and SSE:
// each resource is decided as a resources/read of its uri, each prompt as
// a prompts/get of its name. What the caller could never read is not
// listed (a deny row, or no row that allows it), what it could read after
// a look is marked "toolgate/may_ask", and the rest is listed as the
// upstream wrote it. Reading stays decided call by call.
func TestMCPResourcesAndPromptsListFiltered(t *testing.T) {
	engine := itemsEngine(t)
	resources := []*mcp.Resource{
		{URI: "file:///srv/docs/readme.md", Name: "readme", Meta: mcp.Meta{"vendor.example/icon": "book"}},
		{URI: "file:///srv/docs/secrets/key.pem", Name: "key"},
		{URI: "file:///srv/notes/today.txt", Name: "today"},
		{URI: "file:///etc/passwd", Name: "passwd"},
	}
	prompts := []*mcp.Prompt{{Name: "summarize"}, {Name: "admin_reset"}, {Name: "unlisted"}}
	wantResources := map[string]mcp.Meta{
		"file:///srv/docs/readme.md":  {"vendor.example/icon": "book"},
		"file:///srv/notes/today.txt": {"toolgate/may_ask": true},
	}
	for _, era := range mcpEras {
		t.Run(era.name, func(t *testing.T) {
			env := &mcpEnv{up: newItemsUpstream(t, era.opts, resources, prompts)}
			env.url = newTestServer(t, engine, func(c *Config) {
				c.Upstreams = []Upstream{{Name: "files", URL: env.up.url, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
				c.MaxBodyBytes = 1 << 20
				c.Pending = pending.NewMemory(pending.Options{}) // asks can be approved
			}).url
			cs := env.connect(t, era)
			rl, err := cs.ListResources(mcpCtx(t), nil)
			if err != nil {
				t.Fatalf("resources/list through toolgate: %v", err)
			}
			got := map[string]mcp.Meta{}
			for _, r := range rl.Resources {
				got[r.URI] = r.Meta
			}
			if diff := cmp.Diff(wantResources, got); diff != "" {
				t.Errorf("listed resources and their _meta (-want +got):\n%s", diff)
			}
			pl, err := cs.ListPrompts(mcpCtx(t), nil)
			if err != nil {
				t.Fatalf("prompts/list through toolgate: %v", err)
			}
			var names []string
			for _, p := range pl.Prompts {
				names = append(names, p.Name)
			}
			if diff := cmp.Diff([]string{"summarize"}, names); diff != "" {
				t.Errorf("listed prompts (-want +got):\n%s", diff)
			}
			// Templates name no one resource: listed whole.
			tl, err := cs.ListResourceTemplates(mcpCtx(t), nil)
			if err != nil || len(tl.ResourceTemplates) != 1 {
				t.Errorf("resources/templates/list through toolgate: %v, %+v", err, tl)
			}
			// Hidden or not, a read is decided on its own.
			if _, err := cs.ReadResource(mcpCtx(t), &mcp.ReadResourceParams{URI: "file:///srv/docs/secrets/key.pem"}); err == nil {
				t.Error("a read of a denied resource went through")
			}
			if _, err := cs.ReadResource(mcpCtx(t), &mcp.ReadResourceParams{URI: "file:///srv/docs/readme.md"}); err != nil {
				t.Errorf("a read of an allowed resource: %v", err)
			}
		})
	}
}

// newItemsUpstream is a go-sdk MCP server at /mcp with resources, one
// template and prompts.
func newItemsUpstream(t *testing.T, opts mcp.StreamableHTTPOptions, resources []*mcp.Resource, prompts []*mcp.Prompt) *mcpUpstream {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "items", Version: "v0.0.1"}, nil)
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "contents"}}}, nil
	}
	for _, r := range resources {
		srv.AddResource(r, read)
	}
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "srv", URITemplate: "file:///srv/{+path}"}, read)
	for _, p := range prompts {
		srv.AddPrompt(p, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
	}
	return serveMCPAt(t, srv, opts)
}

// TestListedItemsShapes: entries the filter cannot decide are hidden (no
// string uri: absent, null, a number; not an object), a list that is not
// an array goes on untouched, and members other than the lists, the
// entries kept included, stay as the upstream wrote them. On the server's
// GET stream, where there is no request to go by, a resources or prompts
// answer is filtered too, and its public cache scope made private.
func TestListedItemsShapes(t *testing.T) {
	engine := itemsEngine(t)
	const answer = `{"jsonrpc":"2.0","id":7,"result":{"cacheScope":"public","nextCursor":"c2","resources":[` +
		`{"uri":"file:///srv/docs/a.md","name":"a","size":12345678901234567890},` +
		`{"name":"no uri"},{"uri":null,"name":"null uri"},{"uri":7},"file:///srv/docs/b.md",` +
		`{"uri":"file:///srv/docs/secrets/k","name":"k"}],"prompts":[{"name":"summarize","arguments":[]},{"name":"admin_x"},{"name":["summarize"]}]}}`
	const notArray = `{"jsonrpc":"2.0","id":8,"result":{"resources":{"uri":"file:///srv/docs/secrets/k"}}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: e1\ndata: "+answer+"\n\nid: e2\ndata: "+notArray+"\n\n")
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	env := newTestServer(t, engine, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
	})
	req, _ := http.NewRequest(http.MethodGet, env.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer agent-key")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	evs := sseEvents(body)
	if res.StatusCode != http.StatusOK || len(evs) != 2 {
		t.Fatalf("status %d, %d events, want 200 and 2\n%s", res.StatusCode, len(evs), body)
	}
	want := `{"id":7,"jsonrpc":"2.0","result":{"cacheScope":"private","nextCursor":"c2","prompts":[{"name":"summarize","arguments":[]}],"resources":[{"uri":"file:///srv/docs/a.md","name":"a","size":12345678901234567890}]}}`
	if evs[0].data != want {
		t.Errorf("filtered answer:\n got %s\nwant %s", evs[0].data, want)
	}
	if evs[1].data != notArray {
		t.Errorf("a list that is not an array changed: %s", evs[1].data)
	}
}

// TestListsRefusedInABatch: a batch's answer is not filtered, so a batch
// that holds a resources/list or a prompts/list is refused whole, as one
// that holds a tools/list is, and reaches no upstream.
func TestListsRefusedInABatch(t *testing.T) {
	var reached int
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `[]`)
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	env := itemsServer(t, upURL)
	for _, method := range []string{"resources/list", "prompts/list", "tools/list"} {
		batch := `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"` + method + `"}]`
		req, _ := http.NewRequest(http.MethodPost, env.url+"/mcp", strings.NewReader(batch))
		req.Header.Set("Authorization", "Bearer agent-key")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "holds "+method) {
			t.Errorf("%s in a batch: %d %s", method, res.StatusCode, body)
		}
	}
	if reached != 0 {
		t.Errorf("the upstream got %d batches", reached)
	}
}

// rawMCPUpstream is an MCP upstream that answers every POST with status,
// contentType and body, whatever was asked.
func rawMCPUpstream(t *testing.T, status int, contentType, body string) *url.URL {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	return u
}

// itemsServer is a toolgate deciding with itemsEngine in front of upURL,
// an MCP upstream named files.
func itemsServer(t *testing.T, upURL *url.URL) *testEnv {
	t.Helper()
	return newTestServer(t, itemsEngine(t), func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
	})
}

// listThrough sends a resources/list, in protocol revision version,
// through a toolgate deciding with itemsEngine, in front of an upstream
// that answers it with status, contentType and body.
func listThrough(t *testing.T, status int, contentType, body, version string) (*http.Response, []byte) {
	t.Helper()
	upURL := rawMCPUpstream(t, status, contentType, body)
	env := itemsServer(t, upURL)
	hdr := []string{"Authorization", "Bearer agent-key", "Mcp-Protocol-Version", version}
	if version >= "2026-07-28" {
		hdr = append(hdr, "Mcp-Method", "resources/list")
	}
	res, _, raw := postMCP(t, &mcpEnv{url: env.url}, `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`, hdr...)
	return res, raw
}

const listWithSecret = `{"jsonrpc":"2.0","id":1,"result":{"ttlMs":60000,"resources":[` +
	`{"uri":"file:///srv/docs/readme.md","name":"readme"},{"uri":"file:///srv/docs/secrets/key.pem","name":"key"}]}}`

// TestListCaseVariantMembers: a list answer with a member that a client
// decoding case-insensitively (Go's encoding/json) reads as its result or
// its list ("Result", "Resources", "reſources") is not one toolgate can
// filter as every client reads it: 502, nothing of it passed on. An entry
// whose target has a case variant beside it ("URI") is hidden.
func TestListCaseVariantMembers(t *testing.T) {
	for name, body := range map[string]string{
		"result":       strings.Replace(listWithSecret, `"result"`, `"Result"`, 1),
		"resources":    strings.Replace(listWithSecret, `"resources"`, `"Resources"`, 1),
		"long s":       strings.Replace(listWithSecret, `"resources"`, `"reſources"`, 1),
		"beside":       strings.Replace(listWithSecret, `"resources":[`, `"resources":[],"RESOURCES":[`, 1),
		"tools beside": `{"jsonrpc":"2.0","id":1,"result":{"resources":[],"Tools":[{"name":"key.pem"}]}}`,
	} {
		res, raw := listThrough(t, http.StatusOK, "application/json", body, "2025-06-18")
		if res.StatusCode != http.StatusBadGateway || strings.Contains(string(raw), "key.pem") {
			t.Errorf("%s: %d %s, want 502 and nothing of the list", name, res.StatusCode, raw)
		}
	}
	entry := `{"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"file:///srv/docs/readme.md","URI":"file:///srv/docs/secrets/key.pem","name":"x"}]}}`
	res, raw := listThrough(t, http.StatusOK, "application/json", entry, "2025-06-18")
	if res.StatusCode != http.StatusOK || strings.Contains(string(raw), "key.pem") || strings.Contains(string(raw), "readme") {
		t.Errorf("an entry with a case variant of its uri: %d %s, want it hidden", res.StatusCode, raw)
	}
}

// TestListAskRefused: a list the policy asks about is refused, not
// parked: a parked call is answered the way any approved call is, and its
// answer would reach the caller unfiltered, naming what it may not read.
// Nothing reaches the upstream.
func TestListAskRefused(t *testing.T) {
	mod := `package toolgate
ask contains {"id": "list_look", "message": "listing needs a look"} if {
	input.mcp.method in {"resources/list", "tools/list"}
	not input.tool
}
`
	engine, err := policy.New(context.Background(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true,
		Policies: fstest.MapFS{"list.rego": {Data: []byte(mod)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, listWithSecret)
	}))
	t.Cleanup(up.Close)
	upURL, _ := url.Parse(up.URL)
	parked := make(chan pending.Call, 4)
	env := newTestServer(t, engine, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
		c.Pending = pending.NewMemory(pending.Options{})
		c.Hold = time.Second
		c.OnPark = func(pc pending.Call) { parked <- pc }
	})
	for _, method := range []string{"resources/list", "tools/list"} {
		res, _, raw := postMCP(t, &mcpEnv{url: env.url}, `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`,
			"Authorization", "Bearer agent-key", "Mcp-Protocol-Version", "2025-11-25")
		got := string(raw)
		if !strings.Contains(got, "toolgate.list_ask") && !strings.Contains(got, "cannot wait for approval") || strings.Contains(got, "secrets") {
			t.Errorf("%s the policy asks about: %d %s, want it refused", method, res.StatusCode, got)
		}
	}
	if n := reached.Load(); n != 0 || len(parked) != 0 {
		t.Errorf("the upstream got %d lists, %d parked", n, len(parked))
	}
}

// TestListDecisionsBounded: one list answer costs at most
// maxListDecisions policy evaluations, however long it is: a target
// listed many times is decided once, and entries past the bound are
// hidden. Without approvals, what the policy asks about is hidden too: it
// could never be read.
func TestListDecisionsBounded(t *testing.T) {
	engine := itemsEngine(t)
	var n atomic.Int64
	counting := deciderFunc(func(ctx context.Context, in *policy.Input) (policy.Decision, error) {
		n.Add(1)
		return engine.Decide(ctx, in)
	})
	var server *Server
	newTestServer(t, counting, func(c *Config) { c.serverHook = func(s *Server) { server = s } })
	newCall := func() *call {
		return &call{id: "c", up: server.upstreams[0], input: &policy.Input{Kind: policy.KindMCP, Phase: policy.PhaseCall, MCP: &policy.MCP{Method: "resources/list"}}}
	}
	c := newCall()
	list := func(entries []string) string {
		return `{"jsonrpc":"2.0","id":1,"result":{"resources":[` + strings.Join(entries, ",") + `]}}`
	}
	same := slices.Repeat([]string{`{"uri":"file:///srv/docs/a"}`}, 50_000)
	out := string(listFiltered(t, server, []byte(list(same)), c))
	if got := n.Load(); got != 1 || strings.Count(out, "file:///srv/docs/a") != 50_000 {
		t.Errorf("50000 entries of one uri: %d decisions, %d listed; want 1 and all", got, strings.Count(out, "file:///srv/docs/a"))
	}
	n.Store(0)
	c = newCall()
	var many []string
	for i := range maxListDecisions + 5 {
		many = append(many, `{"uri":"file:///srv/docs/`+strconv.Itoa(i)+`"}`)
	}
	many = append(many, `{"uri":"file:///srv/docs/a"}`) // decided already: kept
	out = string(listFiltered(t, server, []byte(list(many)), c))
	if got := n.Load(); got != maxListDecisions {
		t.Errorf("%d distinct uris: %d decisions, want %d", len(many), got, maxListDecisions)
	}
	if strings.Contains(out, `docs/`+strconv.Itoa(maxListDecisions)+`"`) || !strings.Contains(out, `docs/`+strconv.Itoa(maxListDecisions-1)+`"`) {
		t.Errorf("entries past the bound are not hidden, or those before it are")
	}
	// The bound is the call's, over all its answers: a stream's events,
	// a batch's members.
	n.Store(0)
	c = newCall()
	var half []string
	for i := range maxListDecisions / 2 {
		half = append(half, `{"uri":"file:///srv/docs/`+strconv.Itoa(i)+`"}`)
	}
	other := strings.ReplaceAll(strings.Join(half, ","), "docs/", "docs/x")
	for range 3 {
		listFiltered(t, server, []byte(list(half)), c)
		listFiltered(t, server, []byte(`{"jsonrpc":"2.0","id":1,"result":{"resources":[`+other+`]}}`), c)
	}
	if got := n.Load(); got != maxListDecisions {
		t.Errorf("one call's six answers: %d decisions, want %d", got, maxListDecisions)
	}
	c = newCall()
	out = string(listFiltered(t, server, []byte(list([]string{`{"uri":"file:///srv/notes/today.txt"}`})), c))
	if strings.Contains(out, "today") {
		t.Errorf("without approvals a resource whose read would be asked about is listed: %s", out)
	}
}

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

// TestDontAskListsAToolWithAllowedCalls: under dont_ask a tool an allow
// row covers some calls of is listed, unmarked (none of its calls will
// ask), and its allowed call runs; its asks are refused.
func TestDontAskListsAToolWithAllowedCalls(t *testing.T) {
	engine := mcpEngineRules(t,
		`{id: e1, effect: allow, tool: echo, target: "*"}`,
		`{id: w1, effect: allow, tool: write_note, target: "scratch/*"}`,
		`{id: w2, effect: ask, tool: write_note, target: "notes/*", message: "notes need a look"}`,
	)
	era := mcpEras[0]
	env := newMCPEnv(t, era, func(c *Config) { c.Decider = engine; c.Mode = policy.ModeDontAsk })
	cs := env.connect(t, era)
	mcpWantResult(t, mcpCall(t, cs, "write_note", map[string]any{"path": "scratch/a", "content": "x"}), "wrote scratch/a: x")
	if res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"path": "notes/a", "content": "x"}}); err == nil && res != nil && !res.IsError {
		t.Fatalf("write_note on notes/a, an ask, ran under dont_ask")
	}
	list, err := cs.ListTools(mcpCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.Tools, func(tl *mcp.Tool) bool { return tl.Name == "write_note" })
	if i < 0 {
		t.Fatalf("write_note, whose call on scratch/a dont_ask lets run, is not listed under dont_ask")
	}
	if list.Tools[i].Meta["toolgate/may_ask"] != nil {
		t.Errorf("write_note is marked may_ask under dont_ask, where none of its calls asks: %v", list.Tools[i].Meta)
	}
}

// TestDontAskHidesAToolAnAskRowCovers: under dont_ask an ask row on every
// target covers every call of its tool, as a deny row on "*" would: the
// tool is hidden though an allow row covers some of its targets, since
// the ask beats the allow on each of them.
func TestDontAskHidesAToolAnAskRowCovers(t *testing.T) {
	engine := mcpEngineRules(t,
		`{id: e1, effect: allow, tool: echo, target: "*"}`,
		`{id: w1, effect: allow, tool: write_note, target: "scratch/*"}`,
		`{id: w2, effect: ask, tool: write_note, target: "*", message: "every note needs a look"}`,
	)
	for _, path := range []string{"scratch/a", "notes/a"} {
		ran, listed := dontAskListed(t, engine, "write_note", map[string]any{"path": path, "content": "x"})
		if ran {
			t.Fatalf("write_note on %s, an ask, ran under dont_ask", path)
		}
		if listed {
			t.Errorf("write_note, no call of which can run under dont_ask, is listed")
		}
	}
}

// listFiltered is filterListMessage's answer to b, which must be readable.
func listFiltered(t *testing.T, s *Server, b []byte, c *call) []byte {
	t.Helper()
	out, ok := s.filterListMessage(t.Context(), b, c)
	if !ok {
		t.Fatalf("filterListMessage(%.200s) found it unreadable", b)
	}
	return out
}
