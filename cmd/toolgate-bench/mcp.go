package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The -mcp run: MCP tools/call measured the way the REST rows are, against
// a real MCP server (the official Go SDK over Streamable HTTP) in its three
// transport modes, each direct, through the bare proxy and through toolgate.

// mcpMode is one way the MCP server answers.
type mcpMode struct {
	name string // also the server's path: /<name>/mcp
	opts mcp.StreamableHTTPOptions
	// version is the protocol revision the load speaks: the session era
	// (initialize, then Mcp-Session-Id) or the stateless 2026-07-28
	// revision (no handshake; Mcp-Method and Mcp-Name headers, the
	// version in params._meta).
	version string
}

func (m mcpMode) stateless() bool { return m.opts.Stateless }

var mcpModes = []mcpMode{
	{"json", mcp.StreamableHTTPOptions{JSONResponse: true}, "2025-11-25"},
	{"sse", mcp.StreamableHTTPOptions{}, "2025-11-25"},
	{"stateless", mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}, "2026-07-28"},
}

// mcpBodySize is the size of every MCP tools/call body: the stateless
// revision's params._meta does not fit in bodySize.
const mcpBodySize = 400

// mcpPad pads the "content" argument so that the body is mcpBodySize
// bytes once its %10d id is filled in (a number padded with
// spaces, which JSON allows and leading zeros it does not).
func mcpPad(s string) string {
	i := strings.Index(s, `"content":""`) + len(`"content":"`)
	n := mcpBodySize - len(s) - 6 // %10d grows by 6
	if n < 0 {
		panic("MCP body template too long: " + s)
	}
	return s[:i] + strings.Repeat("x", n) + s[i:]
}

var (
	// mcpSessionTemplate is a tools/call of the session era, formatted per
	// request with its JSON-RPC id.
	mcpSessionTemplate = mcpPad(`{"jsonrpc":"2.0","id":%10d,"method":"tools/call","params":{"name":"write_note","arguments":{"path":"drafts/today.md","content":""}}}`)
	// mcpStatelessTemplate is the same call in the stateless revision, as
	// the SDK's client sends it.
	mcpStatelessTemplate = mcpPad(`{"jsonrpc":"2.0","id":%10d,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"toolgate-bench","version":"v1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"write_note","arguments":{"path":"drafts/today.md","content":""}}}`)
)

// mcpNoteArgs are write_note's arguments.
type mcpNoteArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// mcpHandler serves one MCP server with the tool write_note at
// /<mode>/mcp for every mode, counting each run of the tool in count.
// GET /_bench/count tells how many ran.
func mcpHandler(count *atomic.Int64) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "write_note", Description: "write a note"},
		func(_ context.Context, _ *mcp.CallToolRequest, in mcpNoteArgs) (*mcp.CallToolResult, any, error) {
			count.Add(1)
			text := fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.Path)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	mux := http.NewServeMux()
	for _, m := range mcpModes {
		mux.Handle("/"+m.name+"/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &m.opts))
	}
	mux.HandleFunc("GET /_bench/count", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"count":%d}`, count.Load())
	})
	return mux
}

// runMCPServer is the MCP tool server of the -mcp run.
func runMCPServer(args []string) error {
	fs := flag.NewFlagSet("mcpserver", flag.ContinueOnError)
	addr := fs.String("listen", "127.0.0.1:0", "address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var count atomic.Int64
	return serveUntilSignal(*addr, mcpHandler(&count))
}

// mcpTable is the rules table of the MCP toolgate: the REST rows' table
// and a row that allows the notes the load writes.
func mcpTable(rules []rule) []rule {
	return append(append([]rule(nil), rules...), rule{"r11", "allow", "write_note", "drafts/**"})
}

// mcpPolicy is the small Rego policy beside the table, so that OPA
// evaluates user Rego on every call (the realistic case).
const mcpPolicy = `package toolgate

deny contains {"id": "no-etc", "message": "nothing under /etc"} if startswith(input.tool.arguments.path, "/etc")
`

// mcpToolgateConfig is the MCP toolgate's configuration: one MCP upstream
// per mode at /<mode>/, the table and the Rego policy.
func mcpToolgateConfig(upstream, proxyAddr, approvalsAddr, adminAddr string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: {proxy: %q, approvals: %q, admin: %q}\nupstreams:\n", proxyAddr, approvalsAddr, adminAddr)
	for _, m := range mcpModes {
		fmt.Fprintf(&b, "  - {name: %s, url: %q, protocol: mcp, prefix: /%s/, mcp_path: /mcp}\n", m.name, upstream+"/"+m.name, m.name)
	}
	b.WriteString(`identity:
  api_keys: [{key: "${BENCH_AGENT_KEY}", subject: agent-bench, groups: [agents]}]
policy: {dir: ./mcp-policy, rules_file: ./mcp-rules.yaml, watch: false}
pending: {store: memory}
approvals:
  secret: "${BENCH_APPROVALS_SECRET}"
  approvers: [{name: bench-approver, key: "${BENCH_APPROVER_KEY}"}]
log: {level: info}
`)
	return b.String()
}

// startMCPStack starts the MCP server, a bare proxy in front of it and
// toolgate, pinned to the servers' core.
func startMCPStack(ctx context.Context, o *options, pin pinning) (*stack, error) {
	s := &stack{dir: o.dir, agentKey: secret(), serversCPU: pin.servers, url: map[string]string{}}
	addrs, err := namedPorts("mcpserver", "bare", "tg-proxy", "tg-approvals", "tg-admin")
	if err != nil {
		return nil, err
	}
	// "direct" is where settle and measure count the calls that ran.
	s.url["direct"] = "http://" + addrs["mcpserver"]
	if s.upstream, err = startProc(o.dir, "mcpserver", pin.servers, self("mcpserver", "-listen", addrs["mcpserver"]), nil); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, s.upstream, s.url["direct"]+"/_bench/count", 10*time.Second); err != nil {
		return nil, err
	}
	s.url["bare"] = "http://" + addrs["bare"]
	if s.bare, err = startProc(o.dir, "bare", pin.servers, self("bare", "-listen", addrs["bare"], "-upstream", s.url["direct"]), nil); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, s.bare, s.url["bare"]+"/_bench/count", 10*time.Second); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(o.dir, "mcp-policy"), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.dir, "mcp-policy", "bench.rego"), []byte(mcpPolicy), 0o600); err != nil {
		return nil, err
	}
	if err := writeRules(filepath.Join(o.dir, "mcp-rules.yaml"), mcpTable(o.rules)); err != nil {
		return nil, err
	}
	cfg := filepath.Join(o.dir, "toolgate-mcp.yaml")
	if err := os.WriteFile(cfg, []byte(mcpToolgateConfig(s.url["direct"], addrs["tg-proxy"], addrs["tg-approvals"], addrs["tg-admin"])), 0o600); err != nil {
		return nil, err
	}
	env := []string{"BENCH_AGENT_KEY=" + s.agentKey, "BENCH_APPROVER_KEY=" + secret(), "BENCH_APPROVALS_SECRET=" + secret()}
	if s.tgMemory, err = startProc(o.dir, "toolgate-mcp", pin.servers, []string{o.toolgate, "serve", "--config", cfg}, env); err != nil {
		return nil, err
	}
	s.url["toolgate"] = "http://" + addrs["tg-proxy"]
	return s, waitReady(ctx, s.tgMemory, "http://"+addrs["tg-admin"]+"/readyz", 30*time.Second)
}

// mcpTargets are the -mcp run's rows: per mode, the MCP server direct,
// through the bare proxy and through toolgate. Every row's CPU shows the
// server side and the MCP server apart.
func (s *stack) mcpTargets(o *options) []*target {
	var all []*target
	for _, m := range mcpModes {
		direct := "MCP direct (" + m.name + ")"
		bare := "MCP bare proxy (" + m.name + ")"
		p := "/" + m.name + "/mcp"
		all = append(all,
			&target{name: direct, ref: direct, url: s.url["direct"] + p, mode: &m, expect: 200, procs: []*proc{s.upstream}, reaches: true},
			&target{name: bare, ref: direct, bare: bare, url: s.url["bare"] + p, mode: &m, expect: 200, procs: []*proc{s.bare, s.upstream}, parts: []string{"proxy", "MCP server"}, upstreamCPU: true, reaches: true},
			&target{name: "MCP toolgate (" + m.name + ")", ref: direct, bare: bare, url: s.url["toolgate"] + p, mode: &m, expect: 200, procs: []*proc{s.tgMemory, s.upstream}, parts: []string{"toolgate", "MCP server"}, upstreamCPU: true, reaches: true},
		)
	}
	return pick(o, all)
}

// mcpPost sends one JSON-RPC message of t's mode (with session when not
// empty) and returns the answer's status, session header and body.
func mcpPost(ctx context.Context, t *target, agentKey, session, body string) (int, string, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header = t.headers(agentKey)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if !strings.Contains(body, `"tools/call"`) {
		req.Header.Del("Mcp-Method")
		req.Header.Del("Mcp-Name")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Mcp-Session-Id"), b, err
}

// openSessions initialises n sessions of t's mode, as n agents would
// (initialize, then notifications/initialized); none in stateless mode.
func openSessions(ctx context.Context, t *target, agentKey string, n int) ([]string, error) {
	if t.mode == nil || t.mode.stateless() {
		return nil, nil
	}
	var ids []string
	initialize := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + t.mode.version + `","capabilities":{},"clientInfo":{"name":"toolgate-bench","version":"v1"}}}`
	for range n {
		status, id, b, err := mcpPost(ctx, t, agentKey, "", initialize)
		if err != nil {
			return ids, fmt.Errorf("%s: initialize: %w", t.name, err)
		}
		if status != http.StatusOK || id == "" {
			return ids, fmt.Errorf("%s: initialize: status %d, session %q: %s", t.name, status, id, b)
		}
		ids = append(ids, id)
		status, _, b, err = mcpPost(ctx, t, agentKey, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if err != nil {
			return ids, fmt.Errorf("%s: initialized: %w", t.name, err)
		}
		if status != http.StatusAccepted {
			return ids, fmt.Errorf("%s: initialized: status %d: %s", t.name, status, b)
		}
	}
	return ids, nil
}

// closeSessions ends the sessions (DELETE), so that none piles up in the
// servers across runs.
func closeSessions(t *target, agentKey string, ids []string) {
	for _, id := range ids {
		req, _ := http.NewRequest(http.MethodDelete, t.url, nil)
		req.Header = t.headers(agentKey)
		req.Header.Del("Content-Type")
		req.Header.Set("Mcp-Session-Id", id)
		if res, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
}

// checkMCP sends one allowed call to t, which must run the tool, and one
// to a path under /etc, which toolgate's Rego rule must deny.
func (s *stack) checkMCP(ctx context.Context, t *target) error {
	ids, err := openSessions(ctx, t, s.agentKey, 1)
	defer closeSessions(t, s.agentKey, ids)
	if err != nil {
		return err
	}
	session := ""
	if len(ids) > 0 {
		session = ids[0]
	}
	call := fmt.Sprintf(t.idTemplate(), 1)
	status, _, b, err := mcpPost(ctx, t, s.agentKey, session, call)
	if err != nil {
		return fmt.Errorf("check %s: %w", t.name, err)
	}
	if res := mcpResult(b); status != http.StatusOK || res == nil || res.IsError || !strings.Contains(fmt.Sprint(res.Content), "wrote") {
		return fmt.Errorf("check %s: status %d, want a tool result: %s", t.name, status, b)
	}
	if !strings.HasPrefix(t.name, "MCP toolgate") {
		return nil
	}
	status, _, b, err = mcpPost(ctx, t, s.agentKey, session, strings.Replace(call, "drafts/today.md", "/etc/passwd", 1))
	if err != nil {
		return fmt.Errorf("check %s: %w", t.name, err)
	}
	if res := mcpResult(b); status != http.StatusOK || res == nil || !res.IsError || !bytes.Contains(b, []byte("nothing under /etc")) {
		return fmt.Errorf("check %s: a write under /etc: status %d, want the Rego rule's denial: %s", t.name, status, b)
	}
	return nil
}

// mcpResult reads a tools/call result from a JSON or SSE answer.
func mcpResult(b []byte) *struct {
	Content []any `json:"content"`
	IsError bool  `json:"isError"`
} {
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimPrefix(line, "data: ")
		var msg struct {
			Result *struct {
				Content []any `json:"content"`
				IsError bool  `json:"isError"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.Result != nil {
			return msg.Result
		}
	}
	return nil
}
