package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	env := newTestServer(t, itemsEngine(t), func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Protocol: "mcp", MCPPath: "/mcp", Prefix: "/", Timeout: mcpTimeout}}
	})
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
