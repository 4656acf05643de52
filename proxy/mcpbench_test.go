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
	"testing/fstest"
	"time"

	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// BenchmarkMCPToolCall is an allowed MCP tools/call straight to a tool
// server and through toolgate (the real engine, a one-row rules table and
// a Rego rule on an argument, as teams write them), with the server
// answering JSON and SSE.
func BenchmarkMCPToolCall(b *testing.B) {
	const result = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`
	for _, mode := range []string{"json", "sse"} {
		up := benchUpstream(b, func(w http.ResponseWriter, _ *http.Request) {
			if mode == "sse" {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: message\ndata: "+result+"\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, result)
		})
		u, _ := url.Parse(up.URL)
		engine := regoEngine(b, "rules:\n  - {id: a, effect: allow, tool: read_file, target: \"docs/**\"}\n",
			`deny contains "nothing under /etc" if startswith(input.tool.arguments.path, "/etc")`)
		env := newTestServer(b, engine, func(c *Config) {
			c.Upstreams = []Upstream{{Name: "tools", URL: u, Protocol: "mcp", MCPPath: "/mcp"}}
		})
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"docs/guide/intro.md"}}}`
		run := func(b *testing.B, target string) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest("POST", target, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				got, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || !strings.Contains(string(got), `"ok"`) {
					b.Fatalf("status %d: %s", res.StatusCode, got)
				}
			}
		}
		b.Run(mode+"/direct", func(b *testing.B) { run(b, up.URL+"/mcp") })
		b.Run(mode+"/toolgate", func(b *testing.B) { run(b, env.url+"/mcp") })
		if mode != "json" {
			continue
		}
		// With shared listings (a counting memory store in Redis's place)
		// and read_file listed here: the calls read no store.
		store := &countingListings{Listings: pending.NewMemory(pending.Options{})}
		var shared *Server
		senv := newTestServer(b, engine, func(c *Config) {
			c.Upstreams = []Upstream{{Name: "tools", URL: u, Protocol: "mcp", MCPPath: "/mcp"}}
			c.Listings = store
			c.serverHook = func(s *Server) { shared = s }
		})
		learned := time.Now()
		shared.upstreams[0].rememberTool("read_file", newListedTool(map[string]any{"readOnlyHint": true}, nil))
		b.Run(mode+"/toolgate-shared-listings", func(b *testing.B) {
			run(b, senv.url+"/mcp")
			// A tool known here is checked against the store once it is
			// freshFor old, and then kept for freshFor again: a run of
			// several rounds may span such a read, never more of them.
			if n, most := store.recalls.Load(), int64(time.Since(learned)/freshFor); n > most {
				b.Fatalf("calls of a tool listed here read the store %d times in %v, want at most %d (one per %v)",
					n, time.Since(learned).Round(time.Millisecond), most, freshFor)
			}
		})
	}
}

// benchUpstream is an upstream for benchmarks: it answers with h and, unlike
// testkit's recording upstream, keeps nothing, so what is measured is
// toolgate's work and memory, not the recording's.
func benchUpstream(b *testing.B, h http.HandlerFunc) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h(w, r)
	}))
	b.Cleanup(up.Close)
	return up
}

// regoEngine is the real engine with a rules table and one module of
// package toolgate.
func regoEngine(b testing.TB, rules, rego string) *policy.Engine {
	path := filepath.Join(b.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
		b.Fatal(err)
	}
	e, err := policy.New(context.Background(), policy.Options{
		Library: shipped.Library(), NativeLibrary: true, RulesFile: path,
		Policies: fstest.MapFS{"p.rego": {Data: []byte("package toolgate\n\n" + rego + "\n")}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return e
}
