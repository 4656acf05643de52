package decisionlog

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	stdstrings "strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// consoleLines returns the JSON lines written to b, without the time each
// was written.
func consoleLines(t *testing.T, b *testkit.Buffer) []map[string]any {
	t.Helper()
	lines := b.JSONLines(t)
	for _, m := range lines {
		delete(m, "time")
	}
	return lines
}

func testEngine(t testing.TB, files map[string]string) *policy.Engine {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	e, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: fsys})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func testLogger(t testing.TB, e *policy.Engine, opts Options) *Logger {
	t.Helper()
	opts.Policy = e.Compiled
	opts.InstanceID = "test-instance"
	l, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// events are one decision of every shape: allowed with arguments and a
// trace, denied by a policy error, and an approval's audit.
func events(e *policy.Engine) []entry {
	in := policy.Input{
		CallID: "c1", Kind: policy.KindREST, Time: time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC),
		Tool: policy.NewTool("read_file", map[string]any{"path": "README.md", "n": json.Number("3")}, policy.DefaultTargetArgs),
		HTTP: policy.HTTP{Method: "POST", Path: "/tools/read_file", Headers: map[string][]string{"content-type": {"application/json"}}},
	}
	at := time.Date(2026, 11, 30, 1, 2, 3, 5, time.UTC)
	return []entry{
		&Decision{
			ID: "c1", Time: at, Input: in, Revision: e.Revision(), Elapsed: 1500 * time.Nanosecond,
			Result:      policy.Decision{Action: policy.Allow, Reasons: []policy.Reason{{ID: "r1", Message: "ok"}}, ReadOnly: true},
			RequestedBy: "127.0.0.1:5000", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
		},
		&Decision{
			ID: "c2", Time: at, Input: in, Revision: e.Revision(), Err: errors.New("boom"),
			Result: policy.Decision{Action: policy.Deny, Reasons: []policy.Reason{{ID: "toolgate.policy_error", Message: "policy error"}}},
			// A dry run whose hook rewrote the arguments: both paths keep it.
			DryRun: true, Hook: "none", UpdatedBy: "pin", ArgsDigest: "aa", UpdatedArgsDigest: "bb",
		},
		&Decision{
			ID: "c4", Time: at, Revision: e.Revision(),
			Input: policy.Input{
				CallID: "c4", Kind: policy.KindMCP, Mode: policy.ModePlan, Phase: policy.PhaseList,
				Upstream: policy.Upstream{Name: "notes-mcp", Protocol: "mcp"},
				Subject: policy.Subject{
					ID: "agent \"7\"", Groups: []string{"a", "b"}, Authenticated: true,
					Claims: map[string]any{"iss": "https://id.example", "n": json.Number("1.5"), "l": []any{true, nil}},
				},
				Tool: &policy.Tool{
					Name: "write_note", Arguments: map[string]any{"path": "notes/\u2028x", "body": "tab\tnl\n<&>"},
					Annotations: map[string]any{"readOnlyHint": false},
				},
				MCP: &policy.MCP{
					Method: "tools/call", ID: "req-\u00e9", ProtocolVersion: "2025-06-18",
					// arguments too: neither path writes them unless log.arguments
					Params: map[string]any{"_meta": map[string]any{"api_token": "secret-meta"}, "inputResponses": map[string]any{"q": "pw"}},
				},
				HTTP: policy.HTTP{
					Method: "POST", Path: "/mcp", Query: map[string][]string{"b": {"2"}, "a": {"1", "\x01"}},
					Headers: map[string][]string{"x-bin": {"caf\xe9 \xff"}, "mcp-session-id": {"s"}, "x-sep": {"\u2029"}},
				},
			},
			Result: policy.Decision{Action: policy.Ask, Reasons: []policy.Reason{{ID: "a", Message: "needs \"a\" human"}, {Message: "no id"}}},
		},
		&Audit{CallID: "c3", Outcome: "approved", DecidedBy: "ann", Comment: "fine", Via: "api", At: at, Tool: "write_note", Upstream: "notes", Subject: "agent"},
	}
}

// TestDirectMatchesPlugin: an event written directly is the record OPA's
// console decision logger writes for it, field for field.
func TestDirectMatchesPlugin(t *testing.T) {
	for _, args := range []bool{false, true} {
		e := testEngine(t, map[string]string{"p.rego": "package toolgate\n\nallow if input.tool.name == \"read_file\"\n"})
		var viaPlugin, direct, lines testkit.Buffer
		lp := testLogger(t, e, Options{Arguments: args, Console: slog.NewJSONHandler(&viaPlugin, nil)})
		ld := testLogger(t, e, Options{Arguments: args, Console: slog.NewJSONHandler(&direct, nil)})
		// The direct path's own lines, written where the handler writes.
		ll := testLogger(t, e, Options{Arguments: args, Console: slog.NewJSONHandler(&lines, nil), ConsoleWriter: &lines})
		ctx := t.Context()
		for _, ev := range events(e) {
			if err := lp.sync(ctx); err != nil {
				t.Fatal(err)
			}
			lp.direct = false // through the plugin
			lp.log(ctx, ev)
			ld.log(ctx, ev)
			ll.log(ctx, ev)
			ll.flush(ctx)
			if !ld.direct {
				t.Fatal("a policy without mask or drop rules does not take the direct path")
			}
		}
		got, want := consoleLines(t, &direct), consoleLines(t, &viaPlugin)
		if len(want) != 4 {
			t.Fatalf("the plugin wrote %d events, want 4", len(want))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("arguments %v: direct events differ from the plugin's (-plugin +direct):\n%s", args, diff)
		}
		if diff := cmp.Diff(want, consoleLines(t, &lines)); diff != "" {
			t.Errorf("arguments %v: the direct lines differ from the plugin's events (-plugin +lines):\n%s", args, diff)
		}
	}
}

// TestDirectOnlyWhenPlain: mask or drop rules, a mask as data, or a log
// service send every event through the plugin.
func TestDirectOnlyWhenPlain(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		opts  Options
		want  bool
	}{
		{"plain", nil, Options{}, true},
		{"mask rule", map[string]string{"m.rego": "package system.log\n\nmask contains \"/input/x\"\n"}, Options{}, false},
		{"drop rule", map[string]string{"d.rego": "package system.log\n\ndrop if input.path == \"x\"\n"}, Options{}, false},
		{"mask as data", map[string]string{"system/log/data.json": `{"mask": ["/input/x"]}`}, Options{}, false},
		{"mask elsewhere", map[string]string{"m.rego": "package audit\n\nmask contains \"/input/x\"\n"}, Options{MaskDecision: "audit/mask"}, false},
		{"service", nil, Options{Service: Service{URL: "http://127.0.0.1:1", MinDelay: time.Hour, MaxDelay: time.Hour}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Console = slog.DiscardHandler
			l := testLogger(t, testEngine(t, tc.files), tc.opts)
			if err := l.sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if l.direct != tc.want {
				t.Errorf("direct = %v, want %v", l.direct, tc.want)
			}
		})
	}
}

// BenchmarkLogDecision is the worker's cost of one decision event, written
// to the console as a line of its own, directly through the JSON handler,
// and through the plugin.
func BenchmarkLogDecision(b *testing.B) {
	for _, bc := range []struct {
		name         string
		direct, line bool
	}{{"line", true, true}, {"direct", true, false}, {"plugin", false, false}} {
		b.Run(bc.name, func(b *testing.B) {
			direct := bc.direct
			e := testEngine(b, nil)
			var sink testkit.Buffer
			opts := Options{Console: slog.NewJSONHandler(&sink, nil)}
			if bc.line {
				opts.ConsoleWriter = &sink
			}
			l := testLogger(b, e, opts)
			ctx := context.Background()
			if err := l.sync(ctx); err != nil {
				b.Fatal(err)
			}
			ev := events(e)[0]
			b.ReportAllocs()
			for b.Loop() {
				l.direct = direct
				l.log(ctx, ev)
				l.flush(ctx)
				sink.Reset()
			}
		})
	}
}

// writeCounter counts the writes it takes and fails them when told to.
type writeCounter struct {
	testkit.Buffer
	writes int
	fail   bool
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	if w.fail {
		return 0, errors.New("disk full")
	}
	return w.Buffer.Write(p)
}

// TestLinesWrittenInBatches: the events the worker takes together,
// decisions and approvals' audit records alike, reach the console in one
// write, every line whole; a failed write counts every line it held as an
// error.
func TestLinesWrittenInBatches(t *testing.T) {
	e := testEngine(t, nil)
	w := &writeCounter{}
	l := testLogger(t, e, Options{Console: slog.NewJSONHandler(w, nil), ConsoleWriter: w})
	ctx := t.Context()
	evs := events(e)
	if _, ok := evs[len(evs)-1].(*Audit); !ok {
		t.Fatal("the events end with an audit record")
	}
	for _, ev := range evs {
		l.log(ctx, ev)
	}
	if w.writes != 0 {
		t.Fatalf("%d writes before the batch ended", w.writes)
	}
	l.flush(ctx)
	if got := consoleLines(t, &w.Buffer); w.writes != 1 || len(got) != len(evs) {
		t.Fatalf("%d writes, %d lines; want 1 write of %d lines", w.writes, len(got), len(evs))
	}
	w.fail = true
	before := l.counts.errs.Load()
	for _, ev := range evs {
		l.log(ctx, ev)
	}
	l.flush(ctx)
	if got := l.counts.errs.Load() - before; got != uint64(len(evs)) {
		t.Errorf("a failed write counted %d errors, want %d", got, len(evs))
	}
}

// TestAuditWrittenAsItsRecord: an approval's audit event written from its
// fields (writeAudit) is, byte for byte but the time it was written, the
// record writeDirect writes for Audit.info, as a record and as a line.
func TestAuditWrittenAsItsRecord(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 2, 3, 5, time.UTC)
	audits := []*Audit{
		{CallID: "c3", Outcome: "approved", DecidedBy: "ann", Comment: "fine", Via: "api", At: at, Tool: "write_note", Upstream: "notes", Subject: "agent"},
		{
			CallID: "c4", Outcome: "rejected", DecidedBy: "b\"o<b>&", Comment: "tab\tnl\n<&>\u2028\u2029 caf\xe9 \x01", Via: "oidc",
			At: at.In(time.FixedZone("x", 3600)), Groups: []string{"sre", "</script>"}, Progress: "1 of 2 approvals", Partial: true,
			Tool: "t\u00e9", Upstream: "u", Subject: "s&", RequestedBy: "127.0.0.1:5000",
		},
		{CallID: "c5", Outcome: "approved", Groups: []string{}},
	}
	e := testEngine(t, map[string]string{"p.rego": "package toolgate\n\nallow := true\n"})
	ctx := t.Context()
	for _, lines := range []bool{false, true} {
		var viaInfo, direct testkit.Buffer
		opts := func(b *testkit.Buffer) Options {
			o := Options{Console: slog.NewJSONHandler(b, nil), Labels: map[string]string{"env": "a&b<c>", "team": "x"}}
			if lines {
				o.ConsoleWriter = b
			}
			return o
		}
		li, ld := testLogger(t, e, opts(&viaInfo)), testLogger(t, e, opts(&direct))
		for _, l := range []*Logger{li, ld} {
			if err := l.sync(ctx); err != nil {
				t.Fatal(err)
			}
			if !l.direct {
				t.Fatal("a policy without mask or drop rules does not take the direct path")
			}
		}
		for _, a := range audits {
			info, err := a.info(&li.opts)
			if err != nil {
				t.Fatal(err)
			}
			li.writeDirect(ctx, info)
			li.flush(ctx)
			ld.writeAudit(ctx, a)
			ld.flush(ctx)
		}
		untimed := regexp.MustCompile(`(?m)^\{"time":"[^"]*",`)
		want := untimed.ReplaceAllString(viaInfo.String(), "{")
		got := untimed.ReplaceAllString(direct.String(), "{")
		if stdstrings.Count(want, "\n") != len(audits) {
			t.Fatalf("lines %v: writeDirect wrote %q, want %d lines", lines, want, len(audits))
		}
		if got != want {
			t.Errorf("lines %v: writeAudit wrote\n%s\nwant (writeDirect of Audit.info)\n%s", lines, got, want)
		}
	}
}
