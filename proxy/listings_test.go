package proxy

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// sharedRedis returns a function that makes Redis stores on one fresh
// prefix of the test Redis, each with a client of its own, as replicas
// have. Without TOOLGATE_TEST_REDIS_ADDR the test skips (fails under
// CI=true).
func sharedRedis(t *testing.T) func() *pending.RedisStore {
	t.Helper()
	addr := os.Getenv("TOOLGATE_TEST_REDIS_ADDR")
	if addr == "" {
		testkit.Unavailable(t, "no TOOLGATE_TEST_REDIS_ADDR: the shared listings need a Redis")
	}
	prefix := "toolgate-test:" + rand.Text() + ":"
	first := true
	return func() *pending.RedisStore {
		t.Helper()
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		s, err := pending.NewRedis(rdb, pending.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		if first {
			first = false
			// The listing keys live a day: gone with the test instead,
			// through a client of its own (cleanups run last first, and
			// the stores' clients are closed by then).
			t.Cleanup(func() {
				ctx := context.Background()
				c := redis.NewClient(&redis.Options{Addr: addr})
				defer c.Close()
				iter := c.Scan(ctx, 0, "{"+strings.TrimSuffix(prefix, ":")+"}:*", 1000).Iterator()
				for iter.Next(ctx) {
					c.Del(ctx, iter.Val())
				}
			})
		}
		t.Cleanup(func() { s.Close(); rdb.Close() })
		return s
	}
}

// replicas starts two toolgates, A and B, in front of up, sharing the
// listings of one Redis prefix (a store each), deciding with d (nil: the
// MCP rules table).
func replicas(t *testing.T, up *mcpUpstream, d Decider) (a, b *mcpEnv) {
	t.Helper()
	newStore := sharedRedis(t)
	replica := func() *mcpEnv {
		st := newStore()
		return newMCPEnvWith(t, up, func(c *Config) {
			c.Listings = st
			if d != nil {
				c.Decider = d
			}
		})
	}
	return replica(), replica()
}

// balancer is a load balancer in a client's transport: tools/list goes to
// one toolgate, every other request to another.
type balancer struct {
	base       http.RoundTripper
	list, rest *url.URL
}

func (b balancer) RoundTrip(r *http.Request) (*http.Response, error) {
	to := b.rest
	if r.Header.Get("Mcp-Method") == "tools/list" {
		to = b.list
	}
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = to.Scheme, to.Host, to.Host
	r.Header.Set("Authorization", "Bearer agent-key")
	return b.base.RoundTrip(r)
}

// connectBalanced connects a go-sdk client (MCP 2026-07-28) whose tools/list
// goes through lister and everything else through caller.
func connectBalanced(t *testing.T, lister, caller *mcpEnv) *mcp.ClientSession {
	t.Helper()
	tr := &http.Transport{ResponseHeaderTimeout: mcpTimeout}
	t.Cleanup(tr.CloseIdleConnections)
	lu, _ := url.Parse(lister.url)
	cu, _ := url.Parse(caller.url)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0.0.1"}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:   caller.url + "/mcp",
		HTTPClient: &http.Client{Transport: balancer{base: tr, list: lu, rest: cu}},
		MaxRetries: -1,
	}
	cs, err := client.Connect(mcpCtx(t), transport, &mcp.ClientSessionOptions{ProtocolVersion: extEra.clientVersion})
	if err != nil {
		t.Fatalf("connecting through toolgate: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestSharedListingsParamHeaders: a client lists the tools through
// replica A and calls read_file through replica B, mirroring its arguments
// into Mcp-Param headers as the listing told it: B checks them against the
// listing A shared and forwards the call; a header that disagrees is
// refused by B with -32020, and the upstream never receives it.
func TestSharedListingsParamHeaders(t *testing.T) {
	a, b := replicas(t, newParamUpstream(t), nil)
	cs := connectBalanced(t, a, b)
	if _, err := cs.ListTools(mcpCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	if _, known := b.server.upstreams[0].listed.Load("read_file"); known {
		t.Fatal("B knows read_file before any call: the test would not show sharing")
	}
	b.up.Reset()
	res := mcpCall(t, cs, "read_file", map[string]any{"path": "notes/a.txt", "count": 3, "opts": map[string]any{"region": "eu-west"}})
	mcpWantResult(t, res, "contents of notes/a.txt")
	var h http.Header
	for _, r := range b.up.got() {
		if r.RPCMethod == "tools/call" {
			h = r.Header
		}
	}
	if h.Get("Mcp-Param-Path") != "notes/a.txt" || h.Get("Mcp-Param-Region") != "eu-west" {
		t.Errorf("upstream saw Mcp-Param-Path %q, Mcp-Param-Region %q; want the call's", h.Get("Mcp-Param-Path"), h.Get("Mcp-Param-Region"))
	}

	// A header that disagrees, through B: refused, nothing forwarded.
	b.up.Reset()
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"notes/a.txt"},` + mcpMeta2026 + `}}`
	r, msg, raw := postMCP(t, b, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "read_file",
		"Mcp-Param-Path", "/etc/shadow")
	if r.StatusCode != http.StatusBadRequest || msg.Error == nil || msg.Error.Code != rpcHeaderMismatch {
		t.Errorf("status %d body %s, want 400 and %d", r.StatusCode, raw, rpcHeaderMismatch)
	}
	if got := b.up.got(); len(got) != 0 || b.up.invoked("read_file") != 1 {
		t.Errorf("the refused call reached the upstream:%s", describeMCP(got))
	}
}

// TestSharedListingsNewer: B keeps an older listing of read_file (no
// Count header); A relays a newer one. A call through B with the header
// the newer listing declares makes B read the shared listing again, and
// passes.
func TestSharedListingsNewer(t *testing.T) {
	a, b := replicas(t, newParamUpstream(t), nil)
	b.server.upstreams[0].rememberTool("read_file", newListedTool(nil, map[string][]string{"path": {"path"}}))
	cs := connectBalanced(t, a, b)
	if _, err := cs.ListTools(mcpCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	res := mcpCall(t, cs, "read_file", map[string]any{"path": "notes/a.txt", "count": 3})
	mcpWantResult(t, res, "contents of notes/a.txt")
	lt, _ := b.server.upstreams[0].listed.Load("read_file")
	if lt.(listedTool).params["count"] == nil {
		t.Error("B kept its older listing after reading the newer one")
	}
}

// newAnnotatedUpstream is a stateless go-sdk MCP server (2026-07-28) with
// wipe, which it annotates destructive, and echo, which it does not.
func newAnnotatedUpstream(t *testing.T) *mcpUpstream {
	t.Helper()
	up := &mcpUpstream{calls: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v0.0.1"}, nil)
	yes := true
	obj := map[string]any{"type": "object"}
	srv.AddTool(&mcp.Tool{Name: "wipe", InputSchema: obj, Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			up.ran("wipe")
			return mcpText("wiped"), nil
		})
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		up.ran("echo")
		return mcpText("echo"), nil
	})
	up.serve(t, srv, extEra.opts)
	return up
}

// annotationsPolicy denies calls of tools annotated destructive and
// allows the rest; it records the annotations each tools/call showed it.
type annotationsPolicy struct {
	mu   sync.Mutex
	seen map[string]map[string]any
}

func (p *annotationsPolicy) Decide(_ context.Context, in *policy.Input) (policy.Decision, error) {
	if in.Tool == nil || in.Phase == policy.PhaseList || in.MCP == nil || in.MCP.Method != "tools/call" {
		return policy.Decision{Action: policy.Allow}, nil
	}
	p.mu.Lock()
	p.seen[in.Tool.Name] = in.Tool.Annotations
	p.mu.Unlock()
	if in.Tool.Annotations["destructiveHint"] == true {
		return policy.Decision{Action: policy.Deny, Reasons: []policy.Reason{{ID: "destructive", Message: "destructive tools are not run"}}}, nil
	}
	return policy.Decision{Action: policy.Allow}, nil
}

// TestSharedListingsAnnotations: B's policy sees the annotations of a tool
// listed through A (tool.annotations), and decides its call as A would.
func TestSharedListingsAnnotations(t *testing.T) {
	p := &annotationsPolicy{seen: map[string]map[string]any{}}
	a, b := replicas(t, newAnnotatedUpstream(t), p)
	cs := connectBalanced(t, a, b)
	if _, err := cs.ListTools(mcpCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "wipe", Arguments: map[string]any{}})
	if err == nil && !res.IsError {
		t.Errorf("wipe through B: %s, want it denied for its annotations", mcpDescribe(res))
	}
	if n := b.up.invoked("wipe"); n != 0 {
		t.Errorf("wipe ran %d times upstream, want 0", n)
	}
	mcpWantResult(t, mcpCall(t, cs, "echo", map[string]any{}), "echo")
	p.mu.Lock()
	defer p.mu.Unlock()
	if got := p.seen["wipe"]; got["destructiveHint"] != true {
		t.Errorf("B's policy saw wipe's annotations %v, want destructiveHint true", got)
	}
}

// deadRedis is a Redis store that cannot reach its server.
func deadRedis(t *testing.T) *pending.RedisStore {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1, ContextTimeoutEnabled: true})
	s, err := pending.NewRedis(rdb, pending.Options{Prefix: "toolgate-test:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); rdb.Close() })
	return s
}

// TestSharedListingsStoreDown: with the listings' store away, a listing is
// relayed all the same (its write counted as failed), while a call that
// needs what the store would tell is refused, 503 and -31003, and
// reaches no upstream, whether it carries Mcp-Param headers or not.
func TestSharedListingsStoreDown(t *testing.T) {
	env := newMCPEnvWith(t, newParamUpstream(t), func(c *Config) { c.Listings = deadRedis(t) })
	res, msg, raw := postMCP(t, env, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+mcpMeta2026+`}}`,
		"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list")
	if res.StatusCode != http.StatusOK || msg.Result == nil || !strings.Contains(string(raw), "read_file") {
		t.Fatalf("tools/list with the store away: status %d body %s, want the listing", res.StatusCode, raw)
	}
	var m dto.Metric
	if err := env.server.metrics.notShared.WithLabelValues("files").Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("toolgate_listings_not_shared_total = %v (%v), want 1", m.GetCounter().GetValue(), err)
	}
	// read_file is known here now: its call is checked without the store.
	env.up.Reset()
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"},` + mcpMeta2026 + `}}`
	res, _, raw = postMCP(t, env, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "read_file", "Mcp-Param-Path", "a")
	if res.StatusCode != http.StatusOK {
		t.Errorf("a call of a tool listed here: status %d body %s, want it forwarded", res.StatusCode, raw)
	}

	// A tool no listing told this replica of: its Mcp-Param headers
	// cannot be checked, so such a call is refused and not forwarded.
	env.up.Reset()
	other := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"other_tool","arguments":{"path":"a"},` + mcpMeta2026 + `}}`
	h := []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "other_tool"}
	res, msg, raw = postMCP(t, env, other, append(h, "Mcp-Param-Path", "a")...)
	if res.StatusCode != http.StatusServiceUnavailable || msg.Error == nil || msg.Error.Code != rpcUnavailable {
		t.Errorf("with Mcp-Param: status %d body %s, want 503 and %d", res.StatusCode, raw, rpcUnavailable)
	}
	if got := env.up.got(); len(got) != 0 {
		t.Errorf("with Mcp-Param: the call reached the upstream:%s", describeMCP(got))
	}
	// Without them it is decided without annotations, as a replica that
	// saw no listing decided before listings were shared: allow and deny
	// keep working without Redis.
	allowing := newMCPEnvWith(t, newParamUpstream(t), func(c *Config) { c.Listings = deadRedis(t); c.Decider = allowAll })
	res, _, raw = postMCP(t, allowing, other, h...)
	if res.StatusCode == http.StatusServiceUnavailable || len(allowing.up.got()) != 1 {
		t.Errorf("without Mcp-Param: status %d body %s, upstream saw %d; want it decided (allowed) and forwarded", res.StatusCode, raw, len(allowing.up.got()))
	}
}

// countingListings counts the reads and writes of a real store.
type countingListings struct {
	pending.Listings
	recalls  atomic.Int64
	mu       sync.Mutex
	remember []int // the number of entries of each Remember
}

func (c *countingListings) Remember(ctx context.Context, upstream string, entries map[string][]byte) (int, error) {
	c.mu.Lock()
	c.remember = append(c.remember, len(entries))
	c.mu.Unlock()
	return c.Listings.Remember(ctx, upstream, entries)
}

func (c *countingListings) writes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.remember)
}

func (c *countingListings) Recall(ctx context.Context, upstream, tool string) ([]byte, error) {
	c.recalls.Add(1)
	return c.Listings.Recall(ctx, upstream, tool)
}

// TestSharedListingsReads: a call of a tool this replica listed reads no
// store; one of a tool no listing told of reads it once, then not again
// for missTTL. (One another replica listed is read once, then kept:
// TestSharedListingsParamHeaders.)
func TestSharedListingsReads(t *testing.T) {
	store := &countingListings{Listings: pending.NewMemory(pending.Options{})}
	env := newMCPEnvWith(t, newParamUpstream(t), func(c *Config) { c.Listings = store })
	call := func(tool string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"path":"a"},` + mcpMeta2026 + `}}`
		res, _, raw := postMCP(t, env, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d body %s", tool, res.StatusCode, raw)
		}
	}
	res, _, raw := postMCP(t, env, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+mcpMeta2026+`}}`,
		"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("tools/list: %d %s", res.StatusCode, raw)
	}
	for range 5 {
		call("echo")
	}
	if n := store.recalls.Load(); n != 0 {
		t.Errorf("calls of a tool listed here read the store %d times, want 0", n)
	}
	for range 5 {
		call("never_listed")
	}
	if n := store.recalls.Load(); n != 1 {
		t.Errorf("calls of a tool no listing told of read the store %d times, want 1", n)
	}
	up := env.server.upstreams[0]
	up.shared.now = func() time.Time { return time.Now().Add(missTTL + time.Second) }
	call("never_listed")
	if n := store.recalls.Load(); n != 2 {
		t.Errorf("after missTTL the store was read %d times in all, want 2", n)
	}
}

// advance moves env's shared-listings clock by d: what its replica
// learned of a tool is as old as that.
func advance(env *mcpEnv, d time.Duration) {
	up := env.server.upstreams[0]
	up.shared.now = func() time.Time { return time.Now().Add(d) }
}

// TestSharedListingsStaleAnnotations: A relayed a listing without hints,
// then the upstream marked the tool destructive and B relayed that. Past
// freshFor, A decides with the shared annotations, as B does.
func TestSharedListingsStaleAnnotations(t *testing.T) {
	up := &mcpUpstream{calls: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v0.0.1"}, nil)
	obj := map[string]any{"type": "object"}
	wipe := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		up.ran("wipe")
		return mcpText("wiped"), nil
	}
	srv.AddTool(&mcp.Tool{Name: "wipe", InputSchema: obj}, wipe)
	up.serve(t, srv, extEra.opts)
	a, b := replicas(t, up, &annotationsPolicy{seen: map[string]map[string]any{}})
	csA := connectBalanced(t, a, a)
	if _, err := csA.ListTools(mcpCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	yes := true
	srv.AddTool(&mcp.Tool{Name: "wipe", InputSchema: obj, Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, wipe)
	csB := connectBalanced(t, b, b)
	if _, err := csB.ListTools(mcpCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	advance(a, freshFor+time.Second)
	res, err := csA.CallTool(mcpCtx(t), &mcp.CallToolParams{Name: "wipe", Arguments: map[string]any{}})
	if err == nil && !res.IsError {
		t.Errorf("A forwarded wipe with the annotations of its own older listing; the shared listing marks it destructive")
	}
	if n := up.invoked("wipe"); n != 0 {
		t.Errorf("wipe ran %d times, want 0", n)
	}
}

// TestSharedListingsStaleSchema: A relayed a listing whose Mcp-Param-Path
// mirrors "path"; B then relayed one where it mirrors "target". Past
// freshFor, A holds the header to "target", as B does: a call whose header
// agrees with the old schema only is refused and never forwarded.
func TestSharedListingsStaleSchema(t *testing.T) {
	up := &mcpUpstream{calls: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v0.0.1"}, nil)
	read := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		up.ran("read_file")
		return mcpText("ok"), nil
	}
	schema := func(mirrored string) map[string]any {
		return map[string]any{"type": "object", "properties": map[string]any{
			"path":   map[string]any{"type": "string"},
			"target": map[string]any{"type": "string"},
			mirrored: map[string]any{"type": "string", "x-mcp-header": "Path"},
		}}
	}
	srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: schema("path")}, read)
	up.serve(t, srv, extEra.opts)
	a, b := replicas(t, up, nil)
	list := func(env *mcpEnv) {
		t.Helper()
		res, _, raw := postMCP(t, env, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+mcpMeta2026+`}}`,
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("tools/list: %d %s", res.StatusCode, raw)
		}
	}
	list(a)
	srv.AddTool(&mcp.Tool{Name: "read_file", InputSchema: schema("target")}, read)
	list(b)
	advance(a, freshFor+time.Second)
	up.Reset()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"notes/a.txt","target":"/etc/shadow"},` + mcpMeta2026 + `}}`
	res, _, raw := postMCP(t, a, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "read_file", "Mcp-Param-Path", "notes/a.txt")
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "-32020") {
		t.Errorf("A: %d %s, want 400 with -32020 (the header mirrors target now)", res.StatusCode, raw)
	}
	if got := up.got(); len(got) != 0 {
		t.Errorf("the upstream received %d requests through A, want none", len(got))
	}
}

// TestSharedListingsRefresh: a listing writes its tools to the shared
// listings when they are new, not when the next listing tells the same,
// and again once pending.ListingRefresh passed since, changed or not:
// each tool's shared entry lapses on its own, and the tools of a page
// that is listed must never lapse.
func TestSharedListingsRefresh(t *testing.T) {
	store := &countingListings{Listings: pending.NewMemory(pending.Options{})}
	env := newMCPEnvWith(t, newParamUpstream(t), func(c *Config) { c.Listings = store })
	list := func() {
		t.Helper()
		res, _, raw := postMCP(t, env, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+mcpMeta2026+`}}`,
			"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("tools/list: %d %s", res.StatusCode, raw)
		}
	}
	list()
	first := store.writes()
	if len(first) != 1 || first[0] == 0 {
		t.Fatalf("the first listing wrote %v, want one write of its tools", first)
	}
	list()
	if got := store.writes(); len(got) != 1 {
		t.Errorf("a listing that told the same again wrote %v, want nothing more", got[1:])
	}
	advance(env, pending.ListingRefresh+time.Second)
	list()
	if got := store.writes(); len(got) != 2 || got[1] != first[0] {
		t.Errorf("a listing after ListingRefresh wrote %v, want all %d tools again", got[1:], first[0])
	}
}
