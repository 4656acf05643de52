package proxy

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/hooks"
	"github.com/toolgate/toolgate/internal/testkit"
)

// TestRefusedArgumentNotLogged: an argument refused for a control
// character or an ambiguous spelling is quoted back to the agent that sent
// it, but toolgate's log names it by its length: the value may hold a
// secret that log.arguments and the policy's masks keep out of the
// decision log. The same holds for a hook's rewrite that toolgate refuses,
// whose reason reaches the decision log too.
func TestRefusedArgumentNotLogged(t *testing.T) {
	const secret = "sk-live-SECRET123"
	out := &testkit.Buffer{}
	env := newTestServer(t, seedEngine(t), func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(out, nil)) })
	for _, body := range []string{
		`{"url":"https://api.example/v1?token=` + secret + `\u0007"}`,
		`{"path":"notes/` + secret + `/%2e%2e/x"}`,
	} {
		res := post(t, env.url+"/tools/Read", body, "Authorization", "Bearer agent-key")
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 400 || !strings.Contains(string(b), secret) {
			t.Errorf("%s: %d %s, want 400 quoting the value to its sender", body, res.StatusCode, b)
		}
	}
	url := hookServer(t, `{"decision":"none","updated_arguments":{"path":"notes/`+secret+`\u0007"}}`, 0)
	hooked := newTestServer(t, seedEngine(t), withHook(t, hooks.Hook{Name: "pin", URL: url}),
		func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(out, nil)) })
	res := post(t, hooked.url+"/tools/Read", `{"path":"notes/a.txt"}`, "Authorization", "Bearer agent-key")
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Errorf("a hook's refused rewrite: %d, want 403", res.StatusCode)
	}
	log := out.String()
	if strings.Contains(log, secret) {
		t.Errorf("the log holds the refused value:\n%s", log)
	}
	if strings.Count(log, "bytes)") < 3 {
		t.Errorf("the log does not name the refused values by length:\n%s", log)
	}
}
