package decisionlog_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/plugins/logs"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
	shipped "github.com/toolgate/toolgate/rego"
)

// testPolicy allows login, asks for publish and denies rm.
const testPolicy = `package toolgate

allow contains "login is fine" if input.tool.name == "login"

ask contains {"id": "t.publish", "message": "publishing needs a human"} if input.tool.name == "publish"

deny contains {"id": "t.no_rm", "message": "nothing is removed"} if input.tool.name == "rm"
`

// testMask is a user's mask policy in OPA's two forms: a JSON pointer to
// erase, and an upsert that overwrites a value.
const testMask = `package system.log

mask contains "/input/tool/arguments/password"

mask contains {"op": "upsert", "path": "/input/tool/arguments/token", "value": "***"} if {
	input.input.tool.arguments.token
}
`

func newEngine(t testing.TB, files map[string]string) *policy.Engine {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	e, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), Policies: fsys})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// newLogger starts a Logger for e with console output into a buffer
// (unless opts.Console is already set) and closes it at the end of the test.
func newLogger(t testing.TB, e *policy.Engine, opts decisionlog.Options) (*decisionlog.Logger, *testkit.Buffer) {
	t.Helper()
	console := &testkit.Buffer{}
	opts.Policy = e.Compiled
	if opts.InstanceID == "" {
		opts.InstanceID = "instance-1"
	}
	if opts.Console == nil && opts.Service.URL == "" {
		opts.Console = slog.NewJSONHandler(console, nil)
	}
	l, err := decisionlog.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l, console
}

// adapter is what cmd/toolgate wires: the proxy's records into the Logger.
type adapter struct {
	l *decisionlog.Logger
	e *policy.Engine
}

func (a adapter) LogDecision(ctx context.Context, r proxy.DecisionRecord) {
	a.l.LogDecision(ctx, decisionlog.Decision{
		ID: r.CallID, Time: r.Time, Input: r.Input, Result: r.Decision, Err: r.Err, Revision: a.e.Revision(),
		Elapsed: r.Elapsed, RequestedBy: r.RemoteAddr, TraceID: r.TraceID, SpanID: r.SpanID,
		HeaderBytes: r.HeaderBytes, ArgumentBytes: r.ArgumentBytes,
	})
}

// newProxy serves a real proxy in front of a real upstream, with call IDs
// call-1, call-2, ... and the decision log dl.
func newProxy(t testing.TB, e *policy.Engine, dl proxy.DecisionLogger, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	u, _ := url.Parse(testkit.NewUpstream(t, nil).URL)
	auth, err := identity.New(identity.Config{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	s, err := proxy.New(proxy.Config{
		Upstreams: []proxy.Upstream{{Name: "tools", URL: u}}, Decider: e, Auth: auth, DecisionLog: dl,
		NewCallID: func() string { return "call-" + strconv.FormatInt(n.Add(1), 10) },
	})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func call(t testing.TB, base, tool, body string) int {
	t.Helper()
	res, err := http.Post(base+"/tools/"+tool, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// consoleEvents reads the console records as OPA decision-log events. Each
// record is slog's time, level and msg around the fields OPA's console
// logger writes (with "type"); what is left must decode into OPA's own
// EventV1 with no unknown field.
func consoleEvents(t testing.TB, out string) []logs.EventV1 {
	t.Helper()
	var events []logs.EventV1
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("console line is not JSON: %v\n%s", err, sc.Text())
		}
		if string(rec["msg"]) != `"Decision Log"` || string(rec["type"]) != `"openpolicyagent.org/decision_logs"` {
			t.Fatalf("not a decision-log record: %s", sc.Text())
		}
		for _, k := range []string{"time", "level", "msg", "type"} {
			delete(rec, k)
		}
		b, _ := json.Marshal(rec)
		events = append(events, decodeEvent(t, b))
	}
	return events
}

func decodeEvent(t testing.TB, b []byte) logs.EventV1 {
	t.Helper()
	var ev logs.EventV1
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		t.Fatalf("not OPA's decision-log event shape: %v\n%s", err, b)
	}
	return ev
}

// field reads a value at a path of nested JSON objects.
func field(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// mutableFS is a policy directory a test can change between reloads.
type mutableFS struct {
	mu    sync.Mutex
	files map[string]string
}

func newMutableFS(files map[string]string) *mutableFS {
	m := &mutableFS{files: map[string]string{}}
	maps.Copy(m.files, files)
	return m
}

func (m *mutableFS) set(name, src string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[name] = src
}

func (m *mutableFS) Open(name string) (fs.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	snap := fstest.MapFS{}
	for k, v := range m.files {
		snap[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return snap.Open(name)
}

func newEngineFS(t testing.TB, fsys fs.FS) *policy.Engine {
	t.Helper()
	e, err := policy.New(context.Background(), policy.Options{Library: shipped.Library(), Policies: fsys})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
