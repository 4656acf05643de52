package policy

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	shipped "github.com/toolgate/toolgate/rego"
)

// readsPolicies are user policies with every shape of reference into the
// input a policy can make, each with what analyseInputReads must find
// ("*" for everything; otherwise top-level keys, "k.s" for one
// second-level key). The shipped library is loaded beside each and reads
// tool, kind, phase, mode (a listed tool's ask rows under dont_ask),
// mcp.method and mcp.params (a subscriptions/listen's).
var readsPolicies = []struct {
	name, rego string
	want       []string
}{
	{
		"one argument", `deny contains "etc" if startswith(input.tool.arguments.path, "/etc")`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params"},
	},
	{
		"a header", `deny contains "h" if input.http.headers["x-evil"][0] == "1"`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "http.headers"},
	},
	{
		"http method and path", `ask contains "p" if { input.http.method == "POST"; startswith(input.http.path, "/tools/write") }`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "http.method", "http.path"},
	},
	{
		"subject by import", "import input.subject as s\nallow contains \"g\" if \"ops\" in s.groups",
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "subject"},
	},
	{
		"claims through a function", `f(c) := c.iss
deny contains "iss" if f(input.subject.claims) == "https://evil.example"`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "subject.claims"},
	},
	{
		"mode and time", `read_only contains "plan" if { input.mode == "plan"; input.time != "" }`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "time"},
	},
	{
		"a ref inside a data ref", `allow contains "d" if data.allowed[input.upstream.name]`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "upstream.name"},
	},
	{"a variable key", `deny contains k if { some k; input[k] == "mcp" }`, []string{"*"}},
	{
		"a variable second key", `deny contains k if { some k; input.http[k] == "GET" }`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "http"},
	},
	{
		"object.get on input", `deny contains "x" if object.get(input, "call_id", "") == "c1"`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "call_id"},
	},
	{"object.get with a variable path", `deny contains "x" if { some k in ["call_id"]; object.get(input, k, "") == "c1" }`, []string{"*"}},
	{"the whole input", `deny contains "x" if json.marshal(input) == ""`, []string{"*"}},
	{"import input", "import input as i\ndeny contains \"x\" if i.kind == \"http\"", []string{"*"}},
	{
		"a string key", `deny contains "x" if input["subject"]["id"] == "anon"`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "subject.id"},
	},
	{"the whole input, walked", `deny contains "w" if { walk(input, [p, v]); v == "/etc/passwd" }`, []string{"*"}},
	{"with input as", `deny contains "w" if { allow_x with input as {"a": 1} }
allow_x if input.a == 1`, []string{"*"}},
	{
		"a comprehension", `deny contains "many" if count([h | some h, _ in input.http.query]) > 3`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "http.query"},
	},
	{
		"every", `allow contains "all-docs" if { every a in input.tool.arguments { startswith(a, "docs/") } }`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params"},
	},
	// A reference whose head is a call, an array or a comprehension, and
	// a rule head's reference: each reads input too.
	{
		"object.get's result, referenced", `deny contains "x" if object.get(input, "subject", {}).id == "anon"`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "subject"},
	},
	{"a call's result, referenced", `deny contains "x" if json.unmarshal(json.marshal(input)).subject.id == "anon"`, []string{"*"}},
	{"an array, referenced", `deny contains "x" if [input][0].subject.id == "anon"`, []string{"*"}},
	{
		"a comprehension, referenced", `deny contains "x" if [s | s := input.subject][0].id == "anon"`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "subject"},
	},
	{
		"a rule head's reference", "who.is[input.subject.id] := true\ndeny contains \"x\" if who.is.anon",
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "subject.id"},
	},
	{
		"a multi-value rule head's reference", "who.is[input.http.method] contains \"m\"\ndeny contains \"x\" if who.is.GET",
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "http.method"},
	},
	{"mcp id", `deny contains "id" if input.mcp.id == 7`, []string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params", "mcp.id"}},
	{
		"mcp params", `deny contains "meta path" if startswith(input.mcp.params._meta["acme/path"], "/etc/")`,
		[]string{"tool", "kind", "phase", "mode", "mcp.method", "mcp.params"},
	},
}

// TestAnalyseInputReads: the analysis finds what each policy reads and
// gives up (reads everything) where it cannot bound a reference.
func TestAnalyseInputReads(t *testing.T) {
	for _, p := range readsPolicies {
		t.Run(p.name, func(t *testing.T) {
			e := readsEngine(t, p.rego)
			r := e.current.Load().reads
			var got []string
			if r.all {
				got = []string{"*"}
			} else {
				for k, subs := range r.keys {
					if subs == nil {
						got = append(got, k)
					}
					for s := range subs {
						got = append(got, k+"."+s)
					}
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(p.want))
			if !slices.Equal(got, want) {
				t.Errorf("reads %v, want %v", got, want)
			}
		})
	}
}

// TestInputReadsDecideAlike: for every policy above and a set of inputs
// that make their rules fire and not fire, the decision query gives the
// same bindings on the input built for the policy as on the whole input.
func TestInputReadsDecideAlike(t *testing.T) {
	ctx := context.Background()
	for _, p := range readsPolicies {
		t.Run(p.name, func(t *testing.T) {
			e := readsEngine(t, p.rego)
			pr := e.current.Load()
			for name, in := range readsInputs() {
				full, err := in.Value()
				if err != nil {
					t.Fatal(err)
				}
				pruned, err := in.valueFor(pr.reads)
				if err != nil {
					t.Fatal(err)
				}
				queries := map[string]*rego.PreparedEvalQuery{"full": &pr.full}
				if pr.user != nil {
					queries["user"] = pr.user
				}
				for qn, q := range queries {
					a, err := eval(ctx, time.Minute, q, full)
					if err != nil {
						t.Fatalf("%s, %s, whole input: %v", name, qn, err)
					}
					b, err := eval(ctx, time.Minute, q, pruned)
					if err != nil {
						t.Fatalf("%s, %s, built input: %v", name, qn, err)
					}
					ja, _ := json.Marshal(a)
					jb, _ := json.Marshal(b)
					if string(ja) != string(jb) {
						t.Errorf("%s, %s query:\nwhole input  %s\nbuilt input  %s", name, qn, ja, jb)
					}
				}
				// And the engine's own decision is the whole input's.
				d, err := e.Decide(ctx, in)
				w, werr := e.DecideValue(ctx, full)
				if (err == nil) != (werr == nil) || d.Action != w.Action || !slices.Equal(d.RuleIDs(), w.RuleIDs()) {
					t.Errorf("%s: Decide = %v %v (%v), on the whole input %v %v (%v)", name, d.Action, d.RuleIDs(), err, w.Action, w.RuleIDs(), werr)
				}
			}
		})
	}
}

// TestInputReadsPrune: a policy that reads one argument gets no headers,
// query or claims built, which is the point of the analysis.
func TestInputReadsPrune(t *testing.T) {
	e := readsEngine(t, readsPolicies[0].rego)
	v, err := readsInputs()["rest"].valueFor(e.current.Load().reads)
	if err != nil {
		t.Fatal(err)
	}
	obj := v.(ast.Object)
	keys := []string{}
	for _, k := range obj.Keys() {
		keys = append(keys, string(k.Value.(ast.String)))
	}
	slices.Sort(keys)
	if want := []string{"kind", "mode", "phase", "tool"}; !slices.Equal(keys, want) {
		t.Errorf("built input has %v, want %v", keys, want)
	}
}

func readsEngine(t *testing.T, src string) *Engine {
	t.Helper()
	rules := "rules:\n  - {id: r1, effect: allow, tool: read_file, target: \"docs/**\"}\n  - {id: r2, effect: ask, tool: write_note, target: \"*\"}\n"
	dir := t.TempDir()
	path := dir + "/rules.yaml"
	if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"p.rego":    {Data: []byte("package toolgate\n\n" + src + "\n")},
		"data.json": {Data: []byte(`{"allowed": {"files": true}}`)},
	}
	e, err := New(context.Background(), Options{Library: shipped.Library(), NativeLibrary: true, Policies: fsys, RulesFile: path})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// readsInputs are calls that make the policies above fire and not fire.
func readsInputs() map[string]*Input {
	base := func() *Input {
		return &Input{
			CallID: "c1", Kind: KindREST, Time: time.Date(2026, 12, 2, 3, 4, 5, 6, time.UTC),
			Upstream: Upstream{Name: "files", Protocol: "rest"},
			Subject: Subject{
				ID: "agent-42", Groups: []string{"agents", "ops"}, Authenticated: true,
				Claims: map[string]any{"iss": "https://evil.example", "n": json.Number("7")},
			},
			Tool: NewTool("read_file", map[string]any{"path": "docs/a.md"}, DefaultTargetArgs),
			HTTP: HTTP{
				Method: "POST", Path: "/tools/read_file",
				Query:   map[string][]string{"a": {"1"}, "b": {"2"}, "c": {"3"}, "d": {"4"}},
				Headers: map[string][]string{"x-evil": {"1"}, "content-type": {"application/json"}},
			},
		}
	}
	etc := base()
	etc.Tool = NewTool("read_file", map[string]any{"path": "/etc/passwd"}, DefaultTargetArgs)
	write := base()
	write.Tool = NewTool("write_note", map[string]any{"path": "notes/a"}, DefaultTargetArgs)
	write.HTTP = HTTP{Method: "POST", Path: "/tools/write_note"}
	write.Subject = Subject{ID: "anon"}
	mcp := base()
	mcp.Kind, mcp.Mode = KindMCP, ModePlan
	mcp.MCP = &MCP{Method: "tools/call", ID: json.Number("7"), ProtocolVersion: "2025-11-25", Params: map[string]any{"_meta": map[string]any{"acme/path": "/etc/passwd"}}}
	mcp.Upstream = Upstream{Name: "other", Protocol: "mcp"}
	get := &Input{CallID: "c2", Kind: KindHTTP, HTTP: HTTP{Method: "GET", Path: "/health"}}
	return map[string]*Input{"rest": base(), "etc": etc, "write": write, "mcp": mcp, "get": get}
}
