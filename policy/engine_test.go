package policy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// seedRules is the example rules table of docs/policy.md plus the exact-name case.
var seedRules = []string{
	`{id: r1, effect: allow, tool: Read, target: "*"}`,
	`{id: r2, effect: deny, tool: Read, target: secrets.txt}`,
	`{id: r3, effect: ask, tool: Write, target: "*"}`,
	`{id: r4, effect: allow, tool: Edit, target: notes.txt}`,
}

func writeRules(t testing.TB, dir string, rows []string) string {
	t.Helper()
	path := filepath.Join(dir, "rules.yaml")
	var src strings.Builder
	src.WriteString("rules:\n")
	for _, r := range rows {
		src.WriteString("  - " + r + "\n")
	}
	if err := os.WriteFile(path, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newEngine(t testing.TB, opts policy.Options) *policy.Engine {
	t.Helper()
	if opts.Library == nil {
		// The shipped library as toolgate runs it: evaluated in Go where
		// the policy allows (TestNativeMatchesRego holds the two forms
		// together).
		opts.Library = shipped.Library()
		opts.NativeLibrary = true
	}
	e, err := policy.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func call(tool, target string) *policy.Input {
	args := map[string]any{}
	if target != "" {
		args["path"] = target
	}
	return &policy.Input{
		CallID:   "test",
		Kind:     policy.KindREST,
		Upstream: policy.Upstream{Name: "files", Protocol: "rest"},
		Subject:  policy.Subject{ID: "agent-42", Authenticated: true},
		Tool:     policy.NewTool(tool, args, policy.DefaultTargetArgs),
		HTTP:     policy.HTTP{Method: "POST", Path: "/tools/" + tool},
	}
}

type outcome struct {
	Action  string
	RuleIDs []string
}

func decide(t *testing.T, e *policy.Engine, in *policy.Input) outcome {
	t.Helper()
	d, err := e.Decide(t.Context(), in)
	if err != nil {
		t.Fatalf("Decide(%s %s): %v", in.Tool.Name, in.Tool.Target, err)
	}
	return outcome{d.Action.String(), d.RuleIDs()}
}

// TestSeedScenario is the seed scenario of the rules table: precedence
// regardless of row order, default deny, exact names.
func TestSeedScenario(t *testing.T) {
	cases := []struct {
		name         string
		tool, target string
		want         outcome
	}{
		{"read allowed by star", "Read", "readme.txt", outcome{"allow", []string{"r1"}}},
		{"deny wins over matching allow", "Read", "secrets.txt", outcome{"deny", []string{"r2"}}},
		{"write asks", "Write", "notes/today.txt", outcome{"ask", []string{"r3"}}},
		{"write without target asks", "Write", "", outcome{"ask", []string{"r3"}}},
		{"tool without rule denied", "Delete", "readme.txt", outcome{"deny", []string{"toolgate.default"}}},
		{"exact name matches itself", "Edit", "notes.txt", outcome{"allow", []string{"r4"}}},
		{"exact name never matches longer", "Edit", "notes.txt.bak", outcome{"deny", []string{"toolgate.default"}}},
		{"normalised target matches", "Read", "./secrets.txt", outcome{"deny", []string{"r2"}}},
		{"escaping target denied", "Read", "../secrets.txt", outcome{"deny", []string{"toolgate.target_escapes"}}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 5 {
		rows := append([]string(nil), seedRules...)
		rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), rows)})
		for _, tc := range cases {
			t.Run(fmt.Sprintf("order%d/%s", round, tc.name), func(t *testing.T) {
				got := decide(t, e, call(tc.tool, tc.target))
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("rows %v: decision (-want +got):\n%s", rows, diff)
				}
			})
		}
	}
}

func TestDeniedReasonNamesRule(t *testing.T) {
	e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), seedRules)})
	d, err := e.Decide(t.Context(), call("Read", "secrets.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "rules table r2: deny Read on secrets.txt"; len(d.Messages()) != 1 || d.Messages()[0] != want {
		t.Errorf("reasons = %q, want [%q]", d.Messages(), want)
	}
}

// TestRuleShapes checks how hand-written rules of every shape are read,
// and that any malformed shape fails closed.
func TestRuleShapes(t *testing.T) {
	cases := []struct {
		name    string
		rego    string
		want    outcome
		wantErr string
	}{
		{"allow if", `allow if input.tool.name == "Read"`, outcome{"allow", []string{"toolgate.allow"}}, ""},
		{"allow contains string", `allow contains "reading is fine" if input.tool.name == "Read"`, outcome{"allow", []string{}}, ""},
		{"deny object beats allow", `allow if true
deny contains {"id": "d1", "message": "no"} if true`, outcome{"deny", []string{"d1"}}, ""},
		{"ask beats allow", `allow if true
ask contains {"id": "a1", "message": "check"} if true`, outcome{"ask", []string{"a1"}}, ""},
		{"deny if false-default", `default deny := false
allow if true`, outcome{"allow", []string{"toolgate.allow"}}, ""},
		{"nothing fired", `allow if input.tool.name == "Other"`, outcome{"deny", []string{"toolgate.default"}}, ""},
		// Shapes the compiler cannot type are refused at the decision
		// (TestNewRefusesMistypedRules: those it can, at load).
		{"deny from input, a string", `deny := input.tool.name`, outcome{}, "must be a boolean or a set"},
		{"reason object from input, no message", `allow contains r if r := input.tool`, outcome{}, `needs a string "message"`},
		{"reason from input, a number", `allow contains r if r := object.get({"n": 7}, input.tool.name, 7)`, outcome{}, "must be a string or an object"},
		{"builtin error fails closed", `deny contains "big" if to_number(input.tool.name) > 3
allow if true`, outcome{}, "evaluating"},
		{"conflict fails closed", `x := 1 if true
x := 2 if true
allow if x == 1`, outcome{}, "evaluating"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, policy.Options{Policies: fstest.MapFS{
				"p.rego": {Data: []byte("package toolgate\n\n" + tc.rego + "\n")},
			}})
			d, err := e.Decide(t.Context(), call("Read", "x"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				if d.Action != policy.Deny {
					t.Fatalf("a policy error gave %v, want deny", d.Action)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, outcome{d.Action.String(), d.RuleIDs()}); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultAsk(t *testing.T) {
	e := newEngine(t, policy.Options{Default: policy.Ask, RulesFile: writeRules(t, t.TempDir(), seedRules)})
	if got := decide(t, e, call("Delete", "x")); got.Action != "ask" {
		t.Errorf("nothing fired with default ask: %v, want ask", got)
	}
	if got := decide(t, e, call("Read", "secrets.txt")); got.Action != "deny" {
		t.Errorf("a deny with default ask: %v, want deny", got)
	}
}

// TestApprovers checks that an ask reason's approvers reach the decision,
// from Rego and from a rules-table row, and that approvers nobody could
// satisfy deny the call as a policy error.
func TestApprovers(t *testing.T) {
	dir := t.TempDir()
	rows := append(append([]string(nil), seedRules...),
		`{id: dep, effect: ask, tool: Deploy, target: "*", approvers: {groups: [sre, security], min: 2}}`)
	src := `package toolgate
ask contains {"id": "rego", "message": "m", "approvers": {"subjects": ["alice"], "requester": true}} if input.tool.name == "Drop"
ask contains {"id": "bad", "message": "m", "approvers": {"groups": ["sre"], "min": 1.5}} if input.tool.name == "Bad"
ask contains {"id": "none", "message": "m", "approvers": {}} if input.tool.name == "Empty"
ask contains {"id": "extra", "message": "m", "approvers": {"group": ["sre"]}} if input.tool.name == "Typo"
`
	for _, native := range []bool{false, true} {
		e := newEngine(t, policy.Options{
			Library: shipped.Library(), RulesFile: writeRules(t, dir, rows), NativeLibrary: native,
			Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}},
		})
		d, err := e.Decide(t.Context(), call("Deploy", "x"))
		if err != nil || d.Action != policy.Ask || len(d.Reasons) != 1 {
			t.Fatalf("native %v: Deploy = %+v, %v", native, d, err)
		}
		want := policy.Approvers{Groups: []string{"sre", "security"}, Min: 2}
		if a := d.Reasons[0].Approvers; a == nil || !slices.Equal(a.Groups, want.Groups) || a.Min != 2 || a.Need() != 2 {
			t.Errorf("native %v: table row's approvers = %+v, want %+v", native, a, want)
		}
		d, err = e.Decide(t.Context(), call("Drop", "x"))
		if a := d.Reasons[0].Approvers; err != nil || a == nil || !slices.Equal(a.Subjects, []string{"alice"}) || !a.Requester || a.Need() != 1 {
			t.Errorf("native %v: Rego reason's approvers = %+v, %v", native, a, err)
		}
		for _, tool := range []string{"Bad", "Empty", "Typo"} {
			if d, err := e.Decide(t.Context(), call(tool, "x")); err == nil || d.Action != policy.Deny {
				t.Errorf("native %v: %s = %+v, %v; want a policy error (deny)", native, tool, d, err)
			}
		}
	}
}

func TestModes(t *testing.T) {
	rows := append(append([]string(nil), seedRules...),
		`{id: ro, effect: allow, tool: List, target: "*", read_only: true}`,
		`{id: must, effect: ask, tool: Deploy, target: "*", must_ask: true}`)
	e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), rows)})
	cases := []struct {
		mode, tool, target, want string
	}{
		{"default", "Write", "x", "ask"},
		{"dont_ask", "Write", "x", "deny"},
		{"dont_ask", "Read", "x", "allow"},
		{"bypass", "Write", "x", "allow"},
		{"bypass", "Deploy", "x", "ask"},
		{"bypass", "Read", "secrets.txt", "deny"},
		{"plan", "Read", "x", "deny"},
		{"plan", "List", "x", "allow"},
		{"plan", "Write", "x", "deny"},
	}
	for _, tc := range cases {
		t.Run(tc.mode+"/"+tc.tool, func(t *testing.T) {
			in := call(tc.tool, tc.target)
			in.Mode = tc.mode
			if got := decide(t, e, in); got.Action != tc.want {
				t.Errorf("mode %s, %s %s: %v, want %s", tc.mode, tc.tool, tc.target, got, tc.want)
			}
		})
	}
	in := call("Read", "x")
	in.Mode = "yolo"
	if d, err := e.Decide(t.Context(), in); err == nil || d.Action != policy.Deny {
		t.Errorf("unknown mode: %v, %v; want a deny and an error", d.Action, err)
	}
}

func TestNewRefusesBrokenPolicy(t *testing.T) {
	cases := map[string]fstest.MapFS{
		"parse error":   {"p.rego": {Data: []byte("package toolgate\nallow if {")}},
		"compile error": {"p.rego": {Data: []byte("package toolgate\nallow if undefined_fn(1)")}},
		"bad data":      {"data.json": {Data: []byte("{")}},
	}
	for name, fsys := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), Policies: fsys}); err == nil {
				t.Fatal("New accepted a broken policy")
			}
		})
	}
	t.Run("bad rules file", func(t *testing.T) {
		path := writeRules(t, t.TempDir(), []string{`{id: a, effect: permit, tool: x, target: "*"}`})
		_, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), RulesFile: path})
		if err == nil || !strings.Contains(err.Error(), "effect") {
			t.Fatalf("err = %v, want one naming the effect", err)
		}
	})
	t.Run("rules twice", func(t *testing.T) {
		path := writeRules(t, t.TempDir(), seedRules)
		fsys := fstest.MapFS{"toolgate/data.json": {Data: []byte(`{"rules": []}`)}}
		if _, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), Policies: fsys, RulesFile: path}); err == nil {
			t.Fatal("New accepted data.toolgate.rules from two places")
		}
	})
}

// TestMistypedRulesDeny: a decision rule whose type can never give a
// decision is named at load (Misshapen: the rule and where it is), and the
// policy loads; every call the rule reaches is denied as a policy error,
// an allow of the wrong shape included.
func TestMistypedRulesDeny(t *testing.T) {
	cases := []struct {
		name string
		fsys fstest.MapFS
		want string // "": nothing misshapen
	}{
		{"allow a number", module("allow := 5"), "p.rego:2: rule allow must be a boolean or a set of reasons, not a number"},
		{"deny a number", module("deny := 5"), "p.rego:2: rule deny must be a boolean or a set of reasons, not a number"},
		{"ask a string", module(`ask := "yes"`), "rule ask must be a boolean or a set of reasons, not a string"},
		{"allow an object", module(`allow[x] := true if some x in ["a"]`), "rule allow must be a boolean or a set of reasons, not an object"},
		{"read_only a number", module("read_only := 1"), "rule read_only must be a boolean or a set of reasons, not a number"},
		{"a boolean or a number", module("deny := 5 if input.tool.name == \"Read\"\ndeny if input.tool.name == \"X\""), "rule deny must be a boolean or a set of reasons"},
		{"reasons of numbers", module("deny contains 7 if true"), "but a reason is a number, not a string or an object"},
		{"reason without message", module(`deny contains {"id": "x"} if true`), `but a reason object has no "message"`},
		{"reason id a number", module(`ask contains {"id": 5, "message": "m"} if true`), `but a reason's "id" is a number, not a string`},
		{"reason must_ask a string", module(`ask contains {"message": "m", "must_ask": "yes"} if true`), `reason's "must_ask" is a string, not a boolean`},
		{"reason approvers a string", module(`ask contains {"message": "m", "approvers": "sre"} if true`), `reason's "approvers" is a string, not an object`},
		{"lib rule of reasons of numbers", fstest.MapFS{"p.rego": {Data: []byte("package toolgate.lib\nask contains 3 if input.tool.name == \"Read\"\n")}}, "rule ask must be a boolean or a set of reasons, but a reason is a number"},
		{"data file deny a number", fstest.MapFS{"toolgate/data.json": {Data: []byte(`{"deny": 5}`)}}, "data.toolgate.deny (a data file): rule deny must be a boolean or a set of reasons"},
		{"two at once", module("deny := 5\nallow := 6"), "2 rules cannot decide a call"},

		{"boolean", module("deny if input.a"), ""},
		{"default false", module("default deny := false\ndeny if input.a"), ""},
		{"set of strings", module(`deny contains "no" if input.a`), ""},
		{"set of reason objects", module(`ask contains {"id": "a", "message": "m", "must_ask": true} if input.a`), ""},
		{"reason with approvers", module(`ask contains {"id": "a", "message": "m", "approvers": {"groups": ["sre"], "min": 2}} if input.a`), ""},
		{"array of strings", module(`deny := ["no"] if input.a`), ""},
		{"from input", module("deny := input.a"), ""},
		{"object from input", module("deny contains r if some r in input.reasons"), ""},
		{"other rules any type", module("limit := 5\nallow if count(input.tool.name) < limit"), ""},
		{"data file deny a boolean", fstest.MapFS{"toolgate/data.json": {Data: []byte(`{"deny": false}`)}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), NativeLibrary: true, Policies: tc.fsys})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got := e.Misshapen()
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("Misshapen: %v, want none", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Fatalf("Misshapen: %v, want one containing %q", got, tc.want)
			case tc.want == "":
				return
			}
			d, err := e.Decide(t.Context(), call("Read", "x"))
			if err == nil || d.Action != policy.Deny || len(d.Reasons) != 1 || d.Reasons[0].ID != "toolgate.policy_error" {
				t.Fatalf("a call the rule reaches: %v %v, err %v; want a policy error's deny", d.Action, d.RuleIDs(), err)
			}
		})
	}
}

// module is a policy of one module, package toolgate, with src as its body.
func module(src string) fstest.MapFS {
	return fstest.MapFS{"p.rego": {Data: []byte("package toolgate\n" + src + "\n")}}
}

func TestDataFilesAreServed(t *testing.T) {
	e := newEngine(t, policy.Options{Policies: fstest.MapFS{
		"p.rego":              {Data: []byte("package toolgate\nallow if input.tool.name in data.tools.readers")},
		"tools/data.yaml":     {Data: []byte("readers: [Read]\n")},
		"p_test.rego":         {Data: []byte("package toolgate_test\ntest_x if false")},
		".hidden/broken.rego": {Data: []byte("not rego")},
	}})
	if got := decide(t, e, call("Read", "x")); got.Action != "allow" {
		t.Errorf("allow from data file: %v", got)
	}
}

func TestReloadKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	write := func(src string) {
		if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("package toolgate\nallow if true\n")
	var reloads []error
	e := newEngine(t, policy.Options{Policies: os.DirFS(dir), OnReload: func(_ string, err error) { reloads = append(reloads, err) }})
	rev := e.Revision()
	write("package toolgate\nallow if {\n")
	if err := e.Reload(t.Context()); err == nil {
		t.Fatal("Reload accepted a broken policy")
	}
	if got := decide(t, e, call("Read", "x")); got.Action != "allow" || e.Revision() != rev {
		t.Fatalf("after a failed reload: %v rev %s, want the old allow and rev %s", got, e.Revision(), rev)
	}
	// A rule of the wrong shape compiles: the reload takes it, names it,
	// and the calls it reaches are denied (the old policy's allow would
	// have ignored what the new one meant to deny).
	write("package toolgate\nallow if true\ndeny := 5\n")
	if err := e.Reload(t.Context()); err != nil {
		t.Fatalf("Reload of a mistyped rule: %v", err)
	}
	if err := e.Misshapen(); err == nil || !strings.Contains(err.Error(), "rule deny must be a boolean") {
		t.Fatalf("Misshapen after the reload: %v, want the rule named", err)
	}
	if d, err := e.Decide(t.Context(), call("Read", "x")); err == nil || d.Action != policy.Deny || e.Revision() == rev {
		t.Fatalf("after a mistyped reload: %v (%v), rev %s; want a policy error's deny and a new revision", d.Action, err, e.Revision())
	}
	write("package toolgate\ndeny contains \"closed\" if true\n")
	if err := e.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := decide(t, e, call("Read", "x")); got.Action != "deny" || e.Revision() == rev || e.Misshapen() != nil {
		t.Fatalf("after a good reload: %v, want deny, a new revision and nothing misshapen", got)
	}
	if len(reloads) != 3 || reloads[0] == nil || reloads[1] != nil || reloads[2] != nil {
		t.Errorf("OnReload saw %v, want [error, nil, nil]", reloads)
	}
}

func TestShippedExample(t *testing.T) {
	e := newEngine(t, policy.Options{Policies: shipped.Example()})
	cases := []struct{ tool, target, want string }{
		{"read_file", "README.md", "allow"},
		{"read_file", "chapters/01.md", "allow"},
		{"read_file", ".env", "deny"},
		{"read_file", "notes/today.txt", "deny"},
		{"write_note", "notes/today.txt", "ask"},
		{"write_note", "chapters/01.md", "deny"},
		{"delete_file", "notes/today.txt", "deny"},
	}
	for _, tc := range cases {
		if got := decide(t, e, call(tc.tool, tc.target)); got.Action != tc.want {
			t.Errorf("%s %s = %v, want %s", tc.tool, tc.target, got, tc.want)
		}
	}
}

func ExampleEngine_Decide() {
	e, err := policy.New(context.Background(), policy.Options{
		Library: shipped.Library(),
		Policies: fstest.MapFS{"notes.rego": {Data: []byte(`package toolgate

deny contains {"id": "no-secrets", "message": "secrets stay put"} if input.tool.target == ".env"

allow if input.tool.name == "read_file"
`)}},
	})
	if err != nil {
		panic(err)
	}
	for _, target := range []string{"README.md", "./.env"} {
		in := &policy.Input{Kind: policy.KindREST, Tool: policy.NewTool("read_file", map[string]any{"path": target}, policy.DefaultTargetArgs)}
		d, _ := e.Decide(context.Background(), in)
		fmt.Println(target, d.Action, d.RuleIDs())
	}
	// Output:
	// README.md allow [toolgate.allow]
	// ./.env deny [no-secrets]
}

// BenchmarkDecide measures one decision with the shipped library and a rules
// table of n rows: most name one tool (with exact, glob and "*" targets),
// one in 25 has a glob tool name. The library is evaluated as toolgate runs
// it (in Go); BenchmarkDecideRego evaluates it in OPA, for comparison.
func BenchmarkDecide(b *testing.B) { benchmarkDecide(b, true) }

func BenchmarkDecideRego(b *testing.B) { benchmarkDecide(b, false) }

func benchmarkDecide(b *testing.B, native bool) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			path := writeRules(b, b.TempDir(), benchRows(n))
			e := newEngine(b, policy.Options{Library: shipped.Library(), NativeLibrary: native, RulesFile: path})
			in := call("tool0", "docs/guide/intro.md")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				d, err := e.Decide(ctx, in)
				if err != nil || d.Action != policy.Allow {
					b.Fatalf("%v %v", d.Action, err)
				}
			}
		})
	}
}

// BenchmarkDecideExample is the quickstart's policy (package toolgate rules
// evaluated by OPA) beside a 100-row table.
func BenchmarkDecideExample(b *testing.B) {
	path := writeRules(b, b.TempDir(), benchRows(100))
	e := newEngine(b, policy.Options{Policies: shipped.Example(), RulesFile: path})
	in := call("read_file", "chapters/01.md")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := e.Decide(ctx, in); err != nil || d.Action != policy.Allow {
			b.Fatalf("%v %v", d.Action, err)
		}
	}
}

// BenchmarkDecideUserRule is a 10-row table beside a Rego rule on an
// argument, as teams write them: run in Go (goRules) and by OPA.
func BenchmarkDecideUserRule(b *testing.B) {
	src := "package toolgate\n\n" +
		`deny contains {"id": "no-etc", "message": "nothing under /etc"} if startswith(input.tool.arguments.path, "/etc")` + "\n"
	for _, inGo := range []bool{true, false} {
		b.Run(map[bool]string{true: "go", false: "opa"}[inGo], func(b *testing.B) {
			opts := policy.Options{RulesFile: writeRules(b, b.TempDir(), benchRows(10)), Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}}}
			if !inGo {
				opts = policy.WithoutGoRules(opts)
			}
			e := newEngine(b, opts)
			if policy.GoRulesInUse(e) != inGo {
				b.Fatalf("package toolgate run in Go: %v, want %v", !inGo, inGo)
			}
			in := call("tool0", "docs/guide/intro.md")
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if d, err := e.Decide(ctx, in); err != nil || d.Action != policy.Allow {
					b.Fatalf("%v %v", d.Action, err)
				}
			}
		})
	}
}

// BenchmarkTrivialQuery is OPA's floor: a prepared query reading one field
// of the same input. Decision costs are reported as multiples of it.
func BenchmarkTrivialQuery(b *testing.B) {
	ctx := context.Background()
	pq, err := rego.New(rego.Query("x := input.tool.name")).PrepareForEval(ctx)
	if err != nil {
		b.Fatal(err)
	}
	in := call("tool0", "docs/guide/intro.md")
	b.ReportAllocs()
	for b.Loop() {
		v, err := in.Value()
		if err != nil {
			b.Fatal(err)
		}
		rs, err := pq.Eval(ctx, rego.EvalParsedInput(v))
		if err != nil || len(rs) != 1 {
			b.Fatal(rs, err)
		}
	}
}

func benchRows(n int) []string {
	rows := make([]string, 0, n)
	for i := range n {
		switch i % 25 % 4 {
		case 0:
			rows = append(rows, fmt.Sprintf(`{id: a%d, effect: allow, tool: tool%d, target: "docs/**"}`, i, i))
		case 1:
			rows = append(rows, fmt.Sprintf(`{id: d%d, effect: deny, tool: tool%d, target: secret%d.txt}`, i, i, i))
		case 2:
			rows = append(rows, fmt.Sprintf(`{id: k%d, effect: ask, tool: "tool%d", target: "*"}`, i, i))
		default:
			if i%25 == 3 {
				rows = append(rows, fmt.Sprintf(`{id: g%d, effect: allow, tool: "ns%d.*", target: "src/*.go"}`, i, i))
			} else {
				rows = append(rows, fmt.Sprintf(`{id: e%d, effect: allow, tool: tool%d, target: "src/*.go"}`, i, i))
			}
		}
	}
	return rows
}

// TestWatchReloads writes into a watched directory: a broken module keeps
// the old decisions, a good one changes them within a second.
func TestWatchReloads(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("p.rego", "package toolgate\nallow if true\n")
	reloaded := make(chan error, 16)
	e := newEngine(t, policy.Options{Policies: os.DirFS(dir), OnReload: func(_ string, err error) { reloaded <- err }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- e.Watch(ctx, []string{dir}, 50*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // let the watcher start

	waitReload := func() error {
		t.Helper()
		select {
		case err := <-reloaded:
			return err
		case <-time.After(time.Second):
			t.Fatal("no reload within a second")
			return nil
		}
	}
	write("q.rego", "package toolgate\nallow if {\n")
	if err := waitReload(); err == nil {
		t.Fatal("a broken module reloaded without error")
	}
	if got := decide(t, e, call("Read", "x")); got.Action != "allow" {
		t.Fatalf("after a broken write: %v, want the old allow", got)
	}
	write("q.rego", "package toolgate\ndeny contains \"frozen\" if true\n")
	if err := waitReload(); err != nil {
		t.Fatal(err)
	}
	if got := decide(t, e, call("Read", "x")); got.Action != "deny" {
		t.Fatalf("after a good write: %v, want deny", got)
	}
}

// TestReloadIsAtomic decides continuously while the policy flips between
// two revisions: every decision is one revision's whole answer.
func TestReloadIsAtomic(t *testing.T) {
	dir := t.TempDir()
	a := "package toolgate\nallow contains {\"id\": \"a1\", \"message\": \"a\"} if true\nallow contains {\"id\": \"a2\", \"message\": \"a\"} if true\n"
	b := "package toolgate\ndeny contains {\"id\": \"b1\", \"message\": \"b\"} if true\n"
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(a), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, policy.Options{Policies: os.DirFS(dir)})
	stop := make(chan struct{})
	errs := make(chan string, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			d, err := e.Decide(context.Background(), call("Read", "x"))
			ids := strings.Join(d.RuleIDs(), ",")
			if err != nil || (ids != "a1,a2" && ids != "b1") {
				errs <- fmt.Sprintf("half-loaded decision: %v %q %v", d.Action, ids, err)
				return
			}
		}
	}()
	for i := range 20 {
		src := a
		if i%2 == 0 {
			src = b
		}
		if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := e.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if msg, ok := <-errs; ok {
		t.Fatal(msg)
	}
}

// slowPolicy runs for minutes unless it is stopped.
var slowPolicy = fstest.MapFS{"p.rego": {Data: []byte(`package toolgate

deny contains "never" if {
	some i in numbers.range(1, 100000000)
	i < 0
}
`)}}

// TestDecideDeadline: a policy still evaluating when the caller's deadline
// passes is stopped there, and the call is denied with the error.
func TestDecideDeadline(t *testing.T) {
	e := newEngine(t, policy.Options{Policies: slowPolicy})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	d, err := e.Decide(ctx, call("Read", "x"))
	if took := time.Since(start); err == nil || d.Action != policy.Deny || took > 2*time.Second {
		t.Fatalf("Decide = %v, %v after %v; want a deny with an error soon after 50 ms", d.Action, err, took)
	}
}

// TestDecideTimeout: the engine bounds OPA's evaluation itself
// (Options.Timeout), whatever the caller's context: the slow policy is
// stopped at the timeout, with the shipped library in Go (the Rego left to
// OPA is the user's) and with everything in Rego, and DecideValue too.
func TestDecideTimeout(t *testing.T) {
	for _, native := range []bool{true, false} {
		t.Run(fmt.Sprintf("native=%v", native), func(t *testing.T) {
			e := newEngine(t, policy.Options{Library: shipped.Library(), NativeLibrary: native, Policies: slowPolicy, Timeout: 50 * time.Millisecond})
			start := time.Now()
			d, err := e.Decide(context.Background(), call("Read", "x"))
			if took := time.Since(start); err == nil || d.Action != policy.Deny || took > 2*time.Second {
				t.Fatalf("Decide = %v, %v after %v; want a deny with an error soon after 50 ms", d.Action, err, took)
			}
			if !strings.Contains(err.Error(), "took longer than the policy's 50ms") {
				t.Errorf("the error %q does not say the policy timed out", err)
			}
			start = time.Now()
			d, err = e.DecideValue(context.Background(), ast.MustParseTerm(`{"tool": {"name": "Read"}}`).Value)
			if took := time.Since(start); err == nil || d.Action != policy.Deny || took > 2*time.Second {
				t.Fatalf("DecideValue = %v, %v after %v; want a deny with an error soon after 50 ms", d.Action, err, took)
			}
		})
	}
}

// TestMisshapenNamesTheBadDefinition: of a rule defined in several files,
// the definition whose head is of the wrong shape is the one named.
func TestMisshapenNamesTheBadDefinition(t *testing.T) {
	e, err := policy.New(t.Context(), policy.Options{Library: shipped.Library(), Policies: fstest.MapFS{
		"a.rego": {Data: []byte("package toolgate\n\ndeny contains \"fine\" if input.tool.name == \"X\"\n")},
		"m.rego": {Data: []byte("package toolgate\n\n\n\ndeny contains {\"foo\": 1} if input.tool.name == \"Y\"\n")},
		"n.rego": {Data: []byte("package toolgate\n\nallow if true\n\nallow := 5 if input.tool.name == \"Z\"\n")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(e.Misshapen())
	for _, want := range []string{"m.rego:5: rule deny", "n.rego:5: rule allow"} {
		if !strings.Contains(got, want) {
			t.Errorf("Misshapen: %s\nwant it to name %s", got, want)
		}
	}
}

// TestLongTargetsOpaque: a target longer than MaxTargetLen, or past the
// bytes a call's targets may hold together, is opaque: deny rows fire on
// it and no glob allow row does, in both engines.
func TestLongTargetsOpaque(t *testing.T) {
	rows := []string{
		`{id: docs, effect: allow, tool: read_file, target: "docs/**"}`,
		`{id: ssh, effect: deny, tool: read_file, target: "**/.ssh/**"}`,
	}
	long := func(n int) string { return "docs/" + strings.Repeat("a", n-len("docs/")) }
	many := func(n int) []any {
		var paths []any
		for range n {
			paths = append(paths, long(4000))
		}
		return paths
	}
	for _, native := range []bool{false, true} {
		e := newEngine(t, policy.Options{Library: shipped.Library(), RulesFile: writeRules(t, t.TempDir(), rows), NativeLibrary: native})
		for _, c := range []struct {
			name string
			path any
			want string
		}{
			{"at the limit", long(policy.MaxTargetLen), "allow"},
			{"past the limit", long(policy.MaxTargetLen + 1), "deny"},
			{"16 long targets", many(16), "allow"},
			{"17 long targets", many(17), "deny"},
		} {
			in := &policy.Input{Kind: policy.KindREST, Phase: policy.PhaseCall, Tool: policy.NewTool("read_file", map[string]any{"path": c.path}, policy.DefaultTargetArgs)}
			if got := decide(t, e, in); string(got.Action) != c.want {
				t.Errorf("native %v: %s: %v, want %s", native, c.name, got, c.want)
			}
		}
	}
}

// TestGlobDepths: what the docs say of a target glob's depths, in both
// engines: a "**/" at the start of a glob or after a "/" stands for any
// number of directories, none included ("**/.deep" catches the root
// .deep, "src/**/x.go" src/x.go), any other "/" needs one in the target,
// and "docs{,/**}" covers a directory and what is under it.
func TestGlobDepths(t *testing.T) {
	rows := []string{
		`{id: all, effect: allow, tool: Read, target: "*"}`,
		`{id: deep, effect: deny, tool: Read, target: "**/.deep"}`,
		`{id: env, effect: deny, tool: Read, target: "{**/,}.env"}`,
		`{id: docs, effect: ask, tool: Read, target: "docs{,/**}"}`,
		`{id: mid, effect: deny, tool: Read, target: "src/**/x.go"}`,
		`{id: twice, effect: deny, tool: Read, target: "**/**/k"}`,
		`{id: inner, effect: deny, tool: Read, target: "a**/y"}`,
	}
	for _, native := range []bool{false, true} {
		e := newEngine(t, policy.Options{Library: shipped.Library(), RulesFile: writeRules(t, t.TempDir(), rows), NativeLibrary: native})
		for target, want := range map[string]string{
			".deep": "deny", "a/.deep": "deny", "/.deep": "deny", "a/b.deep": "allow",
			"src/x.go": "deny", "src/a/b/x.go": "deny", "srcx.go": "allow", "x.go": "allow",
			"k": "deny", "a/b/k": "deny", "ak": "allow",
			"ab/y": "deny", "a/y": "deny", "ay": "allow",
			".env": "deny", "a/.env": "deny", "a/b/.env": "deny", "x.env": "allow",
			"docs": "ask", "docs/a/b": "ask", "docsx": "allow",
		} {
			if got := decide(t, e, call("Read", target)); string(got.Action) != want {
				t.Errorf("native %v: Read %s = %v, want %s", native, target, got, want)
			}
		}
	}
}

// TestHostRowCoversTheRoot: a row for every path of a host covers its
// URLs without a path too, in any spelling of the host: "https://evil.com"
// is the root to a browser, so it is "https://evil.com/" to the rows.
func TestHostRowCoversTheRoot(t *testing.T) {
	e := newEngine(t, policy.Options{RulesFile: writeRules(t, t.TempDir(), []string{
		`{id: web, effect: allow, tool: fetch, target: "https://**"}`,
		`{id: no-evil, effect: deny, tool: fetch, target: "https://evil.com*/**"}`,
	})})
	for _, u := range []string{"https://evil.com", "https://evil.com/", "https://evil.com:8443", "https://EVIL.com.:443", "https://evil.com?q=1"} {
		in := call("fetch", "")
		in.Tool = policy.NewTool("fetch", map[string]any{"url": u}, policy.DefaultTargetArgs)
		d, err := e.Decide(context.Background(), in)
		if err != nil || d.Action != policy.Deny || !slices.Contains(d.RuleIDs(), "no-evil") {
			t.Errorf("fetch %s: %v %v, %v; want deny no-evil", u, d.Action, d.RuleIDs(), err)
		}
	}
	in := call("fetch", "")
	in.Tool = policy.NewTool("fetch", map[string]any{"url": "https://good.com"}, policy.DefaultTargetArgs)
	if d, _ := e.Decide(context.Background(), in); d.Action != policy.Allow {
		t.Errorf("fetch https://good.com: %v, want allow", d.Action)
	}
}

// TestDontAskListPhase: under dont_ask, where an ask is refused, a listed
// tool's ask rows are read as deny rows are: one whose target is "*"
// covers every call and hides the tool (even beside an allow row, a
// catch-all one included), one for some targets does not, so a tool an
// allow row covers some calls of is listed, by that row. A hand-written ask
// that fires in the list phase hides the tool too. The call phase is
// unchanged. Decide, with the library in Go or in Rego, and DecideValue
// agree.
func TestDontAskListPhase(t *testing.T) {
	rows := []string{
		`{id: w1, effect: allow, tool: Write, target: "scratch/*"}`,
		`{id: w2, effect: ask, tool: Write, target: "notes/*"}`,
		`{id: d1, effect: ask, tool: Deploy, target: "*"}`,
		`{id: s1, effect: allow, tool: Ship, target: "staging/*"}`,
		`{id: s2, effect: ask, tool: Ship, target: "*"}`,
		`{id: docs, effect: allow, tool: "*", target: "docs/**"}`,
		`{id: e1, effect: ask, tool: Erase, target: "*"}`,
	}
	mine := `package toolgate

allow contains {"id": "mine.listed", "message": "listed"} if {
	input.phase == "list"
	input.tool.name == "Publish"
}

ask contains {"id": "mine.publish", "message": "publishing needs a human"} if input.tool.name == "Publish"
`
	listed := func(tool, mode string) *policy.Input {
		in := call(tool, "")
		in.Phase, in.Mode, in.Tool = policy.PhaseList, mode, &policy.Tool{Name: tool}
		return in
	}
	called := func(tool, target, mode string) *policy.Input {
		in := call(tool, target)
		in.Mode = mode
		return in
	}
	for _, native := range []bool{false, true} {
		e := newEngine(t, policy.Options{
			Library: shipped.Library(), RulesFile: writeRules(t, t.TempDir(), rows), NativeLibrary: native,
			Policies: fstest.MapFS{"mine.rego": {Data: []byte(mine)}},
		})
		for _, tc := range []struct {
			name string
			in   *policy.Input
			want policy.Action
			ids  []string
		}{
			{"listed, some calls allowed", listed("Write", policy.ModeDontAsk), policy.Allow, []string{"docs", "w1"}},
			{"listed, every call asks", listed("Deploy", policy.ModeDontAsk), policy.Deny, nil},
			{"listed, an allow row beside an ask on every target", listed("Ship", policy.ModeDontAsk), policy.Deny, nil},
			{"listed, a catch-all allow row beside an ask on every target", listed("Erase", policy.ModeDontAsk), policy.Deny, nil},
			{"listed, a hand-written ask", listed("Publish", policy.ModeDontAsk), policy.Deny, nil},
			{"listed, mode default", listed("Write", policy.ModeDefault), policy.Ask, nil},
			{"listed, mode default, ask on every target", listed("Ship", policy.ModeDefault), policy.Ask, nil},
			{"called, an ask", called("Write", "notes/a", policy.ModeDontAsk), policy.Deny, nil},
			{"called, allowed", called("Write", "scratch/a", policy.ModeDontAsk), policy.Allow, nil},
			{"called, allowed row under an ask on every target", called("Ship", "staging/a", policy.ModeDontAsk), policy.Deny, nil},
		} {
			d, err := e.Decide(t.Context(), tc.in)
			if err != nil || d.Action != tc.want || tc.ids != nil && !slices.Equal(d.RuleIDs(), tc.ids) {
				t.Errorf("native %v, %s: Decide = %v %v, %v; want %v %v", native, tc.name, d.Action, d.RuleIDs(), err, tc.want, tc.ids)
			}
			v, err := tc.in.Value()
			if err != nil {
				t.Fatal(err)
			}
			if w, err := e.DecideValue(t.Context(), v); err != nil || w.Action != d.Action || !slices.Equal(w.RuleIDs(), d.RuleIDs()) {
				t.Errorf("native %v, %s: DecideValue = %v %v, %v; Decide %v %v", native, tc.name, w.Action, w.RuleIDs(), err, d.Action, d.RuleIDs())
			}
		}
	}
}
