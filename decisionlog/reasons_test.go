package decisionlog_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/internal/testkit"
)

// leaksWithoutArguments calls "login" with each body (log.arguments off)
// and reports each secret found in the decision log.
func leaksWithoutArguments(t *testing.T, calls []struct{ body, secret string }) {
	t.Helper()
	e := newEngine(t, map[string]string{"p.rego": testPolicy})
	l, console := newLogger(t, e, decisionlog.Options{})
	base := newProxy(t, e, adapter{l, e}, nil)
	for _, c := range calls {
		code := call(t, base, "login", c.body)
		t.Logf("%s: %d", c.body, code)
	}
	testkit.WaitFor(t, "the console events", func() bool { return strings.Count(console.String(), "\n") >= len(calls) })
	out := console.String()
	for _, c := range calls {
		if strings.Contains(out, c.secret) {
			i := strings.Index(out, c.secret)
			t.Errorf("log.arguments off: the decision log holds %q: ...%s...", c.secret, out[max(0, i-160):min(len(out), i+40)])
		}
	}
}

// TestEscapeReasonQuotesNoTarget: the shipped library's deny reason
// toolgate.target_escapes quoted the raw target, as sent, query and user
// information included, and reasons are logged whatever log.arguments
// says. It no longer quotes it.
func TestEscapeReasonQuotesNoTarget(t *testing.T) {
	leaksWithoutArguments(t, []struct{ body, secret string }{
		{`{"url":"file:///docs/a?token=sk-ESCQUERY#/../../etc/passwd"}`, "ESCQUERY"},
		{`{"path":"a://svc:pw-ESCUSER@b/../../etc/passwd"}`, "ESCUSER"},
	})
}

// TestUserinfoWithASlashRedacted: a target whose credential holds a slash
// (Oracle's thin URL user/password@host) kept it: the user information was
// looked for only before the first slash.
func TestUserinfoWithASlashRedacted(t *testing.T) {
	leaksWithoutArguments(t, []struct{ body, secret string }{
		{`{"url":"jdbc:oracle:thin:scott/pw-ORACLE@db.example.com:1521/orcl"}`, "ORACLE"},
	})
}
