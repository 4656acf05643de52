package decisionlog_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/policy"
)

// TestTargetsRedactedWithoutArguments: with log.arguments off, a call's
// targets, which are argument values (url, command, path), reach the
// decision log cut to what they name: a URL without its user information
// and query, a command hidden whole, a path as it is. They held a URL's
// ?api_key= and svc:password@, and a command's bearer token, in
// tool.target, target_raw and targets[].raw. With and without mask rules
// (the plugin's path and the direct one).
func TestTargetsRedactedWithoutArguments(t *testing.T) {
	for _, files := range []map[string]string{{"p.rego": testPolicy}, {"p.rego": testPolicy, "mask.rego": testMask}} {
		e := newEngine(t, files)
		l, console := newLogger(t, e, decisionlog.Options{})
		base := newProxy(t, e, adapter{l, e}, nil)
		calls := []struct{ body, secret, kept string }{
			{`{"url":"https://svc:pw-USERINFO@api.example.com/v1/items?api_key=sk-QUERYSECRET#FRAG"}`, "SECRET", `"target":"https://api.example.com/v1/items?REDACTED"`},
			{`{"url":"svc:pw-NOSCHEME@api.example.com/v1"}`, "NOSCHEME", `"target":"REDACTED@api.example.com/v1"`},
			{`{"command":"curl -H 'Authorization: Bearer sk-CMDSECRET' https://api.example.com"}`, "CMDSECRET", `"target":"[REDACTED]"`},
			{`{"path":"notes/today.txt"}`, "", `"target":"notes/today.txt"`},
			// A command behind an opaque first target; a URL in a path
			// argument (read as the path "https:/…"); a network-path URL.
			{`{"path":1,"command":"curl -H 'Authorization: Bearer sk-OPAQUEFIRST' https://api.example.com"}`, "OPAQUEFIRST", `"target":"[REDACTED]"`},
			{`{"path":"https://svc:pw-PATHURL@api.example.com/v1"}`, "PATHURL", `"target":"https://api.example.com/v1"`},
			{`{"url":"//svc:pw-SCHEMEREL@api.example.com/v1"}`, "SCHEMEREL", `"arg":"url"`},
			// A target toolgate cannot read (JSON text) is hidden whole.
			{`{"command":"[\"sh\",\"-c\",\"curl -H 'Authorization: Bearer sk-JSONCMD' x\"]"}`, "JSONCMD", `"arg":"command"`},
			{`{"url":"{\"href\":\"https://svc:pw-JSONUSER@api.example.com/v1\"}"}`, "JSONUSER", `"arg":"url"`},
		}
		for _, c := range calls {
			if code := call(t, base, "login", c.body); code != http.StatusOK {
				t.Fatalf("%s: %d", c.body, code)
			}
		}
		testkit.WaitFor(t, "the console events", func() bool { return strings.Count(console.String(), "\n") >= len(calls) })
		out := console.String()
		for _, c := range calls {
			if c.secret != "" && strings.Contains(out, c.secret) {
				t.Errorf("%d mask files: the decision log holds %q: %s", len(files)-1, c.secret, out)
			}
			if !strings.Contains(out, c.kept) {
				t.Errorf("%d mask files: the decision log has no %s: %s", len(files)-1, c.kept, out)
			}
		}
	}
}

// TestQueuedTargetsCounted: with log.arguments off, queued events hold no
// more than MaxQueueBytes, targets included. An event counted only its
// fixed part and its headers: 200 denied calls whose path was ~900 KiB,
// queued behind a console that does not take them, held 175 MiB and none
// was dropped. (Such a target, too long to read, is now hidden whole; a
// readable one is counted.)
func TestQueuedTargetsCounted(t *testing.T) {
	e := newEngine(t, map[string]string{"p.rego": testPolicy})
	reg := prometheus.NewRegistry()
	s := stalled{release: make(chan struct{})}
	l, _ := newLogger(t, e, decisionlog.Options{Console: slog.NewJSONHandler(s, nil), Registerer: reg})
	defer close(s.release) // before the logger closes
	base := newProxy(t, e, adapter{l, e}, nil)
	body := `{"path":"` + strings.Repeat("a/", 450_000) + `x"}`
	before := heapInUse()
	denyMany(t, base, body, 200)
	held := int64(heapInUse()) - int64(before)
	dropped := counterValue(t, reg, "toolgate_decision_log_events_dropped_total", "queue_full")
	if held > decisionlog.MaxQueueBytes+16<<20 {
		t.Errorf("the queue holds %d MiB (bound %d MiB) and dropped %v events", held>>20, decisionlog.MaxQueueBytes>>20, dropped)
	}
}

// TestParamHeadersHiddenWithoutArguments: with log.arguments off, an MCP
// call's Mcp-Param-{Name} headers, which must equal an argument's value,
// reach the decision log with their values hidden; other headers as
// they are.
func TestParamHeadersHiddenWithoutArguments(t *testing.T) {
	e := newEngine(t, map[string]string{"p.rego": testPolicy})
	l, console := newLogger(t, e, decisionlog.Options{})
	l.LogDecision(t.Context(), decisionlog.Decision{ID: "c1", Input: policy.Input{
		CallID: "c1", Tool: &policy.Tool{Name: "login"},
		HTTP: policy.HTTP{Method: "POST", Path: "/mcp", Headers: map[string][]string{"mcp-param-region": {"tenant-PARAMSECRET"}, "user-agent": {"agent/1"}}},
	}})
	testkit.WaitFor(t, "the event", func() bool { return strings.Contains(console.String(), `"c1"`) })
	out := console.String()
	if strings.Contains(out, "PARAMSECRET") || !strings.Contains(out, `"mcp-param-region":["[hidden]"]`) || !strings.Contains(out, `"user-agent":["agent/1"]`) {
		t.Errorf("the decision log: %s; want the Mcp-Param header's value hidden, the user agent kept", out)
	}
}
