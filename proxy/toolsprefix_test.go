package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

// TestToolsPrefixInAnotherCase: a router that matches paths without regard
// to case (Express's and ASP.NET Core's default) runs POST /Tools/Read as
// the tool Read. Read as a plain HTTP call, it would reach the upstream
// without its tool, target or arguments decided, wherever a policy lets
// plain HTTP through; so such a path is refused, nothing forwarded.
func TestToolsPrefixInAnotherCase(t *testing.T) {
	eng := seedEngine(t)
	d := deciderFunc(func(ctx context.Context, in *policy.Input) (policy.Decision, error) {
		// An operator's rule: plain HTTP outside the tool namespace is fine.
		if in.Kind == policy.KindHTTP && !strings.HasPrefix(in.HTTP.Path, "/tools/") {
			return policy.Decision{Action: policy.Allow}, nil
		}
		return eng.Decide(ctx, in)
	})
	env := newTestServer(t, d)
	for _, path := range []string{"/Tools/Read", "/TOOLS/Read", "/toolſ/Read", "/Tools", "/tOols/read_file?x=1"} {
		res := post(t, env.url+path, `{"path":"secrets.txt"}`, "Authorization", "Bearer agent-key")
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "tools prefix") {
			t.Errorf("POST %s: %d %s, want 400 Not the tools prefix", path, res.StatusCode, b)
		}
	}
	// Plain HTTP elsewhere, and the tool call spelt right, are unchanged.
	for path, want := range map[string]int{"/toolsets/a": 200, "/docs/tools": 200, "/tools/Read": 403} {
		res := post(t, env.url+path, `{"path":"secrets.txt"}`, "Authorization", "Bearer agent-key")
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("POST %s: %d, want %d", path, res.StatusCode, want)
		}
	}
	for _, r := range env.upstream.Requests() {
		if strings.EqualFold(strings.SplitN(strings.TrimPrefix(r.Path, "/"), "/", 2)[0], "tools") || strings.HasPrefix(r.Path, "/toolſ") {
			t.Errorf("the upstream received %s %s", r.Method, r.Path)
		}
	}
}
