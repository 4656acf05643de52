package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/callinfo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

var allowAll = deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
	return policy.Decision{Action: policy.Allow}, nil
})

// rawExchange sends raw bytes on a fresh connection to addr and returns the
// first response and the connection.
func rawExchange(t *testing.T, addr, raw string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return res, conn, br
}

// tunnelUpstream switches protocols whenever it is asked to (and, with
// always, even when not) and records every byte that reaches it after the
// switch.
type tunnelUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	upgrades []http.Header
	tunneled strings.Builder
}

func newTunnelUpstream(t *testing.T, always bool) *tunnelUpstream {
	u := &tunnelUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.upgrades = append(u.upgrades, r.Header.Clone())
		u.mu.Unlock()
		if r.Header.Get("Upgrade") == "" && !always {
			_, _ = io.WriteString(w, "plain")
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		b, _ := io.ReadAll(brw)
		u.mu.Lock()
		u.tunneled.Write(b)
		u.mu.Unlock()
	}))
	t.Cleanup(u.Close)
	return u
}

// TestNoProtocolSwitch: an allowed request asking for an upgrade
// (WebSocket, h2c) reaches the upstream without Upgrade, and an upstream's
// 101 is answered 502: no byte after it ever reaches the upstream.
func TestNoProtocolSwitch(t *testing.T) {
	for _, always := range []bool{false, true} {
		t.Run(fmt.Sprintf("upstream switches regardless=%v", always), func(t *testing.T) {
			up := newTunnelUpstream(t, always)
			env := newTestServer(t, allowAll, func(c *Config) { c.Upstreams[0].URL, _ = url.Parse(up.URL) })
			addr := strings.TrimPrefix(env.url, "http://")
			for _, hdr := range []string{
				"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
				"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n",
			} {
				res, conn, _ := rawExchange(t, addr, "GET /chat HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer agent-key\r\n"+hdr+"\r\n")
				want := http.StatusOK
				if always {
					want = http.StatusBadGateway
				}
				if res.StatusCode != want {
					t.Fatalf("status %d, want %d", res.StatusCode, want)
				}
				// Whatever the agent sends next must not reach the upstream.
				_, _ = io.WriteString(conn, "POST /tools/delete_file HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n{\"path\":\".env\"}")
			}
			time.Sleep(300 * time.Millisecond)
			up.mu.Lock()
			defer up.mu.Unlock()
			for _, h := range up.upgrades {
				if h.Get("Upgrade") != "" || h.Get("Http2-Settings") != "" || strings.Contains(strings.ToLower(h.Get("Connection")), "upgrade") {
					t.Errorf("the upstream was asked to switch protocols: %v", h)
				}
			}
			if strings.Contains(up.tunneled.String(), "delete_file") {
				t.Errorf("bytes after a protocol switch reached the upstream: %q", up.tunneled.String())
			}
		})
	}
}

// TestUpstreamCannotSpeakForToolgate: an upstream's X-Toolgate-* headers
// reach the agent on no part of its answer (a 103, the final answer, an
// announced or unannounced trailer), and toolgate's own headers stay on the
// final answer, after a 1xx too.
func TestUpstreamCannotSpeakForToolgate(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if r.URL.Path == "/unannounced" { // a trailer alone, known only at the body's end
			_, _ = io.WriteString(w, "ok")
			h.Set(http.TrailerPrefix+"X-Toolgate-Decision", "forged-unannounced")
			return
		}
		h.Set("Link", "</style.css>; rel=preload")
		h.Set("X-Toolgate-Decision", "deny")
		h.Set("X-Toolgate-Call-Id", "FORGED")
		w.WriteHeader(http.StatusEarlyHints)
		clear(h)
		h.Set("Trailer", "X-Toolgate-Decision, X-Checksum")
		h.Set("X-Toolgate-Decision", "forged-header")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "ok")
		h.Set("X-Toolgate-Decision", "forged-trailer")
		h.Set("X-Checksum", "abc")
		h.Set(http.TrailerPrefix+"X-Toolgate-Subject", "forged-unannounced")
	}))
	t.Cleanup(up.Close)
	env := newTestServer(t, allowAll, func(c *Config) { c.Upstreams[0].URL, _ = url.Parse(up.URL) })
	var early []http.Header
	trace := &httptrace.ClientTrace{Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
		early = append(early, http.Header(h).Clone())
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, env.url+"/files", nil)
	req.Header.Set("Authorization", "Bearer agent-key")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("status %d body %q", res.StatusCode, body)
	}
	if len(early) != 1 || early[0].Get("Link") == "" {
		t.Fatalf("1xx answers %v, want the upstream's 103", early)
	}
	for k := range early[0] {
		if strings.HasPrefix(k, "X-Toolgate-") {
			t.Errorf("the 103 carries %s: %q", k, early[0].Values(k))
		}
	}
	if v := res.Header.Values(headerDecision); len(v) != 1 || v[0] != outcomeAllow {
		t.Errorf("X-Toolgate-Decision %q, want toolgate's %q alone", v, outcomeAllow)
	}
	if v := res.Header.Values(headerCallID); len(v) != 1 || v[0] == "FORGED" {
		t.Errorf("X-Toolgate-Call-Id %q", v)
	}
	if res.Trailer.Get("X-Checksum") != "abc" {
		t.Errorf("the upstream's own trailer is lost: %v", res.Trailer)
	}
	for k := range res.Trailer {
		if strings.HasPrefix(k, "X-Toolgate-") {
			t.Errorf("trailer %s: %q", k, res.Trailer.Values(k))
		}
	}
	req, _ = http.NewRequest(http.MethodGet, env.url+"/unannounced", nil)
	req.Header.Set("Authorization", "Bearer agent-key")
	if res, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if v := res.Trailer.Values("X-Toolgate-Decision"); len(v) != 0 || res.Header.Get(headerDecision) != outcomeAllow {
		t.Errorf("an unannounced trailer alone: trailer %q, header %q", v, res.Header.Get(headerDecision))
	}
}

// TestConnectionCannotStripToolgateHeaders: a client's Connection header
// names hop-by-hop headers; it cannot name toolgate's own away.
func TestConnectionCannotStripToolgateHeaders(t *testing.T) {
	env := newTestServer(t, allowAll)
	res := post(t, env.url+"/tools/read_file", `{"path":"a"}`, "Authorization", "Bearer agent-key",
		"Connection", "close, X-Toolgate-Call-Id, X-Toolgate-Subject, X-Forwarded-For")
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	got := env.upstream.Requests()
	h := got[len(got)-1].Header
	if h.Get(headerCallID) == "" || h.Get("X-Toolgate-Subject") != "agent-42" || h.Get("X-Forwarded-For") == "" {
		t.Fatalf("upstream headers %v: toolgate's own were stripped by the client's Connection", h)
	}
}

// TestClaimHeadersNeverReachTheUpstream: identity and routing claims of
// every known family, and an upstream's strip list, are removed.
func TestClaimHeadersNeverReachTheUpstream(t *testing.T) {
	claims := []string{
		"X-Authenticated-User", "X-Authenticated-Groups", "X-Envoy-Original-Path", "X-Envoy-Internal",
		"X-Original-Url", "X-Original-Method", "X-Remote-User", "X-Remote-Group", "X-Rewrite-Url",
		"Forwarded", "X-Real-Ip", "X-Forwarded-Host", "X-Toolgate-Subject", "X_User", "X-Internal-User",
	}
	var seen *policy.Input
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		seen = in
		return policy.Decision{Action: policy.Allow}, nil
	})
	env := newTestServer(t, d, func(c *Config) { c.Upstreams[0].StripHeaders = []string{"X-Internal-User"} })
	hdr := []string{"Authorization", "Bearer agent-key"}
	for _, k := range claims {
		hdr = append(hdr, k, "evil")
	}
	if res := post(t, env.url+"/tools/read_file", `{"path":"a"}`, hdr...); res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	got := env.upstream.Requests()
	up := got[len(got)-1].Header
	for _, k := range claims {
		for _, v := range up.Values(k) {
			if v == "evil" {
				t.Errorf("%s from the agent reached the upstream", k)
			}
		}
		if _, ok := seen.HTTP.Headers[strings.ToLower(k)]; ok && k != "X-Toolgate-Subject" {
			t.Errorf("%s reached the policy input, though it is not forwarded", k)
		}
	}
}

func TestConnectRefused(t *testing.T) {
	env := newTestServer(t, allowAll)
	res, _, _ := rawExchange(t, strings.TrimPrefix(env.url, "http://"), "CONNECT internal:22 HTTP/1.1\r\nHost: internal:22\r\nAuthorization: Bearer agent-key\r\n\r\n")
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") == "" {
		t.Fatalf("CONNECT: %d, Allow %q; want 405 with Allow", res.StatusCode, res.Header.Get("Allow"))
	}
	if n := len(env.upstream.Requests()); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
}

// TestToolQuery: a tool call's arguments are its body. A query string is
// refused unless the upstream takes one, and then a name may not be in both,
// nor name a target argument.
func TestToolQuery(t *testing.T) {
	for _, tc := range []struct {
		name      string
		toolQuery bool
		url       string
		body      string
		want      int
	}{
		{"query refused by default", false, "/tools/read_file?path=.env", `{"path":"README.md"}`, 400},
		{"no query, default", false, "/tools/read_file", `{"path":"README.md"}`, 200},
		{"query taken", true, "/tools/read_file?dry=1", `{"path":"README.md"}`, 200},
		{"query repeats an argument", true, "/tools/read_file?path=.env", `{"path":"README.md"}`, 400},
		{"query repeats an argument in another case", true, "/tools/read_file?Path=.env", `{"path":"README.md"}`, 400},
		{"repeated query name", true, "/tools/read_file?dry=1&dry=0", `{"path":"README.md"}`, 400},
		// qs reads each of these as dry_run, which a framework that spreads
		// the query over the body merges with the body's.
		{"query repeats an argument as its array", true, "/tools/read_file?dry_run%5B%5D=false", `{"path":"README.md","dry_run":true}`, 400},
		{"query repeats an argument as its index", true, "/tools/read_file?dry_run%5B0%5D=false", `{"path":"README.md","dry_run":true}`, 400},
		{"query repeats an argument in brackets", true, "/tools/read_file?%5Bdry_run%5D=false", `{"path":"README.md","dry_run":true}`, 400},
		// Dots are structure to qs with allowDots: merged into the body's.
		{"an argument with a dot in the query", true, "/tools/read_file?dry_run.x=false", `{"path":"README.md","dry_run":true}`, 400},
		{"an argument after a dot in the query", true, "/tools/read_file?.dry_run=false", `{"path":"README.md","dry_run":true}`, 400},
		{"query repeats an argument as a loose binder reads it", true, "/tools/read_file?dryRun=false", `{"path":"README.md","dry_run":true}`, 400},
		// A target argument the body does not hold: the rules would never see it.
		{"target argument in the query", true, "/tools/read_file?file=.env", `{"path":"README.md"}`, 400},
		{"target argument in the query, another case", true, "/tools/read_file?FILE=.env", `{}`, 400},
		{"target argument as a query array", true, "/tools/read_file?file%5B%5D=.env", `{"path":"README.md"}`, 400},
		{"target argument as a query index", true, "/tools/read_file?path%5B0%5D=.env", `{}`, 400},
		{"target argument spelt as PHP binds it", true, "/tools/read_file?file.path=.env", `{}`, 400},
		{"target argument in brackets", true, "/tools/read_file?%5Bpath%5D=.env", `{}`, 400},
		{"target argument after a dot", true, "/tools/read_file?.path=.env", `{}`, 400},
		{"target argument after a space", true, "/tools/read_file?%20path=.env", `{}`, 400},
		{"target argument with an unclosed bracket", true, "/tools/read_file?file%5Bpath=.env", `{}`, 400},
		{"target argument spelt as PHP binds it, as an array", true, "/tools/read_file?file%20path%5B%5D=.env", `{}`, 400},
		{"other names with brackets and dots", true, "/tools/read_file?page%5Bsize%5D=2&filter.kind=x", `{"path":"README.md"}`, 200},
		// PHP binds the part before "[" with "." read as "_".
		{"a custom target argument as PHP binds it", true, "/tools/read_file?source.path%5B0%5D=x", `{}`, 400},
		{"repeated name on a plain call", false, "/files?all=1&all=0", ``, 400},
		{"'#' sent as %23", false, "/files?x=%23&dry_run=true", ``, 200},
		// Names a stack binds to one parameter: a repeated name in disguise.
		{"names differing in case", false, "/files?dry_run=true&DRY_RUN=false", ``, 400},
		{"names PHP reads as one", false, "/files?dry_run=true&dry.run=false", ``, 400},
		{"a name and its array", false, "/files?dry_run=true&dry_run%5B%5D=false", ``, 400},
		{"a name and an unclosed bracket", false, "/files?dry_run=true&dry%5Brun=false", ``, 400},
		{"a name and its index", false, "/files?dry_run=true&dry_run%5B0%5D=false", ``, 400},
		{"a name and a key of it", false, "/files?dry_run=true&dry_run%5Bx%5D=1", ``, 400},
		{"a name's array and its index", false, "/files?dry_run%5B%5D=true&dry_run%5B0%5D=false", ``, 400},
		{"a name in another case and its index", false, "/files?Dry.Run=true&dry_run%5B0%5D=false", ``, 400},
		{"a name and itself in brackets", false, "/files?dry_run=true&%5Bdry_run%5D=false", ``, 400},
		{"a name and itself cut by a NUL", false, "/files?dry_run=true&dry_run%00=false", ``, 400},
		{"a name and itself after a dot", false, "/files?dry_run=true&.dry_run=false", ``, 200},
		{"a name and a dotted name under it (Solr's facet.field)", false, "/files?facet=true&facet.field=cat&q=x&q.op=AND", ``, 200},
		// PHP reads "dry.run[0]" as dry_run[0], under dry_run.
		{"a name and its PHP spelling with an index", false, "/files?dry_run=true&dry.run%5B0%5D=false", ``, 400},
		{"a name and its PHP spelling with a key", false, "/files?dry_run=true&dry%20run%5Bx%5D=false", ``, 400},
		{"dotted paths under one name", false, "/files?filter.kind=a&filter.size=2", ``, 200},
		// qs and Node's querystring read 1,000 parts, empty ones included.
		{"more parts than an upstream reads", false, "/files?p=0" + strings.Repeat("&", maxQueryParts) + "dry_run=true", ``, 400},
		{"as many parts as toolgate takes", false, "/files?p=0" + strings.Repeat("&", maxQueryParts-2) + "&dry_run=true", ``, 200},
		{"nested names", false, "/files?filter%5Bname%5D=a&filter%5Bage%5D=3&page=2", ``, 200},
		{"a matrix", false, "/files?m%5B1%5D%5B10%5D=a&m%5B11%5D%5B0%5D=b", ``, 200},
		{"names apart but for punctuation no stack rewrites", false, "/files?%24filter=a&filter=b&_source=x&source=y", ``, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestServer(t, allowAll, func(c *Config) {
				c.Upstreams[0].ToolQuery = tc.toolQuery
				c.Upstreams[0].TargetArgs = append([]string{"source_path"}, policy.DefaultTargetArgs...)
			})
			res := post(t, env.url+tc.url, tc.body, "Authorization", "Bearer agent-key")
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.want)
			}
			if n := len(env.upstream.Requests()); (n == 1) != (tc.want == 200) {
				t.Fatalf("the upstream got %d requests", n)
			}
		})
	}
}

func TestLossyNumbers(t *testing.T) {
	for _, allow := range []bool{false, true} {
		env := newTestServer(t, allowAll, func(c *Config) { c.AllowLossyNumbers = allow })
		res := post(t, env.url+"/tools/transfer", `{"amount":999.99999999999999999}`, "Authorization", "Bearer agent-key")
		want := 400
		if allow {
			want = 200
		}
		if res.StatusCode != want {
			t.Errorf("allow=%v: status %d, want %d", allow, res.StatusCode, want)
		}
	}
}

// TestMCPEndpointMethods: only POST, GET and DELETE exist on mcp_path, and
// GET and DELETE carry no body.
func TestMCPEndpointMethods(t *testing.T) {
	env := newTestServer(t, allowAll, func(c *Config) { c.Upstreams[0].Protocol = "mcp" })
	for _, tc := range []struct {
		method, body string
		want         int
	}{
		{"PUT", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":".env"}}}`, 405},
		{"PATCH", ``, 405},
		{"GET", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":".env"}}}`, 400},
		{"DELETE", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file"}}`, 400},
		{"GET", ``, 200},
	} {
		req, _ := http.NewRequest(tc.method, env.url+"/mcp", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer agent-key")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%s with %d body bytes: %d, want %d", tc.method, len(tc.body), res.StatusCode, tc.want)
		}
	}
	for _, r := range env.upstream.Requests() {
		if len(r.Body) > 0 {
			t.Errorf("the upstream got a %s with a body: %s", r.Method, r.Body)
		}
	}
}

// TestMCPEndpointQuery: a query on the MCP endpoint is refused unless the
// upstream takes one (tool_query), and then a tools/call's query may not
// name an argument or a target argument, as a REST call's may not.
func TestMCPEndpointQuery(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a.txt"}}}`
	for _, tc := range []struct {
		name      string
		toolQuery bool
		method    string
		query     string
		body      string
		want      int
	}{
		{"tools/call, no query", false, "POST", "", call, 200},
		{"tools/call with a query", false, "POST", "path=secret.txt", call, 400},
		{"ping with a query", false, "POST", "config=x", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 400},
		{"the SSE stream with a query", false, "GET", "x=1", ``, 400},
		{"tool_query: a harmless name", true, "POST", "dry=1", call, 200},
		{"tool_query: a body argument", true, "POST", "path=secret.txt", call, 400},
		{"tool_query: a target argument", true, "POST", "file=secret.txt", call, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestServer(t, allowAll, func(c *Config) {
				c.Upstreams[0].Protocol = "mcp"
				c.Upstreams[0].ToolQuery = tc.toolQuery
			})
			req, _ := http.NewRequest(tc.method, env.url+"/mcp?"+tc.query, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer agent-key")
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.want)
			}
			if n := len(env.upstream.Requests()); (n == 1) != (tc.want == 200) {
				t.Fatalf("the upstream got %d requests", n)
			}
		})
	}
}

// TestUpstreamFailureTellsNoAddress: the agent learns that the upstream
// failed, and which rule allowed the call, not where the upstream is or
// what Go said.
func TestUpstreamFailureTellsNoAddress(t *testing.T) {
	dead := testkit.NewUpstream(t, nil)
	deadURL := dead.URL
	dead.Close()
	allowed := deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
		return policy.Decision{Action: policy.Allow, Reasons: []policy.Reason{{ID: "reads", Message: "reads are fine"}}}, nil
	})
	env := newTestServer(t, allowed, func(c *Config) { c.Upstreams[0].URL, _ = url.Parse(deadURL) })
	res := post(t, env.url+"/tools/read_file", `{"path":"a"}`, "Authorization", "Bearer agent-key")
	body, _ := io.ReadAll(res.Body)
	host := strings.TrimPrefix(deadURL, "http://")
	if res.StatusCode != http.StatusBadGateway || strings.Contains(string(body), host) || strings.Contains(string(body), "dial") {
		t.Fatalf("%d %s: want 502 without the upstream's address or Go's error", res.StatusCode, body)
	}
	var p struct {
		Decision string   `json:"decision"`
		Reasons  []string `json:"reasons"`
		RuleIDs  []string `json:"rule_ids"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Decision != "allow" || !slices.Equal(p.Reasons, []string{"reads are fine"}) || !slices.Equal(p.RuleIDs, []string{"reads"}) {
		t.Errorf("problem %s (%v): want the allow's reasons and rule IDs beside it", body, err)
	}
}

// TestStalledBody: a body that stops arriving is refused with 408 within
// the body timeout, before and after authentication alike.
func TestStalledBody(t *testing.T) {
	for _, traced := range []bool{false, true} {
		t.Run(fmt.Sprintf("traced=%v", traced), func(t *testing.T) { testStalledBody(t, traced) })
	}
}

func testStalledBody(t *testing.T, traced bool) {
	env := newTestServer(t, allowAll, func(c *Config) {
		c.BodyTimeout = 300 * time.Millisecond
		if traced {
			c.TracerProvider = sdktrace.NewTracerProvider()
		}
	})
	addr := strings.TrimPrefix(env.url, "http://")
	start := time.Now()
	res, _, _ := rawExchange(t, addr, "POST /tools/read_file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer agent-key\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	if res.StatusCode != http.StatusRequestTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("authenticated stalled body: %d after %v, want 408", res.StatusCode, time.Since(start))
	}
	// With a bad credential the body is never read; the connection is not
	// kept waiting for it either.
	res, conn, br := rawExchange(t, addr, "POST /tools/read_file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated: %d, want 401", res.StatusCode)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the connection of an unread stalled body stayed open (%v)", err)
	}
	if n := len(env.upstream.Requests()); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
}

// TestControlCharacters: a key or a target holding a C0 control character
// is refused: stacks disagree on where such a string ends.
func TestControlCharacters(t *testing.T) {
	env := newTestServer(t, allowAll)
	for _, body := range []string{`{"path\u0000":".env","path":"README.md"}`, `{"path":"README.md\u0000.env"}`, `{"o":{"k\u001f":1}}`, `{"file":["README.md","x\u0000.env"]}`, `{"path":[["..\u0000/etc"]]}`, `{"path":{"p":"..\u0000"}}`} {
		if res := post(t, env.url+"/tools/read_file", body, "Authorization", "Bearer agent-key"); res.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", body, res.StatusCode)
		}
	}
	if n := len(env.upstream.Requests()); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
}

// TestHiddenCharactersInTargets: DEL and the C1 controls are control
// characters too, refused in keys and targets; a target holding a bidi
// control, an invisible format character, a tag character (invisible
// ASCII a model reads) or a variation selector that selects nothing would
// show as another string to an approver than the tool reads
// (report\u202etxt.exe shows as reportexe.txt, report\ufe0f.txt as
// report.txt), so it is refused as well, before a real policy that allows
// every read. The answer names the character, and nothing reaches the
// upstream. Right-to-left names, the joiners Persian and emoji need, emoji
// and ideographs with their variation selectors, and such characters
// outside targets reach it byte for byte.
func TestHiddenCharactersInTargets(t *testing.T) {
	env := newTestServer(t, seedEngineRules(t, `rules:
  - {id: all, effect: allow, tool: read_file, target: "**"}
`))
	for _, tc := range []struct{ body, want string }{
		{`{"path":"a\u007fb"}`, `target "a\x7fb" holds the control character U+007F`},
		{`{"path":"a\u0085b"}`, `target "a\u0085b" holds the control character U+0085`},
		{`{"command":"echo \u009b31m"}`, "control character U+009B"},
		{`{"file":["README.md","x\u0080"]}`, "control character U+0080"},
		{`{"o":{"k\u007f":1},"path":"README.md"}`, `argument key "k\x7f" holds the control character U+007F`},
		{`{"path":"notes/report\u202etxt.exe"}`, `target "notes/report\u202etxt.exe" holds the bidi control character U+202E`},
		{`{"path":"a\u2066b\u2069"}`, "bidi control character U+2066"},
		{`{"path":"a\u200fb"}`, "bidi control character U+200F"},
		{`{"url":"https://ev\u00adil.com/"}`, "invisible format character U+00AD"},
		{`{"path":".e\u200bnv"}`, "invisible format character U+200B"},
		{`{"path":{"\ufeffk":"v"}}`, `argument key "\ufeffk" holds the invisible format character U+FEFF`},
		{`{"path":"notes.txt\udb40\udc49\udb40\udc47\udb40\udc4e"}`, `target "notes.txt\U000e0049\U000e0047\U000e004e" holds the tag character U+E0049`},
		{`{"file":["a.md","b\udb40\udc7f"]}`, "tag character U+E007F"},
		{`{"path":"report\ufe0f.txt"}`, `target "report\ufe0f.txt" holds the variation selector U+FE0F where it selects nothing`},
		{`{"path":"v2\ufe0e"}`, "variation selector U+FE0E"},
		{`{"path":"a\udb40\udd00"}`, "variation selector U+E0100"},
		{`{"path":"report\u180b.txt"}`, `target "report\u180b.txt" holds the variation selector U+180B where it selects nothing`},
		{`{"url":"https://ev\u180fil.com/"}`, "variation selector U+180F"},
	} {
		res := post(t, env.url+"/tools/read_file", tc.body, "Authorization", "Bearer agent-key")
		p := readProblem(t, res)
		if res.StatusCode != 400 || p.Title != "Control character" || !strings.Contains(p.Detail, tc.want) {
			t.Errorf("%s: %d %+v, want 400 naming %s", tc.body, res.StatusCode, p, tc.want)
		}
	}
	if n := len(env.upstream.Requests()); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
	pass := []string{
		`{"path":"מסמכים/דוח.txt","file":"تقارير/ملف.pdf"}`,
		`{"path":"می\u200cخواهم.txt"}`,
		`{"path":"👩\u200d💻/notes.md"}`,
		`{"path":"a.txt","content":"x\u202ey\u200b\u007f\u0085\ufe0f\udb40\udc41"}`,
		"{\"path\":\"\u2764\uFE0F/notes.md\"}",                                   // a heart, emoji style
		"{\"path\":\"\U0001F3F3\uFE0F\u200D\U0001F308 flags/\u263A\uFE0E.txt\"}", // a rainbow flag; a smiley, text style
		`{"path":"葛\udb40\udd00城.txt"}`,
		`{"path":"\u1824\u180b\u1837\u1822\u180c.txt"}`, // Mongolian letters with free variation selectors
	}
	for _, body := range pass {
		if res := post(t, env.url+"/tools/read_file", body, "Authorization", "Bearer agent-key"); res.StatusCode != 200 {
			t.Errorf("%s: %d, want 200", body, res.StatusCode)
		}
	}
	got := env.upstream.Requests()
	if len(got) != len(pass) {
		t.Fatalf("the upstream got %d requests, want %d", len(got), len(pass))
	}
	for i, r := range got {
		if string(r.Body) != pass[i] {
			t.Errorf("upstream got %s, want %s", r.Body, pass[i])
		}
	}
}

// TestTargetFoldWindows: with target_fold windows the policy judges the
// target as a Windows tool resolves it.
func TestTargetFoldWindows(t *testing.T) {
	var target string
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		target = in.Tool.Target
		return policy.Decision{Action: policy.Allow}, nil
	})
	env := newTestServer(t, d, func(c *Config) { c.Upstreams[0].TargetFold = "windows" })
	post(t, env.url+"/tools/read_file", `{"path":"Notes/.ENV. "}`, "Authorization", "Bearer agent-key")
	if target != "notes/.env" {
		t.Fatalf("target %q, want notes/.env", target)
	}
}

// TestDecoyTargetArgument: a call that carries a second argument named in
// target_args is judged on both, so a decoy cannot hide the argument the
// tool acts on. A tool that reads "file", called with {"file": secrets,
// "path": docs}, had docs for its target, and a deny row on secrets never
// saw the file it read. Deny rows fire on any target, allow rows need all.
// A value the policy cannot read as a path (an object, a number) counts as
// any target for a deny row.
func TestDecoyTargetArgument(t *testing.T) {
	env := newTestServer(t, seedEngineRules(t, `rules:
  - {id: docs, effect: allow, tool: read_file, target: "docs/**"}
  - {id: secrets, effect: deny, tool: read_file, target: "secrets/**"}
  - {id: notes, effect: ask, tool: read_file, target: "notes/**"}
  - {id: any, effect: allow, tool: list_dir, target: "*"}
  - {id: fetch, effect: allow, tool: fetch, target: "*"}
  - {id: no-x, effect: deny, tool: fetch, target: "https://x.com*"}
`), func(c *Config) { c.MaxBodyBytes = 64 << 10 })
	for _, tc := range []struct {
		body, decision string
		code           int
	}{
		{`{"file":"secrets/k","path":"docs/a.md"}`, "deny", 403},
		{`{"file_path":"secrets/k","path":"docs/a.md"}`, "deny", 403},
		{`{"path":"docs/a.md","FILE":"secrets/k"}`, "deny", 403},
		{`{"path":"docs/a.md","file":"../etc/passwd"}`, "deny", 403},
		{`{"path":"docs/a.md","file":"notes/today.txt"}`, "ask", 503}, // asks; this toolgate has no store to park in
		// No row allows etc/passwd, so the allow for docs does not apply.
		{`{"path":"docs/a.md","file":"etc/passwd"}`, "deny", 403},
		// Arrays: each string is a target. Anything else in a target
		// argument is opaque, so deny and ask rows fire on it and allow
		// rows do not cover it. A null names nothing.
		{`{"path":["secrets/k"],"file":"docs/a.md"}`, "deny", 403},
		{`{"path":{"p":"secrets/k"},"file":"docs/a.md"}`, "deny", 403},
		{`{"path":"docs/a.md","file":["docs/b.md",7]}`, "deny", 403},
		{`{"file":["docs/b.md","docs/c.md"]}`, "allow", 200},
		{`{"path":null,"file":"docs/c.md"}`, "allow", 200},
		// A rooted path is also its relative spelling for deny and ask rows
		// (a tool may join it to its root), never for allow rows.
		{`{"path":"/secrets/k"}`, "deny", 403},
		{`{"path":"//secrets/k"}`, "deny", 403},
		{`{"path":"/docs/a.md"}`, "deny", 403},
		{`{"path":"docs/a.md","file":"docs/b.md"}`, "allow", 200},
	} {
		res := post(t, env.url+"/tools/read_file", tc.body, "Authorization", "Bearer agent-key")
		if res.StatusCode != tc.code || res.Header.Get("X-Toolgate-Decision") != tc.decision {
			t.Errorf("%s: %d %q, want %d %q", tc.body, res.StatusCode, res.Header.Get("X-Toolgate-Decision"), tc.code, tc.decision)
		}
	}
	// A path inside an opaque value that climbs above its root is denied as
	// a plain one is, even where a row allows every target of the tool.
	for _, body := range []string{
		`{"path":[["../etc/passwd"]]}`, `{"file":{"a":"x","p":"../etc/passwd"}}`, `{"path":["../x"]}`,
		`{"path":{"../../etc/passwd":"x"}}`,  // a key: a tool taking {path: content} writes there
		`{"path":"x://../../../etc/passwd"}`, // shaped like a URL, still a path
		`{"path":"/../outside"}`,             // rooted, joined to a root
	} {
		res := post(t, env.url+"/tools/list_dir", body, "Authorization", "Bearer agent-key")
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 403 || !strings.Contains(string(b), "toolgate.target_escapes") {
			t.Errorf("list_dir %s: %d, want 403 toolgate.target_escapes", body, res.StatusCode)
		}
	}
	// A deny row written for a URL as sent still sees it after toolgate puts
	// a "/" before its query.
	if res := post(t, env.url+"/tools/fetch", `{"url":"https://x.com?q=1"}`, "Authorization", "Bearer agent-key"); res.StatusCode != 403 {
		t.Errorf("fetch https://x.com?q=1: %d, want 403", res.StatusCode)
	}
	if res := post(t, env.url+"/tools/list_dir", `{"path":[["docs","a"]]}`, "Authorization", "Bearer agent-key"); res.StatusCode != 200 {
		t.Errorf("list_dir of an opaque path that stays below its root: %d, want 200", res.StatusCode)
	}

	// More targets than a decision reads is refused, not cut: an escaping
	// path past the bound would be one no rule saw.
	many := make([]string, policy.MaxTargets)
	for i := range many {
		many[i] = `"docs/x"`
	}
	body := `{"path":[` + strings.Join(many, ",") + `,"../etc/passwd"]}`
	if res := post(t, env.url+"/tools/read_file", body, "Authorization", "Bearer agent-key"); res.StatusCode != 400 {
		t.Errorf("%d targets: %d, want 400", policy.MaxTargets+1, res.StatusCode)
	}
	body = `{"path":[` + strings.Join(many, ",") + `]}`
	if res := post(t, env.url+"/tools/read_file", body, "Authorization", "Bearer agent-key"); res.StatusCode != 200 {
		t.Errorf("%d targets: %d, want 200", policy.MaxTargets, res.StatusCode)
	}
	if reqs := env.upstream.Requests(); len(reqs) != 5 {
		t.Fatalf("the upstream got %d requests, want only the five allowed", len(reqs))
	}
}

// TestMCPBatchMembersDecided: a batch is allowed only when each member's
// method is allowed alone, and one holding a pseudo-tool is refused whole.
func TestMCPBatchMembersDecided(t *testing.T) {
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		if in.MCP != nil && in.MCP.Method == "admin/wipe" {
			return policy.Decision{Action: policy.Deny, Reasons: []policy.Reason{{Message: "not a protocol method"}}}, nil
		}
		return policy.Decision{Action: policy.Allow}, nil
	})
	env := newTestServer(t, d, func(c *Config) { c.Upstreams[0].Protocol = "mcp" })
	for _, tc := range []struct {
		body string
		want int
	}{
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"admin/wipe"}]`, 403},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}]`, 400},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`, 200},
	} {
		res := post(t, env.url+"/mcp", tc.body, "Authorization", "Bearer agent-key", "Accept", "application/json, text/event-stream")
		if res.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.body, res.StatusCode, tc.want)
		}
	}
	if n := len(env.upstream.Requests()); n != 1 {
		t.Fatalf("the upstream got %d requests, want only the allowed batch", n)
	}
}

// TestParkedCap: past its principal's cap a new ask is 429 with
// Retry-After, and nothing is parked or forwarded; an identical retry
// still attaches.
func TestParkedCap(t *testing.T) {
	store := pending.NewMemory(pending.Options{MaxParkedPerPrincipal: 2, MaxParked: 100})
	pe := newParkEnv(t, func(c *Config) { c.Pending = store })
	pe.store = store
	for i := range 3 {
		res := post(t, pe.url+"/tools/Write", fmt.Sprintf(`{"path":"a%d"}`, i), "Prefer", "respond-async")
		want := http.StatusAccepted
		if i == 2 {
			want = http.StatusTooManyRequests
		}
		if res.StatusCode != want {
			t.Fatalf("ask %d: %d, want %d", i, res.StatusCode, want)
		}
		if i == 2 {
			p := readProblem(t, res)
			if res.Header.Get("Retry-After") == "" || p.Decision != outcomeAsk || p.Type != "urn:toolgate:problem:too-many-parked" {
				t.Fatalf("429 answer: Retry-After %q, %+v", res.Header.Get("Retry-After"), p)
			}
		}
	}
	onlyTwoParked(t, pe, store)
}

// TestParkRate: past its principal's rate of parks a new ask is 429 with
// the Retry-After the store gave, rounded up to whole seconds; nothing is
// parked or forwarded, and an identical retry still attaches.
func TestParkRate(t *testing.T) {
	store := pending.NewMemory(pending.Options{ParkEvery: 20 * time.Second, ParkBurst: 2})
	pe := newParkEnv(t, func(c *Config) { c.Pending = store })
	pe.store = store
	for i := range 3 {
		res := post(t, pe.url+"/tools/Write", fmt.Sprintf(`{"path":"a%d"}`, i), "Prefer", "respond-async")
		if i < 2 {
			if res.StatusCode != http.StatusAccepted {
				t.Fatalf("ask %d: %d, want 202", i, res.StatusCode)
			}
			continue
		}
		p := readProblem(t, res)
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "20" ||
			p.Decision != outcomeAsk || p.Type != "urn:toolgate:problem:too-many-parked" || !strings.Contains(p.Detail, "too often") {
			t.Fatalf("ask past the rate: %d, Retry-After %q, %+v; want 429, 20 and the rate's detail", res.StatusCode, res.Header.Get("Retry-After"), p)
		}
	}
	onlyTwoParked(t, pe, store)
}

// onlyTwoParked checks, after a refused ask, that a retry of the first
// call still attaches, that two calls wait, and that nothing was forwarded.
func onlyTwoParked(t *testing.T, pe *parkEnv, store pending.Store) {
	t.Helper()
	if res := post(t, pe.url+"/tools/Write", `{"path":"a0"}`, "Prefer", "respond-async"); res.StatusCode != http.StatusAccepted {
		t.Fatalf("a retry of a parked call: %d, want 202 (it attaches)", res.StatusCode)
	}
	if n, _ := store.Count(context.Background(), pending.Waiting); n != 2 {
		t.Fatalf("%d calls waiting, want 2", n)
	}
	if n := len(pe.upstream.Requests()); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
}

// TestRecheckSeesTheArguments: the re-check of an approved call decides
// on its arguments as parked (kept once, in the display document), so a
// policy that has come to deny those arguments stops it.
func TestRecheckSeesTheArguments(t *testing.T) {
	var denySecret atomic.Bool
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		if denySecret.Load() && in.Tool != nil && in.Tool.Arguments["path"] == "secret" && in.Tool.Target == "secret" {
			return policy.Decision{Action: policy.Deny, Reasons: []policy.Reason{{Message: "secret"}}}, nil
		}
		return policy.Decision{Action: policy.Ask, Reasons: []policy.Reason{{Message: "ask"}}}, nil
	})
	pe := newParkEnv(t, func(c *Config) { c.Decider = d })
	for _, path := range []string{"secret", "plain"} {
		res := post(t, pe.url+"/tools/Write", `{"path":"`+path+`","n":12.50}`, "Prefer", "respond-async")
		id := res.Header.Get(headerCallID)
		pc := pe.nextParked(t)
		if !strings.Contains(string(callinfoOf(pc).PolicyInput), `"arguments":{}`) {
			t.Errorf("the parked input holds the arguments a second time: %s", callinfoOf(pc).PolicyInput)
		}
		denySecret.Store(true)
		if _, err := pe.store.Decide(context.Background(), id, pending.Decision{To: pending.Approved, By: "alice", Comment: ""}); err != nil {
			t.Fatal(err)
		}
		pe.server.life.SweepOnce(context.Background(), 0)
		got, _ := pe.store.Get(context.Background(), id)
		want := pending.Executed
		if path == "secret" {
			want = pending.Failed
		}
		if got.State != want {
			t.Errorf("%s: %s after the re-check, want %s", path, got.State, want)
		}
		denySecret.Store(false)
	}
	if ups := pe.upstream.Requests(); len(ups) != 1 || string(ups[0].Body) != `{"path":"plain","n":12.50}` {
		t.Fatalf("the upstream got %d requests (%v), want the plain one, byte for byte", len(ups), ups)
	}
}

func callinfoOf(pc pending.Call) callinfo.Info { return callinfo.Decode(pc.Info) }

// TestMCPBatchNeverParked: a batch the policy asks about, or whose member
// it asks about, is refused, never parked to run later undecided member
// by member; a tools/list in a batch (unfiltered) and an oversized batch
// are refused before any decision.
func TestMCPBatchNeverParked(t *testing.T) {
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		if in.MCP != nil && (in.MCP.Method == "logging/setLevel" || in.MCP.Method == "" && in.HTTP.Headers["x-ask-batch"] != nil) {
			return policy.Decision{Action: policy.Ask, Reasons: []policy.Reason{{Message: "ask"}}}, nil
		}
		return policy.Decision{Action: policy.Allow}, nil
	})
	store := pending.NewMemory(pending.Options{})
	env := newTestServer(t, d, func(c *Config) {
		c.Upstreams[0].Protocol = "mcp"
		c.Pending, c.Hold, c.MaxBodyBytes = store, time.Millisecond, 1<<20
	})
	big := make([]string, maxBatch+1)
	for i := range big {
		big[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
	}
	for _, tc := range []struct {
		body string
		want int
		hdr  []string
	}{
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}]`, 403, nil},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 403, []string{"X-Ask-Batch", "1"}},
		{`[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, 400, nil},
		{"[" + strings.Join(big, ",") + "]", 400, nil},
	} {
		res := post(t, env.url+"/mcp", tc.body, append([]string{"Authorization", "Bearer agent-key"}, tc.hdr...)...)
		if res.StatusCode != tc.want {
			t.Errorf("%.60s: %d, want %d", tc.body, res.StatusCode, tc.want)
		}
	}
	if n, _ := store.Count(context.Background(), pending.Waiting); n != 0 {
		t.Errorf("%d batches parked", n)
	}
	if n := len(env.upstream.Requests()); n != 0 {
		t.Fatalf("the upstream got %d requests", n)
	}
}

// TestForwardedHostIsToolgates: X-Forwarded-Host names toolgate as agents
// reach it (proxy_public_url), or is left out; never the Host the agent
// sent, which the policy does not see and an upstream may route by.
func TestForwardedHostIsToolgates(t *testing.T) {
	for _, tc := range []struct{ public, want string }{
		{"", ""},
		{"https://gw.example.com/tg", "gw.example.com"},
	} {
		env := newTestServer(t, allowAll, func(c *Config) { c.ProxyPublicURL = tc.public })
		req, _ := http.NewRequest(http.MethodPost, env.url+"/tools/read_file", strings.NewReader(`{"path":"a"}`))
		req.Host = "tenant-b.internal"
		req.Header.Set("Authorization", "Bearer agent-key")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		got := env.upstream.Requests()
		h := got[len(got)-1].Header
		if v, ok := h["X-Forwarded-Host"]; tc.want == "" && ok || tc.want != "" && (len(v) != 1 || v[0] != tc.want) {
			t.Errorf("proxy_public_url %q: upstream got X-Forwarded-Host %q, want %q", tc.public, v, tc.want)
		}
		if h.Get("X-Forwarded-For") == "" || h.Get("X-Forwarded-Proto") != "http" {
			t.Errorf("X-Forwarded-For and -Proto are toolgate's still: %v", h)
		}
	}
}

// TestApprovedCallForwardedAsAllowed: an approved call reaches the
// upstream with the X-Forwarded-* headers an allowed call would have had
// (the agent's address, toolgate's public host), written when it was
// parked; none of the agent's own.
func TestApprovedCallForwardedAsAllowed(t *testing.T) {
	pe := newParkEnv(t, func(c *Config) { c.ProxyPublicURL = "https://gw.example.com/tg" })
	req, _ := http.NewRequest(http.MethodPost, pe.url+"/tools/Write", strings.NewReader(`{"path":"a"}`))
	req.Host = "tenant-b.internal"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", "10.9.9.9")
	req.Header.Set("X-Forwarded-Host", "evil.example")
	h := pe.approvedAsSent(t, req).Header
	if v := h.Values("X-Forwarded-For"); len(v) != 1 || v[0] != "127.0.0.1" {
		t.Errorf("X-Forwarded-For %q, want the agent's address alone", v)
	}
	if h.Get("X-Forwarded-Host") != "gw.example.com" || h.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("X-Forwarded-Host %q, -Proto %q", h.Get("X-Forwarded-Host"), h.Get("X-Forwarded-Proto"))
	}
}

// TestRawHashInQuery: a raw '#' in a request's query (which Go's server
// keeps, and a Go client sends when told to) is refused: most other stacks
// read it as the start of a fragment and would act on the names before it
// alone, while the policy judged them all.
func TestRawHashInQuery(t *testing.T) {
	env := newTestServer(t, allowAll)
	req, _ := http.NewRequest(http.MethodGet, env.url+"/files", nil)
	req.URL.RawQuery = "x=#&dry_run=true"
	req.Header.Set("Authorization", "Bearer agent-key")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 || len(env.upstream.Requests()) != 0 {
		t.Fatalf("status %d, upstream got %d requests", res.StatusCode, len(env.upstream.Requests()))
	}
}

// TestApprovedCallSentAsStored: an approved call's request line is the
// one the agent sent, escapes and query as they came: nothing of it is
// parsed again as text on the way out.
func TestApprovedCallSentAsStored(t *testing.T) {
	pe := newParkEnv(t)
	req, _ := http.NewRequest(http.MethodPut, pe.url+"/files/My%20Notes%3F.txt?x=%23&only=staging&note=a+b%26c", strings.NewReader(`x`))
	g := pe.approvedAsSent(t, req)
	if g.Method != http.MethodPut || g.Path != "/files/My Notes?.txt" || g.Query != "x=%23&only=staging&note=a+b%26c" {
		t.Errorf("upstream got %s %q (raw %q) ?%q", g.Method, g.Path, g.RawPath, g.Query)
	}
}

// approvedAsSent sends req as the agent, approves the call it parks, and
// returns what the upstream then received, once.
func (pe *parkEnv) approvedAsSent(t *testing.T, req *http.Request) testkit.Request {
	t.Helper()
	go func() {
		pc := pe.nextParked(t)
		if _, err := pe.store.Decide(context.Background(), pc.ID, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
			t.Error(err)
		}
	}()
	req.Header.Set("Authorization", "Bearer agent-key")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get(headerDecision) != "approved" {
		t.Fatalf("status %d decision %q", res.StatusCode, res.Header.Get(headerDecision))
	}
	got := pe.upstream.Requests()
	if len(got) != 1 {
		t.Fatalf("upstream got %d requests", len(got))
	}
	return got[0]
}

// TestCredentialsNeverInThePolicyInput: credential headers are forwarded
// to the upstream (the agent's Authorization aside) but never put in the
// policy input, which a parked call keeps, approvers see and the decision
// log writes.
func TestCredentialsNeverInThePolicyInput(t *testing.T) {
	secrets := []string{
		"Cookie", "X-Api-Key", "X-Auth-Token", "Private-Token", "X-Goog-Api-Key", "Api-Key",
		"X-Amz-Security-Token", "Ocp-Apim-Subscription-Key", "X-Client-Secret", "X-Password", "X-Credentials",
	}
	var seen *policy.Input
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		seen = in
		return policy.Decision{Action: policy.Allow}, nil
	})
	env := newTestServer(t, d)
	hdr := []string{"Authorization", "Bearer agent-key", "X-Trace-Note", "kept"}
	for _, k := range secrets {
		hdr = append(hdr, k, "SECRET-"+k)
	}
	if res := post(t, env.url+"/tools/read_file", `{"path":"a"}`, hdr...); res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if _, ok := seen.HTTP.Headers["authorization"]; ok {
		t.Errorf("toolgate's own credential is in the policy input")
	}
	if got := seen.HTTP.Headers["x-trace-note"]; len(got) != 1 || got[0] != "kept" {
		t.Errorf("an ordinary header is missing from the input: %v", seen.HTTP.Headers)
	}
	got := env.upstream.Requests()
	h := got[len(got)-1].Header
	for _, k := range secrets {
		// The name stays, so that a policy can deny a header named like a
		// credential (TestHiddenHeaderNamedForThePolicy); the value never.
		if v := seen.HTTP.Headers[strings.ToLower(k)]; len(v) != 1 || v[0] != policy.Hidden {
			t.Errorf("%s in the policy input: %q, want its name with %q", k, v, policy.Hidden)
		}
		if h.Get(k) != "SECRET-"+k {
			t.Errorf("%s did not reach the upstream", k)
		}
	}
}

// TestHiddenHeaderNamedForThePolicy: a header an agent names like a
// credential is hidden from approvers and the log, yet still forwarded;
// the policy sees its name, so a rule can deny it, with the real engine.
func TestHiddenHeaderNamedForThePolicy(t *testing.T) {
	engine := regoEngine(t, "rules: []\n", `deny contains "no override headers" if {
	some name, _ in input.http.headers
	contains(name, "override")
}
allow contains "ok" if input.tool.name == "read_file"`)
	env := newTestServer(t, engine)
	for hdr, want := range map[string]int{"X-Note": 200, "X-Override": 403, "X-Override-Key": 403, "X-Override-Token": 403} {
		before := len(env.upstream.Requests())
		res := post(t, env.url+"/tools/read_file", `{"path":"a"}`, "Authorization", "Bearer agent-key", hdr, "delete-all")
		if res.StatusCode != want {
			t.Errorf("%s: status %d, want %d", hdr, res.StatusCode, want)
		}
		if reached := len(env.upstream.Requests()) > before; reached != (want == 200) {
			t.Errorf("%s: reached the upstream %v", hdr, reached)
		}
	}
}

// TestSecretHeader: the names that mark a credential, whichever vendor
// spelled them, and those that look alike but that toolgate, policies
// and approvers need to see.
func TestSecretHeader(t *testing.T) {
	for name, hidden := range map[string]bool{
		// credentials
		"Authorization": true, "Proxy-Authorization": true, "X-Authorization": true, "Authentication": true,
		"Cookie": true, "X-Api-Key": true, "X-Auth-Token": true, "X-Auth-Key": true, "X-Functions-Key": true,
		"DD-Application-Key": true, "DD-API-Key": true, "X-Sentry-Auth": true, "X-Jwt-Assertion": true,
		"X-Session-Id": true, "X-Access-Key": true, "X-Private-Key": true, "Private-Token": true,
		"X-Goog-Api-Key": true, "Api-Key": true, "Apikey": true, "X-Amz-Security-Token": true,
		"Ocp-Apim-Subscription-Key": true, "X-Client-Secret": true, "X-Password": true, "X-Credentials": true,
		"X-Hub-Signature-256": true, "X-Csrf-Token": true, "X-Secret-Keys": true,
		"CB-Access-Passphrase": true, "OK-Access-Passphrase": true, "KC-API-Passphrase": true, "Access-Passphrase": true,
		"X-Vercel-Protection-Bypass": true, "X-Hmac": true,
		// not secrets
		"Idempotency-Key": false, "X-Idempotency-Key": false, "Mcp-Session-Id": false, "Mcp-Protocol-Version": false,
		"Mcp-Method": false, "Mcp-Name": false, "Content-Type": false, "Content-Length": false,
		"Content-Encoding": false, "Content-Digest": false, "Accept": false, "Accept-Encoding": false,
		"Accept-Language": false, "Keep-Alive": false, "User-Agent": false, "Traceparent": false,
		"X-Toolgate-Mode": false, "X-Target-Override": false, "Prefer": false, "Last-Event-Id": false,
	} {
		if got := secretHeader(strings.ToLower(name)); got != hidden {
			t.Errorf("secretHeader(%q) = %v, want %v", name, got, hidden)
		}
		if got := hiddenHeader(name); got != hidden {
			t.Errorf("hiddenHeader(%q) = %v, want %v", name, got, hidden)
		}
	}
}

// TestCommonHeadersAsComputed: the names policyHeaders takes from its table
// come out as those it works out: the same lower-cased name, the same
// credential verdict (Cookie and Authorization among them).
func TestCommonHeadersAsComputed(t *testing.T) {
	h := http.Header{"X-Custom-Thing": {"a"}, "X-Api-Key": {"k"}}
	for k := range commonHeaders {
		h[k] = []string{"v-" + k}
	}
	got := policyHeaders(h)
	if len(got) != len(h)-1 { // Authorization is left out
		t.Fatalf("policyHeaders kept %d of %d headers: %v", len(got), len(h), got)
	}
	for k, vs := range h {
		lk := strings.ToLower(k)
		switch {
		case lk == "authorization":
			if _, ok := got[lk]; ok {
				t.Errorf("Authorization reached the input")
			}
		case secretHeader(lk):
			if !slices.Equal(got[lk], []string{policy.Hidden}) {
				t.Errorf("%s: input has %q, want it hidden", k, got[lk])
			}
		case !slices.Equal(got[lk], vs):
			t.Errorf("%s: input has %q, want %q", k, got[lk], vs)
		}
	}
	if _, ok := commonHeaders["Cookie"]; !ok || !commonHeaders["Cookie"].secret || !commonHeaders["Authorization"].secret {
		t.Errorf("the table does not hold Cookie and Authorization as credentials: %v", commonHeaders)
	}
}

// TestAmbiguousTargets: a file-path target that a tool may read as other
// path syntax than the policy does is refused before any decision, and
// the upstream never sees it: a percent-escape of "." "/" or "\" on every
// upstream (a tool that decodes its path opens secrets/key for
// "notes/%2e%2e/secrets/key"), and with target_fold windows a look-alike
// a best-fit conversion makes path syntax (the WorstFit attacks). Other
// percent-escapes are decided in both spellings: "%73ecrets/key" is
// denied by the row for secrets/**.
func TestAmbiguousTargets(t *testing.T) {
	rules := `rules:
  - {id: any, effect: allow, tool: read_file, target: "*"}
  - {id: secrets, effect: deny, tool: read_file, target: "secrets/**"}
`
	for _, tc := range []struct {
		name, fold, body string
		code             int
		want             string
	}{
		{"encoded dots", "", `{"path":"notes/%2e%2e/secrets/key"}`, 400, `holds \"%2e\", a percent-encoded \".\"`},
		{"encoded twice", "", `{"path":"notes/%252E%252E/secrets/key"}`, 400, `holds \"%252E\"`},
		{"encoded slash", "", `{"file_path":"..%2fsecrets"}`, 400, `holds \"%2f\", a percent-encoded \"/\"`},
		{"decoded spelling denied", "", `{"path":"%73ecrets/key"}`, 403, ""},
		{"%u spelling denied", "", `{"path":"%u0073ecrets/key"}`, 403, ""},
		// A lone surrogate decodes to no character: an opaque target,
		// which deny rows match.
		{"%u lone surrogate", "", `{"path":"docs/%uD800.txt"}`, 403, ""},
		{"%u escape of a dot", "", `{"path":"notes/%u002e%u002e/secrets/key"}`, 400, `holds \"%u002e\"`},
		{"harmless escape", "", `{"path":"docs/My%20Report.pdf"}`, 200, ""},
		{"fullwidth without fold", "", `{"path":"notes\uff0e\uff0e\uff3csecrets"}`, 200, ""},
		{"fullwidth dots, windows", "windows", `{"path":"notes\uff0e\uff0e\uff3csecrets\uff3ckey"}`, 400, `holds U+FF0E, which a Windows tool may read as \".\"`},
		{"yen, windows", "windows", `{"path":"..\u00a5secrets"}`, 400, `holds U+00A5`},
		{"CJK name, windows", "windows", `{"path":"資料/第１回　議事録.docx"}`, 200, ""},
		// Fullwidth letters are ASCII to a tool that converts to an ANSI
		// code page: secrets/key.
		{"fullwidth letters, windows", "windows", `{"path":"ｓｅｃｒｅｔｓ/key"}`, 403, ""},
		{"fullwidth letters, no folding", "", `{"path":"ｓｅｃｒｅｔｓ/key"}`, 200, ""},
		// A path argument's value that parses as a URL is also read as a
		// path: a tool that joins it to its root opens secrets/key.
		{"URL-shaped path", "", `{"path":"a://b/../../secrets/key"}`, 403, ""},
		{"URL-shaped path, backslashes", "", `{"path":"x://y/..\\..\\secrets\\key"}`, 403, ""},
		{"URL-shaped path, encoded dots", "", `{"path":"a://b/%2e%2e/%2e%2e/secrets/key"}`, 400, `holds \"%2e\"`},
		// Each value's decoded spelling is a target of its own, and does
		// not count against the 256 values a call may name.
		{"256 values with an escape", "", `{"path":[` + strings.TrimSuffix(strings.Repeat(`"docs/My%20Report.pdf",`, 256), ",") + `]}`, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestServer(t, seedEngineRules(t, rules), func(c *Config) { c.Upstreams[0].TargetFold, c.MaxBodyBytes = tc.fold, 64<<10 })
			res := post(t, env.url+"/tools/read_file", tc.body, "Authorization", "Bearer agent-key")
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.code || !strings.Contains(string(b), tc.want) {
				t.Fatalf("%d %s, want %d naming %s", res.StatusCode, b, tc.code, tc.want)
			}
			if n, want := len(env.upstream.Requests()), map[bool]int{true: 1, false: 0}[tc.code == 200]; n != want {
				t.Fatalf("the upstream received %d requests, want %d", n, want)
			}
		})
	}
}

// TestBodyBudget: bodies being read at once take at most
// MaxBodyBytesTotal; one that would pass it is 503 at once, reaches
// nothing, and the budget comes back as the others end.
func TestBodyBudget(t *testing.T) {
	env := newTestServer(t, allowAll, func(c *Config) {
		c.MaxBodyBytes, c.MaxBodyBytesTotal = 1000, 2000
		c.BodyTimeout = 2 * time.Second
	})
	addr := strings.TrimPrefix(env.url, "http://")
	// Two bodies announced at 1000 bytes each, stalled after one byte:
	// together they hold the whole budget.
	stalled := make([]net.Conn, 2)
	for i := range stalled {
		stalled[i] = stallBody(t, addr)
	}
	small := `{"path":"README.md"}`
	deadline := time.Now().Add(time.Second)
	var res *http.Response
	for { // until both stalled bodies are being read
		res = post(t, env.url+"/tools/read_file", small, "Authorization", "Bearer agent-key")
		if res.StatusCode == http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a body past the budget: %d (Retry-After %q), want 503", res.StatusCode, res.Header.Get("Retry-After"))
	}
	before := len(env.upstream.Requests())
	// The stalled bodies end (408 within the body timeout): the budget
	// is back.
	for _, c := range stalled {
		c.Close()
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		res = post(t, env.url+"/tools/read_file", small, "Authorization", "Bearer agent-key")
		if res.StatusCode == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("once the stalled bodies ended: %d, want 200", res.StatusCode)
	}
	if got := len(env.upstream.Requests()); got != before+1 {
		t.Errorf("the upstream got %d calls after the refusal, want 1", got-before)
	}
}

// TestRefusedHeaderNotLoggedWhole: a tool call's Content-Type or
// Content-Encoding that toolgate refuses is named in the log by its
// length, as a refused argument is (policy.LogSafe): it may hold
// anything, up to the 64 KiB header limit. The agent is still told it.
func TestRefusedHeaderNotLoggedWhole(t *testing.T) {
	const marker = "SECRET-in-refused-header"
	big := "text/plain; x=" + marker + strings.Repeat("A", 32<<10)
	out := &testkit.Buffer{}
	env := newTestServer(t, seedEngine(t), func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(out, nil)) })
	for _, h := range [][]string{{"Content-Type", "", "Content-Type", big}, {"Content-Encoding", big}} {
		res := post(t, env.url+"/tools/Read", `{"path":"notes/a.txt"}`, append([]string{"Authorization", "Bearer agent-key"}, h...)...)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 415 || !strings.Contains(string(body), marker) {
			t.Errorf("%s: %d, want 415 naming what was sent", h[0], res.StatusCode)
		}
	}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if strings.Contains(line, marker) {
			t.Errorf("a refused header is written whole into the log (%d bytes): %.200s…", len(line), line)
		}
	}
}

// stallBody opens a connection to addr that sends a tool call as
// agent-42 announcing a body of 1000 bytes and stalls after its first; it
// is closed when the test ends.
func stallBody(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST /tools/read_file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer agent-key\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBodyBudgetShare: one principal's stalled bodies hold at most its
// share of the budget (a quarter), so another principal's calls still
// get through while they stall.
func TestBodyBudgetShare(t *testing.T) {
	env := newTestServer(t, allowAll, func(c *Config) {
		c.MaxBodyBytes, c.MaxBodyBytesTotal = 1000, 8000
		c.BodyTimeout = 3 * time.Second
	})
	addr := strings.TrimPrefix(env.url, "http://")
	for range 8 { // far more than agent-42's share of 2000
		stallBody(t, addr)
	}
	small := `{"path":"README.md"}`
	deadline := time.Now().Add(2 * time.Second)
	for { // until agent-42's stalled bodies hold its share
		res := post(t, env.url+"/tools/read_file", small, "Authorization", "Bearer agent-key")
		if res.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent-42 past its share: %d, want 503", res.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 5 { // another principal (anonymous) is not shut out
		if res := post(t, env.url+"/tools/read_file", small); res.StatusCode != http.StatusOK {
			t.Fatalf("another principal while agent-42 stalls its bodies: %d, want 200", res.StatusCode)
		}
	}
}

// TestBodyTooComplex: what deciding a body costs counts against the
// budget, not only its bytes: a body of many tiny JSON values is 413
// once its cost passes a principal's share, while a body of the same
// size holding one long string passes.
func TestBodyTooComplex(t *testing.T) {
	env := newTestServer(t, allowAll, func(c *Config) {
		c.MaxBodyBytes, c.MaxBodyBytesTotal = 64<<10, 4<<20 // a share of 1 MiB
	})
	values := `{"path":"a","list":[` + strings.Repeat(`1,`, 30<<10) + `1]}`
	text := `{"path":"a","text":"` + strings.Repeat(`1,`, 30<<10) + `"}`
	if res := post(t, env.url+"/tools/read_file", values, "Authorization", "Bearer agent-key"); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d KiB of tiny values: %d, want 413", len(values)>>10, res.StatusCode)
	}
	if res := post(t, env.url+"/tools/read_file", text, "Authorization", "Bearer agent-key"); res.StatusCode != http.StatusOK {
		t.Fatalf("%d KiB of one string with commas: %d, want 200", len(text)>>10, res.StatusCode)
	}
	// Gzip: the cost is the decoded body's, not the few bytes sent.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(values))
	_ = zw.Close()
	if res := post(t, env.url+"/tools/read_file", gz.String(), "Authorization", "Bearer agent-key", "Content-Encoding", "gzip"); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d bytes of gzip decoding to %d KiB of tiny values: %d, want 413", gz.Len(), len(values)>>10, res.StatusCode)
	}
	if n := len(env.upstream.Requests()); n != 1 {
		t.Fatalf("the upstream got %d calls, want the string's alone", n)
	}
}

func TestBodyCost(t *testing.T) {
	for body, tokens := range map[string]int64{
		`{}`: 1, `{"a":1}`: 2, `{"a":[1,2,3]}`: 5, `{"a":"x,y:{[z"}`: 2, `{"a":"q\"{,"}`: 2, `{"a":"\\","b":[]}`: 5,
	} {
		if got := bodyCost([]byte(body)); got != int64(len(body))+tokens*valueCost {
			t.Errorf("bodyCost(%s) = %d, want %d bytes and %d tokens", body, got, len(body), tokens)
		}
	}
}

// TestBodyBudgetGivenBack: whatever becomes of a call (allowed, denied,
// refused before or after its body is read, a body too large or not
// JSON), what it held of the body budget is given back.
func TestBodyBudgetGivenBack(t *testing.T) {
	env := newTestServer(t, seedEngine(t))
	for _, c := range []struct{ path, body string }{
		{"/tools/Read", `{"path":"notes/a.txt"}`},       // allowed
		{"/tools/Read", `{"path":"secrets.txt"}`},       // denied
		{"/tools/Read", `{"path":`},                     // not JSON
		{"/tools/Read", strings.Repeat("x", 4096)},      // too large
		{"/tools/Write", `{"path":"notes/a.txt"}`},      // asks
		{"/anything", `plain`},                          // plain HTTP
		{"/tools/Read", `{"path":"a","n":[1,2,3,4,5]}`}, // allowed, with values
	} {
		res := post(t, env.url+c.path, c.body, "Authorization", "Bearer agent-key", "Prefer", "respond-async")
		res.Body.Close()
	}
	res := post(t, env.url+"/tools/Read", `{"path":"a"}`, "Authorization", "Bearer wrong-key")
	res.Body.Close()
	env.server.bodies.mu.Lock()
	defer env.server.bodies.mu.Unlock()
	if env.server.bodies.used != 0 || len(env.server.bodies.by) != 0 {
		t.Fatalf("after the calls ended, the body budget holds %d bytes (%v)", env.server.bodies.used, env.server.bodies.by)
	}
}

// TestBodyBudgetHeldWhileForwarded: an allowed call holds its share of the
// body budget until its upstream answers, since its body and parsed input
// live as long: with a slow upstream, a caller's second costly call is
// 503 while the first is forwarded, and goes through once it is answered.
func TestBodyBudgetHeldWhileForwarded(t *testing.T) {
	var reached atomic.Int32
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		reached.Add(1)
		<-release
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	env, unblock := budgetEnv(t, up, release)
	body := `{"path":"a","n":[` + strings.Repeat(`1,`, 4000) + `1]}` // costs ~650 KB
	first := make(chan int, 1)
	go func() {
		res := post(t, env.url+"/tools/read_file", body, "Authorization", "Bearer agent-key")
		res.Body.Close()
		first <- res.StatusCode
	}()
	testkit.WaitFor(t, "the first call at the upstream", func() bool { return reached.Load() == 1 })
	env.server.bodies.mu.Lock()
	held := env.server.bodies.used
	env.server.bodies.mu.Unlock()
	if held < int64(len(body)) {
		t.Errorf("while the call is forwarded the body budget holds %d bytes, want at least its %d", held, len(body))
	}
	res := post(t, env.url+"/tools/read_file", body, "Authorization", "Bearer agent-key")
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || reached.Load() != 1 {
		t.Fatalf("a second costly call while the first is forwarded: %d, reached the upstream %d times; want 503 and once", res.StatusCode, reached.Load())
	}
	unblock()
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the first call: %d", code)
	}
	res = post(t, env.url+"/tools/read_file", body, "Authorization", "Bearer agent-key")
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the second call once the first was answered: %d", res.StatusCode)
	}
	env.server.bodies.mu.Lock()
	defer env.server.bodies.mu.Unlock()
	if env.server.bodies.used != 0 {
		t.Errorf("after the calls ended, the body budget holds %d bytes", env.server.bodies.used)
	}
}

// TestBodyBudgetWhileAnswerStreams: once the upstream answers, a
// forwarded call's parsed input is dropped and it holds only its body's
// bytes of the budget while the answer streams, however long: the same
// caller's next costly call goes through meanwhile.
func TestBodyBudgetWhileAnswerStreams(t *testing.T) {
	release := make(chan struct{})
	var streaming atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if streaming.Add(1) > 1 {
			_, _ = io.WriteString(w, `{"ok":true}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {}\n\n")
		http.NewResponseController(w).Flush()
		<-release // the answer goes on streaming
	}))
	env, unblock := budgetEnv(t, up, release)
	body := `{"path":"a","n":[` + strings.Repeat(`1,`, 4000) + `1]}` // costs ~650 KB
	req, _ := http.NewRequest(http.MethodPost, env.url+"/tools/read_file", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer agent-key")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req) // returns with the headers; the body streams on
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	env.server.bodies.mu.Lock()
	held := env.server.bodies.used
	env.server.bodies.mu.Unlock()
	if held != int64(len(body)) {
		t.Errorf("while the answer streams the body budget holds %d bytes, want the body's %d", held, len(body))
	}
	second := post(t, env.url+"/tools/read_file", body, "Authorization", "Bearer agent-key")
	second.Body.Close()
	if second.StatusCode != http.StatusOK {
		t.Errorf("a second costly call while the first's answer streams: %d, want 200", second.StatusCode)
	}
	unblock()
	_, _ = io.Copy(io.Discard, res.Body)
}

// budgetEnv is a toolgate in front of up with a body budget that gives
// one caller a share of 1 MiB; unblock closes release, once.
func budgetEnv(t *testing.T, up *httptest.Server, release chan struct{}) (env *testEnv, unblock func()) {
	t.Helper()
	var once sync.Once
	unblock = func() { once.Do(func() { close(release) }) }
	t.Cleanup(up.Close)
	t.Cleanup(unblock)
	upURL, _ := url.Parse(up.URL)
	env = newTestServer(t, allowAll, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "files", URL: upURL, Prefix: "/", Timeout: 30 * time.Second}}
		c.MaxBodyBytes, c.MaxBodyBytesTotal = 64<<10, 4<<20 // a share of 1 MiB
	})
	return env, unblock
}

// TestRefusedLineBounded: a refused request is logged whoever sent it; its
// path (up to the header limit) is cut in the line, which says how long it
// was.
func TestRefusedLineBounded(t *testing.T) {
	var logs bytes.Buffer
	env := newTestServer(t, seedEngine(t), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	path := "/" + strings.Repeat("p", 60<<10)
	res := post(t, env.url+path, `{}`, "Authorization", "Bearer not-a-key") // 401
	res.Body.Close()
	line := logs.String()
	if !strings.Contains(line, "request refused") {
		t.Fatalf("no refusal logged: %.300s", line)
	}
	if len(line) > 4096 || !strings.Contains(line, "(61441 bytes)") {
		t.Errorf("the refusal's line is %d bytes, or does not say how long the path was: %.600s", len(line), line)
	}
}
