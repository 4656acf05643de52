package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/toolgate/toolgate/hooks"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// hookServer answers every hook request with answer, after delay.
func hookServer(t *testing.T, answer string, delay time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "a credential reached the hook", http.StatusTeapot)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func withHook(t *testing.T, h hooks.Hook) func(*Config) {
	return func(c *Config) {
		r, err := hooks.New(hooks.Options{Hooks: []hooks.Hook{h}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		c.Hooks = r
		c.Pending, c.Hold = pending.NewMemory(pending.Options{}), 10*time.Millisecond
	}
}

// TestHooks runs the whole chain with a real hook server: hook, rules,
// mode, forward.
func TestHooks(t *testing.T) {
	cases := []struct {
		name, answer, tool, args, mode string
		delay                          time.Duration
		want                           int
		decision                       string
	}{
		{"hook deny ends an allowed call", `{"decision":"deny","reason":"change freeze"}`, "Read", `{"path":"a.txt"}`, "", 0, 403, "deny"},
		{"hook allow does not beat a rules ask", `{"decision":"allow"}`, "Write", `{"path":"a.txt"}`, "", 0, 202, "ask"},
		{"hook allow does not beat a rules deny", `{"decision":"allow"}`, "Read", `{"path":"secrets.txt"}`, "", 0, 403, "deny"},
		{"hook ask under bypass still asks", `{"decision":"ask","reason":"risk score 0.9"}`, "Read", `{"path":"a.txt"}`, "bypass", 0, 202, "ask"},
		{"hook that times out denies by default", `{"decision":"allow"}`, "Read", `{"path":"a.txt"}`, "", time.Second, 403, "deny"},
		{"hook none leaves the rules", `{"decision":"none"}`, "Read", `{"path":"a.txt"}`, "", 0, 200, "allow"},
		{"a rewrite the rules deny is denied", `{"decision":"none","updated_arguments":{"path":"secrets.txt"}}`, "Read", `{"path":"a.txt"}`, "", 0, 403, "deny"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := hookServer(t, tc.answer, tc.delay)
			env := newTestServer(t, seedEngine(t), withHook(t, hooks.Hook{Name: "h", URL: url, Timeout: 200 * time.Millisecond}),
				func(c *Config) { c.Mode = tc.mode })
			res := post(t, env.url+"/tools/"+tc.tool, tc.args, "Authorization", "Bearer agent-key")
			if res.StatusCode != tc.want || res.Header.Get("X-Toolgate-Decision") != tc.decision {
				b, _ := io.ReadAll(res.Body)
				t.Fatalf("%d %q, want %d %q\n%s", res.StatusCode, res.Header.Get("X-Toolgate-Decision"), tc.want, tc.decision, b)
			}
			if n := len(env.upstream.Requests()); (n == 1) != (tc.want == 200) {
				t.Fatalf("the upstream got %d calls with status %d", n, tc.want)
			}
		})
	}
}

// TestHookRewriteHiddenCharacters: a rewrite is read as strictly as an
// agent's body, so a target it fills with DEL, a C1 control, a bidi
// control or an invisible format character denies the call, naming the
// character, and nothing reaches the upstream.
func TestHookRewriteHiddenCharacters(t *testing.T) {
	for _, tc := range []struct{ updated, want string }{
		{`{"path":"a\u007f.txt"}`, "control character U+007F"},
		{`{"path":"a\u009b.txt"}`, "control character U+009B"},
		{`{"path":"a.txt","o":{"\u0085":1}}`, "control character U+0085"},
		{`{"path":"report\u202etxt.exe"}`, "bidi control character U+202E"},
		{`{"path":"\ufeffa.txt"}`, "invisible format character U+FEFF"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			url := hookServer(t, `{"decision":"none","updated_arguments":`+tc.updated+`}`, 0)
			env := newTestServer(t, seedEngine(t), withHook(t, hooks.Hook{Name: "h", URL: url, Timeout: time.Second}))
			res := post(t, env.url+"/tools/Read", `{"path":"a.txt"}`, "Authorization", "Bearer agent-key")
			p := readProblem(t, res)
			if res.StatusCode != 403 || p.Decision != "deny" || !strings.Contains(p.Detail, "hook h rewrote") || !strings.Contains(p.Detail, tc.want) {
				t.Fatalf("%d %+v, want 403 deny naming %s", res.StatusCode, p, tc.want)
			}
			if n := len(env.upstream.Requests()); n != 0 {
				t.Fatalf("the upstream got %d calls", n)
			}
		})
	}
}

// TestHookRewrite checks that updated_arguments are what the policy
// decides, the upstream receives and an approver sees.
func TestHookRewrite(t *testing.T) {
	url := hookServer(t, `{"decision":"none","updated_arguments":{"path":"notes/safe.txt","mode":"append"}}`, 0)
	env := newTestServer(t, seedEngine(t), withHook(t, hooks.Hook{Name: "pin", URL: url}))
	res := post(t, env.url+"/tools/Read", `{"path":"a.txt","mode":"truncate"}`, "Authorization", "Bearer agent-key")
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	reqs := env.upstream.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream calls", len(reqs))
	}
	var got map[string]any
	if err := json.Unmarshal(reqs[0].Body, &got); err != nil || got["path"] != "notes/safe.txt" || got["mode"] != "append" {
		t.Fatalf("the upstream received %s, want the hook's arguments", reqs[0].Body)
	}
	if strings.Contains(string(reqs[0].Body), "truncate") {
		t.Error("the agent's arguments reached the upstream")
	}
}

// TestHookRewriteLength: the policy decides on the Content-Length the
// upstream is told, the rewritten body's, not the agent's.
func TestHookRewriteLength(t *testing.T) {
	url := hookServer(t, `{"decision":"none","updated_arguments":{"path":"notes/a-longer-name.txt"}}`, 0)
	policies := fstest.MapFS{"length.rego": {Data: []byte(`package toolgate
import rego.v1
allow contains {"id": "length", "message": "as sent"} if input.http.headers["content-length"] == [sprintf("%d", [count(json.marshal(input.tool.arguments))])]
`)}}
	engine, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: policies})
	if err != nil {
		t.Fatal(err)
	}
	env := newTestServer(t, engine, withHook(t, hooks.Hook{Name: "pin", URL: url}))
	res := post(t, env.url+"/tools/Read", `{"path":"a"}`, "Authorization", "Bearer agent-key")
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("status %d %s, want the call allowed on the rewritten body's length", res.StatusCode, b)
	}
	reqs := env.upstream.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Content-Length") != strconv.Itoa(len(reqs[0].Body)) || string(reqs[0].Body) != `{"path":"notes/a-longer-name.txt"}` {
		t.Fatalf("the upstream received %+v", reqs)
	}
}

// TestHookRewriteBesideQuery: a name in both the query and the body is
// refused, since stacks bind both to one field; a hook's rewrite that adds
// to the body a name the agent put in the query is refused the same way
// (the call denied, nothing sent), not sent in two places.
func TestHookRewriteBesideQuery(t *testing.T) {
	url := hookServer(t, `{"decision":"none","updated_arguments":{"path":"notes/safe.txt","mode":"append"}}`, 0)
	env := newTestServer(t, seedEngine(t), withHook(t, hooks.Hook{Name: "pin", URL: url}),
		func(c *Config) { c.Upstreams[0].ToolQuery = true })
	res := post(t, env.url+"/tools/Read?mode=truncate", `{"path":"a.txt"}`, "Authorization", "Bearer agent-key")
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "query string and in the body") {
		t.Errorf("status %d %s, want 403 naming the repeated argument", res.StatusCode, b)
	}
	if n := len(env.upstream.Requests()); n != 0 {
		t.Errorf("the upstream received %d requests, want none", n)
	}
}

// TestHookAskApproved checks that a call whose ask only a hook forced runs
// once approved, even where the mode alone would deny the rules' ask.
func TestHookAskApproved(t *testing.T) {
	url := hookServer(t, `{"decision":"ask","reason":"risk"}`, 0)
	store := pending.NewMemory(pending.Options{})
	env := newTestServer(t, seedEngine(t), withHook(t, hooks.Hook{Name: "risk", URL: url}), func(c *Config) {
		c.Mode, c.Pending = "dont_ask", store
	})
	for _, tool := range []string{"Write", "Unknown"} { // a rules ask under dont_ask; no rule at all
		res := post(t, env.url+"/tools/"+tool, `{"path":"a.txt"}`, "Authorization", "Bearer agent-key")
		id := res.Header.Get("X-Toolgate-Call-Id")
		if res.StatusCode != 202 || id == "" {
			t.Fatalf("%s: %d, want 202 (the hook's ask)", tool, res.StatusCode)
		}
		if _, err := store.Decide(t.Context(), id, pending.Decision{To: pending.Approved, By: "alice"}); err != nil {
			t.Fatal(err)
		}
		before := len(env.upstream.Requests())
		res = post(t, env.url+"/tools/"+tool, `{"path":"a.txt"}`, "Authorization", "Bearer agent-key")
		if res.StatusCode != 200 || len(env.upstream.Requests()) != before+1 {
			b, _ := io.ReadAll(res.Body)
			t.Fatalf("%s approved, retried: %d, upstream calls %d→%d\n%s", tool, res.StatusCode, before, len(env.upstream.Requests()), b)
		}
	}
}
