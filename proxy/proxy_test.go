package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

var (
	_ Decider       = (*policy.Engine)(nil)
	_ Authenticator = (*identity.Authenticator)(nil)
)

// deciderFunc is a Decider from a function.
type deciderFunc func(context.Context, *policy.Input) (policy.Decision, error)

func (f deciderFunc) Decide(ctx context.Context, in *policy.Input) (policy.Decision, error) {
	return f(ctx, in)
}

// upstreamAnswer is how the recording upstream of the tests answers: a
// fixed JSON body naming the path, and a decision header of its own that
// must not reach the agent (the canary).
func upstreamAnswer(_ int, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Toolgate-Decision", "allow-from-upstream") // must not reach the agent
	_, _ = io.WriteString(w, `{"ok":true,"path":"`+r.URL.Path+`"}`)
}

// newRecorder starts a recording upstream that answers with upstreamAnswer.
func newRecorder(t testing.TB) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, upstreamAnswer)
}

type testEnv struct {
	url      string // toolgate's proxy URL
	upstream *testkit.Upstream
	upURL    *url.URL
	server   *Server
}

// testSealSecret stands for the approvals secret of the test servers.
const testSealSecret = "approvals-secret-of-the-tests-0123456789"

// newTestServer starts a recording upstream and a toolgate in front of it,
// with the given Decider and the given prefix for the upstream.
func newTestServer(t testing.TB, d Decider, mutate ...func(*Config)) *testEnv {
	t.Helper()
	rec := newRecorder(t)
	u, _ := url.Parse(rec.URL)
	auth, err := identity.New(identity.Config{
		APIKeys:   []identity.APIKey{{Key: "agent-key", Subject: "agent-42", Groups: []string{"agents"}}},
		Anonymous: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Upstreams:    []Upstream{{Name: "files", URL: u, Prefix: "/", Timeout: 2 * time.Second}},
		Decider:      d,
		Auth:         auth,
		MaxBodyBytes: 1024,
		// As every replica of one deployment: one approvals secret.
		SealKeys: [][]byte{SealKey([]byte(testSealSecret))},
	}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &testEnv{url: ts.URL, upstream: rec, upURL: u, server: s}
}

// seedEngine is the real policy engine with the seed rules table.
func seedEngine(t testing.TB) *policy.Engine {
	t.Helper()
	return seedEngineRules(t, `rules:
  - {id: r1, effect: allow, tool: Read, target: "*"}
  - {id: r2, effect: deny, tool: Read, target: secrets.txt}
  - {id: r3, effect: ask, tool: Write, target: "*"}
  - {id: r4, effect: allow, tool: Edit, target: notes.txt}
`)
}

// seedEngineRules is the real policy engine with the given rules table.
func seedEngineRules(t testing.TB, rules string) *policy.Engine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, RulesFile: path})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func post(t *testing.T, url, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Add(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func readProblem(t *testing.T, res *http.Response) problem {
	t.Helper()
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.CallID == "" || p.CallID != res.Header.Get(headerCallID) {
		t.Errorf("call_id %q, header %q: want equal and set", p.CallID, res.Header.Get(headerCallID))
	}
	if p.Decision != res.Header.Get(headerDecision) || p.Status != res.StatusCode {
		t.Errorf("problem %+v does not match headers/status %d %q", p, res.StatusCode, res.Header.Get(headerDecision))
	}
	return p
}

// TestSeedScenarioOverHTTP is the seed scenario end to end: the real
// engine, a recording upstream, and counts of what reached it.
func TestSeedScenarioOverHTTP(t *testing.T) {
	env := newTestServer(t, seedEngine(t))
	cases := []struct {
		name, tool, body string
		status           int
		decision         string
		ruleIDs          []string
		executed         bool
	}{
		{"read is executed", "Read", `{"path":"readme.txt"}`, 200, "allow", nil, true},
		{"secrets denied naming r2", "Read", `{"path":"secrets.txt"}`, 403, "deny", []string{"r2"}, false},
		{"write not executed", "Write", `{"path":"notes/a.txt","content":"x"}`, 503, "ask", []string{"r3"}, false},
		{"tool without rule denied", "Delete", `{"path":"readme.txt"}`, 403, "deny", []string{"toolgate.default"}, false},
		{"exact name never matches longer", "Edit", `{"path":"notes.txt.bak"}`, 403, "deny", []string{"toolgate.default"}, false},
		{"exact name matches", "Edit", `{"path":"notes.txt"}`, 200, "allow", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(env.upstream.Requests())
			res := post(t, env.url+"/tools/"+tc.tool, tc.body)
			if res.StatusCode != tc.status || res.Header.Get(headerDecision) != tc.decision {
				t.Fatalf("status %d decision %q, want %d %q", res.StatusCode, res.Header.Get(headerDecision), tc.status, tc.decision)
			}
			if tc.status != 200 {
				p := readProblem(t, res)
				if strings.Join(p.RuleIDs, ",") != strings.Join(tc.ruleIDs, ",") {
					t.Errorf("rule_ids %v, want %v", p.RuleIDs, tc.ruleIDs)
				}
			}
			got := env.upstream.Requests()[before:]
			if tc.executed != (len(got) == 1) || len(got) > 1 {
				t.Fatalf("upstream received %d requests, want executed=%v exactly once", len(got), tc.executed)
			}
		})
	}
}

// TestForwardsExactlyWhatWasEvaluated checks INV-2: the upstream receives
// the bytes the policy evaluated, gzip included (decoded on both sides).
func TestForwardsExactlyWhatWasEvaluated(t *testing.T) {
	var seen *policy.Input
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		seen = in
		return policy.Decision{Action: policy.Allow}, nil
	})
	// The upstream takes tool queries, so the query is evaluated and sent.
	env := newTestServer(t, d, func(c *Config) { c.Upstreams[0].ToolQuery = true; c.AllowLossyNumbers = true })
	body := `{"path":"./notes//today.txt","content":"h\u00e9llo","n":12345678901234567890}`

	t.Run("plain", func(t *testing.T) {
		res := post(t, env.url+"/tools/write_note?dry=1", body, "Authorization", "Bearer agent-key")
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		got := env.upstream.Requests()
		last := got[len(got)-1]
		if string(last.Body) != body {
			t.Errorf("upstream body %q, want %q", last.Body, body)
		}
		if last.Path != "/tools/write_note" || last.Query != "dry=1" || last.Method != "POST" {
			t.Errorf("upstream saw %s %s?%s", last.Method, last.Path, last.Query)
		}
		if seen.Tool.Target != "notes/today.txt" || seen.Tool.TargetRaw != "./notes//today.txt" {
			t.Errorf("target %q raw %q", seen.Tool.Target, seen.Tool.TargetRaw)
		}
		if n := seen.Tool.Arguments["n"]; n != json.Number("12345678901234567890") {
			t.Errorf("number argument %#v lost precision", n)
		}
		if seen.Subject.ID != "agent-42" || !seen.Subject.Authenticated || seen.HTTP.Path != "/tools/write_note" {
			t.Errorf("subject %+v path %q", seen.Subject, seen.HTTP.Path)
		}
		if last.Header.Get("Authorization") != "" {
			t.Error("the agent's credential reached the upstream")
		}
		if last.Header.Get(headerCallID) != res.Header.Get(headerCallID) || last.Header.Get(headerCallID) == "" {
			t.Errorf("upstream call ID %q, agent's %q", last.Header.Get(headerCallID), res.Header.Get(headerCallID))
		}
		if last.Host != env.upURL.Host {
			t.Errorf("upstream saw Host %q, want its own %q", last.Host, env.upURL.Host)
		}
		if res.Header.Values(headerDecision)[0] != "allow" || len(res.Header.Values(headerDecision)) != 1 {
			t.Errorf("decision header %q: the upstream spoke for toolgate", res.Header.Values(headerDecision))
		}
	})

	t.Run("gzip", func(t *testing.T) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write([]byte(body))
		_ = zw.Close()
		res := post(t, env.url+"/tools/write_note", gz.String(), "Content-Encoding", "gzip")
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		got := env.upstream.Requests()
		last := got[len(got)-1]
		if string(last.Body) != body || last.Header.Get("Content-Encoding") != "" {
			t.Errorf("upstream got %q with Content-Encoding %q; want the decoded body, no encoding", last.Body, last.Header.Get("Content-Encoding"))
		}
		if seen.Tool.Arguments["content"] != "héllo" {
			t.Errorf("policy saw %v", seen.Tool.Arguments)
		}
		// The headers the policy saw say what the upstream was told.
		if ce, cl := seen.HTTP.Headers["content-encoding"], seen.HTTP.Headers["content-length"]; ce != nil || len(cl) != 1 || cl[0] != last.Header.Get("Content-Length") {
			t.Errorf("policy saw Content-Encoding %q, Content-Length %q; the upstream got none and %q", ce, cl, last.Header.Get("Content-Length"))
		}
	})

	t.Run("overrides and spoofed headers stripped", func(t *testing.T) {
		res := post(t, env.url+"/tools/write_note", body,
			"X-HTTP-Method-Override", "DELETE", "X-Original-URL", "/admin",
			"X-Toolgate-Subject", "root", "X_Forwarded_User", "root", "X-Forwarded-User", "root", "X-Other", "kept")
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		got := env.upstream.Requests()
		h := got[len(got)-1].Header
		for _, k := range []string{"X-Http-Method-Override", "X-Original-Url", "X_Forwarded_User", "X-Forwarded-User"} {
			if len(h.Values(k)) > 0 {
				t.Errorf("%s reached the upstream", k)
			}
		}
		if h.Get("X-Toolgate-Subject") != "anonymous" || h.Get("X-Other") != "kept" {
			t.Errorf("X-Toolgate-Subject %q (want toolgate's own: anonymous), X-Other %q", h.Get("X-Toolgate-Subject"), h.Get("X-Other"))
		}
		if _, ok := seen.HTTP.Headers["x-http-method-override"]; ok {
			t.Error("the policy saw a method override")
		}
	})
}

// TestBadInputsReachNothing covers every bad input of docs/http-api.md (refused before the policy runs): each
// gets its status and the upstream receives nothing.
func TestBadInputsReachNothing(t *testing.T) {
	var decided int
	d := deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
		decided++
		return policy.Decision{Action: policy.Allow}, nil
	})
	env := newTestServer(t, d)
	gzipped := func(s string) string {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(s))
		_ = zw.Close()
		return b.String()
	}
	big := `{"a":"` + strings.Repeat("x", 2000) + `"}`
	cases := []struct {
		name, path, body string
		header           []string
		status           int
	}{
		{"text content type", "/tools/t", `{}`, []string{"Content-Type", "", "Content-Type", "text/plain"}, 415},
		{"no content type", "/tools/t", `{}`, []string{"Content-Type", ""}, 415},
		{"form content type", "/tools/t", `a=b`, []string{"Content-Type", "", "Content-Type", "application/x-www-form-urlencoded"}, 415},
		{"two content types", "/tools/t", `{}`, []string{"Content-Type", "application/json"}, 415},
		{"latin1 charset", "/tools/t", `{}`, []string{"Content-Type", "", "Content-Type", "application/json; charset=latin1"}, 415},
		// RFC 2231: Go's mime reads charset* in place of the plain charset
		// an upstream decodes by (UTF-7 spells members the policy never sees).
		{"charset* beside utf-7", "/tools/t", `{}`, []string{"Content-Type", "", "Content-Type", "application/json; charset=utf-7; charset*=utf-8''utf-8"}, 415},
		{"charset* alone", "/tools/t", `{}`, []string{"Content-Type", "", "Content-Type", "application/json; charset*=utf-8''utf-8"}, 415},
		{"a parameter beside charset", "/tools/t", `{}`, []string{"Content-Type", "", "Content-Type", "application/json; charset=utf-8; x=1"}, 415},
		{"brotli", "/tools/t", `{}`, []string{"Content-Encoding", "br"}, 415},
		{"gzip twice", "/tools/t", gzipped(gzipped(`{}`)), []string{"Content-Encoding", "gzip, gzip"}, 415},
		{"too large", "/tools/t", big, nil, 413},
		{"too large after gzip", "/tools/t", gzipped(big), []string{"Content-Encoding", "gzip"}, 413},
		{"broken gzip", "/tools/t", "not gzip", []string{"Content-Encoding", "gzip"}, 400},
		{"invalid json", "/tools/t", `{"a":}`, nil, 400},
		{"top-level array", "/tools/t", `[1]`, nil, 400},
		{"top-level string", "/tools/t", `"x"`, nil, 400},
		{"empty body", "/tools/t", ``, nil, 400},
		{"duplicate key", "/tools/t", `{"path":"a","path":"b"}`, nil, 400},
		{"nested duplicate key", "/tools/t", `{"o":{"k":1,"k":2}}`, nil, 400},
		{"case-variant key", "/tools/t", `{"path":"a","Path":"b"}`, nil, 400},
		{"invalid utf-8", "/tools/t", "{\"path\":\"\xff\"}", nil, 400},
		{"lone surrogate", "/tools/t", `{"path":"\ud800"}`, nil, 400},
		{"two values", "/tools/t", `{}{}`, nil, 400},
		{"encoded slash in tool", "/tools/a%2Fb", `{}`, nil, 400},
		{"twice encoded dots in a path", "/files/docs/%252e%252e/secrets/x", ``, nil, 400},
		{"twice encoded slash in a path", "/files/docs%252F..%252Fsecrets", ``, nil, 400},
		{"thrice encoded dots in a path", "/files/docs/%25252e%25252e/secrets/x", ``, nil, 400},
		{"constructor.prototype", "/tools/t", `{"constructor":{"prototype":{"path":"secrets/key"}}}`, nil, 400},
		{"dots-only tool", "/tools/..", `{}`, nil, 400},
		{"dot tool", "/tools/.x", `{}`, nil, 400},
		{"empty tool", "/tools/", `{}`, nil, 400},
		{"slash in tool", "/tools/a/b", `{}`, nil, 400},
		{"encoded char in tool", "/tools/read%5Ffile", `{}`, nil, 400},
		{"encoded unreserved in path", "/%74ools/t", `{}`, nil, 400},
		{"long tool", "/tools/" + strings.Repeat("a", 129), `{}`, nil, 400},
		{"dot segment", "/x/../tools/t", `{}`, nil, 400},
		{"empty segment", "/tools//t", `{}`, nil, 400},
		{"encoded dot", "/tools/%2e%2e", `{}`, nil, 400},
		{"matrix param", "/tools/t;x=1", `{}`, nil, 400},
		{"backslash", "/tools\\t", `{}`, nil, 400},
		{"bad query", "/tools/t?a=%zz", `{}`, nil, 400},
		{"semicolon query", "/tools/t?a=1;b=2", `{}`, nil, 400},
		{"encoded newline in a path", "/files/docs/a%0A", ``, nil, 400},
		{"encoded CR LF in a path", "/files/docs/a%0D%0AX-Env:%20prod", ``, nil, 400},
		{"encoded DEL in a path", "/files/docs/a%7F", ``, nil, 400},
		{"encoded NEL in a path", "/files/docs/a%C2%85", ``, nil, 400},
		{"not UTF-8 once decoded, path", "/files/docs/a%FF", ``, nil, 400},
		{"not UTF-8 once decoded, query value", "/files/docs/a?x=%FE", ``, nil, 400},
		{"not UTF-8 once decoded, query name", "/files/docs/a?%FF=1", ``, nil, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := post(t, env.url+tc.path, tc.body, tc.header...)
			if res.StatusCode != tc.status {
				b, _ := io.ReadAll(res.Body)
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, b)
			}
			if p := readProblem(t, res); p.Decision != "invalid" {
				t.Errorf("decision %q, want invalid", p.Decision)
			}
		})
	}
	if n := len(env.upstream.Requests()); n != 0 || decided != 0 {
		t.Fatalf("upstream received %d requests and the policy decided %d times; want 0 and 0", n, decided)
	}
	for _, ct := range []string{"application/json;charset=UTF-8", `application/json; charset="utf-8"`, "application/json;"} {
		if res := post(t, env.url+"/tools/t", `{}`, "Content-Type", "", "Content-Type", ct); res.StatusCode != 200 {
			t.Errorf("Content-Type %q: status %d, want 200", ct, res.StatusCode)
		}
	}
	t.Run("exactly at the limit is accepted", func(t *testing.T) {
		body := `{"a":"` + strings.Repeat("x", 1024-8) + `"}`
		if res := post(t, env.url+"/tools/t", body); res.StatusCode != 200 {
			t.Fatalf("status %d for a %d-byte body", res.StatusCode, len(body))
		}
	})
}

func TestRefusalsAndFailures(t *testing.T) {
	allow := deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
		return policy.Decision{Action: policy.Allow}, nil
	})
	t.Run("policy error fails closed", func(t *testing.T) {
		env := newTestServer(t, deciderFunc(func(context.Context, *policy.Input) (policy.Decision, error) {
			return policy.Decision{Action: policy.Allow}, context.DeadlineExceeded
		}))
		res := post(t, env.url+"/tools/t", `{}`)
		p := readProblem(t, res)
		if res.StatusCode != 403 || p.Decision != "deny" || len(env.upstream.Requests()) != 0 {
			t.Fatalf("status %d decision %q, upstream %d", res.StatusCode, p.Decision, len(env.upstream.Requests()))
		}
	})
	t.Run("slow policy is denied at the engine's timeout", func(t *testing.T) {
		dir := t.TempDir()
		_ = os.WriteFile(filepath.Join(dir, "slow.rego"), []byte("package toolgate\n\nallow contains \"slow\" if {\n\tsome i in numbers.range(1, 100000000)\n\ti < 0\n}\n"), 0o600)
		e, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: os.DirFS(dir), Timeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		env := newTestServer(t, e)
		start := time.Now()
		res := post(t, env.url+"/tools/t", `{}`)
		if p := readProblem(t, res); res.StatusCode != 403 || p.Decision != "deny" || len(env.upstream.Requests()) != 0 || time.Since(start) > 3*time.Second {
			t.Fatalf("status %d decision %q upstream %d after %v", res.StatusCode, p.Decision, len(env.upstream.Requests()), time.Since(start))
		}
	})
	t.Run("bad credential is 401 even with anonymous on", func(t *testing.T) {
		env := newTestServer(t, allow)
		res := post(t, env.url+"/tools/t", `{}`, "Authorization", "Bearer wrong")
		p := readProblem(t, res)
		if res.StatusCode != 401 || p.Decision != "unauthenticated" || len(env.upstream.Requests()) != 0 {
			t.Fatalf("status %d decision %q", res.StatusCode, p.Decision)
		}
		if res.Header.Get("WWW-Authenticate") == "" {
			t.Error("401 without WWW-Authenticate")
		}
	})
	t.Run("dead upstream is 502", func(t *testing.T) {
		env := newTestServer(t, allow, func(c *Config) {
			dead, _ := url.Parse("http://127.0.0.1:1")
			c.Upstreams[0].URL = dead
		})
		res := post(t, env.url+"/tools/t", `{}`)
		if p := readProblem(t, res); res.StatusCode != 502 || p.Decision != "allow" {
			t.Fatalf("status %d decision %q", res.StatusCode, p.Decision)
		}
	})
	t.Run("slow upstream is 504", func(t *testing.T) {
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done():
			}
		}))
		defer slow.Close()
		env := newTestServer(t, allow, func(c *Config) {
			c.Upstreams[0].URL, _ = url.Parse(slow.URL)
			c.Upstreams[0].Timeout = 100 * time.Millisecond
		})
		res := post(t, env.url+"/tools/t", `{}`)
		if p := readProblem(t, res); res.StatusCode != 504 || p.Decision != "allow" {
			t.Fatalf("status %d decision %q", res.StatusCode, p.Decision)
		}
	})
	t.Run("draining refuses new calls", func(t *testing.T) {
		rec := newRecorder(t)
		u, _ := url.Parse(rec.URL)
		auth, _ := identity.New(identity.Config{Anonymous: true})
		s, err := New(Config{Upstreams: []Upstream{{Name: "u", URL: u}}, Decider: allow, Auth: auth})
		if err != nil {
			t.Fatal(err)
		}
		s.Drain()
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/tools/t", strings.NewReader(`{}`)))
		if w.Code != 503 || len(rec.Requests()) != 0 {
			t.Fatalf("status %d, upstream %d", w.Code, len(rec.Requests()))
		}
	})
}

// TestPlainHTTPCalls: requests that are not tool calls are decided as kind
// http; the shipped library denies them unless a rule allows them.
func TestPlainHTTPCalls(t *testing.T) {
	t.Run("denied by default", func(t *testing.T) {
		env := newTestServer(t, seedEngine(t))
		res, err := http.Get(env.url + "/files?all=1")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if p := readProblem(t, res); res.StatusCode != 403 || p.RuleIDs[0] != "toolgate.default" || len(env.upstream.Requests()) != 0 {
			t.Fatalf("status %d rules %v", res.StatusCode, p.RuleIDs)
		}
	})
	t.Run("allowed by a rule, decided on method path and query", func(t *testing.T) {
		var seen *policy.Input
		env := newTestServer(t, deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
			seen = in
			return policy.Decision{Action: policy.Allow}, nil
		}))
		res, err := http.Get(env.url + "/files?all=1")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 || seen.Kind != "http" || seen.Tool != nil || seen.HTTP.Method != "GET" ||
			seen.HTTP.Path != "/files" || seen.HTTP.Query.Get("all") != "1" {
			t.Fatalf("status %d input %+v", res.StatusCode, seen)
		}
		if got := env.upstream.Requests(); len(got) != 1 || got[0].Path != "/files" {
			t.Fatalf("upstream %+v", got)
		}
	})
}

func TestPrefixRouting(t *testing.T) {
	var seen []*policy.Input
	d := deciderFunc(func(_ context.Context, in *policy.Input) (policy.Decision, error) {
		seen = append(seen, in)
		return policy.Decision{Action: policy.Allow}, nil
	})
	other := newRecorder(t)
	ou, _ := url.Parse(other.URL + "/base")
	env := newTestServer(t, d, func(c *Config) {
		c.Upstreams = append(c.Upstreams, Upstream{Name: "notes", URL: ou, Prefix: "/notes/"})
	})
	res := post(t, env.url+"/notes/tools/read_file", `{"path":"a"}`)
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if got := other.Requests(); len(got) != 1 || got[0].Path != "/base/tools/read_file" {
		t.Fatalf("notes upstream got %+v", got)
	}
	if in := seen[len(seen)-1]; in.Upstream.Name != "notes" || in.Tool.Name != "read_file" || in.HTTP.Path != "/tools/read_file" {
		t.Fatalf("input %+v", in)
	}
	res = post(t, env.url+"/notes", `{}`)
	if got := other.Requests(); res.StatusCode != 200 || len(got) != 2 || got[1].Path != "/base/" {
		t.Fatalf("bare prefix: status %d, notes upstream got %+v", res.StatusCode, got)
	}
	res = post(t, env.url+"/tools/read_file", `{"path":"a"}`)
	if res.StatusCode != 200 || len(env.upstream.Requests()) != 1 || seen[len(seen)-1].Upstream.Name != "files" {
		t.Fatalf("default upstream not used: %d", res.StatusCode)
	}
}

// BenchmarkToolCall is an allowed call through toolgate, beside the same
// call through a bare httputil.ReverseProxy.
func BenchmarkToolCall(b *testing.B) {
	up := benchUpstream(b, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":"ok"}`)
	})
	u, _ := url.Parse(up.URL)
	body := `{"path":"docs/guide/intro.md","content":"` + strings.Repeat("x", 150) + `"}`
	run := func(b *testing.B, target string) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("POST", target+"/tools/tool0", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Fatalf("status %d", res.StatusCode)
			}
		}
	}
	b.Run("bare-reverseproxy", func(b *testing.B) {
		bare := httptest.NewServer(&httputilProxy{u})
		defer bare.Close()
		run(b, bare.URL)
	})
	b.Run("toolgate", func(b *testing.B) {
		dir := b.TempDir()
		path := filepath.Join(dir, "rules.yaml")
		_ = os.WriteFile(path, []byte("rules:\n  - {id: a, effect: allow, tool: tool0, target: \"docs/**\"}\n"), 0o600)
		e, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, RulesFile: path})
		if err != nil {
			b.Fatal(err)
		}
		auth, _ := identity.New(identity.Config{Anonymous: true})
		s, err := New(Config{Upstreams: []Upstream{{Name: "u", URL: u}}, Decider: e, Auth: auth})
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		defer ts.Close()
		run(b, ts.URL)
	})
}
