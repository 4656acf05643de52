package policy_test

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// The vocabulary of the generated tables and calls: exact names, "*" and
// globs that overlap each other, so rows collide on purpose.
var (
	genTools   = []string{"read", "write", "ns.a", "ns.b", "Read", "ns.a.b", "*", "ns.*", "r*", "w?ite", "{read,write}", "[rw]*", "ns.**", "mcp:resources/read", "mcp:prompts/get", "mcp:*"}
	genTargets = []string{
		"*", "docs/**", "docs/*.md", "a.txt", "notes/*", "**/*.go", "{a,b}.txt", "secret?.txt",
		"docs/guide/intro.md", "notes/today.txt", "[!a]*.txt", "src/*/main.go", "\\*literal",
	}
	callTools   = []string{"read", "write", "ns.a", "ns.b", "Read", "ns.a.b", "rw", "wxite", "other"}
	callTargets = []string{
		"a.txt", "b.txt", "c.txt", "docs/x.md", "docs/guide/intro.md", "notes/today.txt", "notes/deep/x",
		"src/a/main.go", "x.go", "secret1.txt", "*literal", "../etc/passwd", "docs/../../x", `we"ird\path`,
		"", "https://example.com/a", "*",
		// rooted: deny and ask rows see them without the leading slash
		"/docs/x.md", "/secret1.txt", "//a.txt", "/../x", "/",
	}
	genModes = []string{"", policy.ModeDefault, policy.ModeDontAsk, policy.ModePlan, policy.ModeBypass}
	// MCP methods of plumbing messages: the protocol's own, a response's
	// (""), misspellings, case variants and those decided as tool calls.
	// genListenParams are params of an MCP message, those of
	// subscriptions/listen among them: toolgate.mcp_subscribe reads them.
	genListenParams = []map[string]any{
		nil,
		{},
		{"notifications": nil},
		{"notifications": "x"},
		{"notifications": map[string]any{}},
		{"notifications": map[string]any{"toolsListChanged": true}},
		{"notifications": map[string]any{"resourceSubscriptions": nil}},
		{"notifications": map[string]any{"resourceSubscriptions": []any{}}},
		{"notifications": map[string]any{"resourceSubscriptions": []any{"file:///a"}}},
		{"notifications": map[string]any{"resourceSubscriptions": "file:///a"}},
		{"notifications": map[string]any{"resourceSubscriptions": map[string]any{}}},
		{"notifications": []any{map[string]any{"resourceSubscriptions": []any{"file:///a"}}}},
	}
	genMethods = []string{
		"", "initialize", "ping", "tools/list", "notifications/initialized", "notifications/cancelled",
		"notifications/tasks/status", "tasks/update", "tasks/get", "server/discover", "logging/setLevel",
		"resources/templates/list", "completion/complete", "subscriptions/listen",
		"tools/call", "Tools/Call", "tools/call ", "tools/List", "resources/read", "prompts/get",
		"resources/subscribe", "sampling/createMessage", "notifications/", "notifications/other",
		"Initialize", "ping\x00", `we"ird`, "tasks/*",
	}
)

func genTable(r *rand.Rand) []string {
	n := r.IntN(12)
	rows := make([]string, 0, n)
	for i := range n {
		effect := []string{"allow", "deny", "ask"}[r.IntN(3)]
		row := fmt.Sprintf(`{id: %q, effect: %s, tool: %q, target: %q`,
			"row"+strconv.Itoa(r.IntN(1000))+"_"+strconv.Itoa(i), effect,
			genTools[r.IntN(len(genTools))], genTargets[r.IntN(len(genTargets))])
		if r.IntN(3) == 0 {
			row += ", read_only: true"
		}
		if effect == "ask" && r.IntN(3) == 0 {
			row += ", must_ask: true"
		}
		if effect == "ask" && r.IntN(3) == 0 {
			row += []string{", approvers: {groups: [sre]}", ", approvers: {subjects: [alice, bob], min: 2}", ", approvers: {requester: true}"}[r.IntN(3)]
		}
		if r.IntN(4) == 0 {
			row += fmt.Sprintf(", message: %q", "message of row "+strconv.Itoa(i))
		}
		rows = append(rows, row+"}")
	}
	return rows
}

func genCall(r *rand.Rand) *policy.Input {
	in := &policy.Input{
		CallID: "diff", Kind: []string{policy.KindREST, policy.KindMCP, policy.KindHTTP}[r.IntN(3)],
		Mode:     genModes[r.IntN(len(genModes))],
		Phase:    []string{"", policy.PhaseCall, policy.PhaseList}[r.IntN(3)],
		Upstream: policy.Upstream{Name: "files", Protocol: "rest"},
		Subject:  policy.Subject{ID: "agent", Authenticated: true},
		HTTP:     policy.HTTP{Method: "POST", Path: "/x"},
	}
	if in.Kind == policy.KindMCP {
		switch r.IntN(3) {
		case 0: // GET or DELETE: no message
		default:
			in.MCP = &policy.MCP{Method: genMethods[r.IntN(len(genMethods))]}
			if r.IntN(2) == 0 {
				in.MCP.Params = genListenParams[r.IntN(len(genListenParams))]
			}
		}
		if r.IntN(4) == 0 { // a pseudo-tool
			params := map[string]any{"uri": callTargets[r.IntN(len(callTargets))]}
			method := "resources/read"
			switch r.IntN(4) {
			case 0:
				params = map[string]any{"name": callTools[r.IntN(len(callTools))], "arguments": map[string]any{}}
				method = "prompts/get"
			case 1:
				ref := map[string]any{"type": "ref/resource", "uri": callTargets[r.IntN(len(callTargets))]}
				if r.IntN(2) == 0 {
					ref = map[string]any{"type": "ref/prompt", "name": callTools[r.IntN(len(callTools))]}
				}
				params = map[string]any{"ref": ref, "argument": map[string]any{"name": "n", "value": ""}}
				method = "completion/complete"
			}
			tool, err := policy.MCPTool(method, params, policy.FoldNone)
			if err != nil {
				panic(err)
			}
			in.MCP = &policy.MCP{Method: method}
			in.Tool = tool
			return in
		}
	}
	if in.Kind == policy.KindHTTP || r.IntN(5) == 0 {
		return in // no tool: plain HTTP or MCP plumbing
	}
	args := map[string]any{}
	switch target := callTargets[r.IntN(len(callTargets))]; {
	case target == "":
	case r.IntN(6) == 0:
		args["path"] = 42 // not a string: no target
	default:
		args[[]string{"path", "url", "command", "Path"}[r.IntN(4)]] = target
	}
	// Decoys and second targets: more arguments named in target_args, so
	// that deny and ask rows must look at every one and allow rows at all.
	for range r.IntN(3) {
		name := []string{"file", "file_path", "uri", "target", "File"}[r.IntN(5)]
		switch r.IntN(6) {
		case 0: // an array: each string a target, anything else opaque
			args[name] = []any{callTargets[r.IntN(len(callTargets))], []any{nil, "docs/x.md", 7}[r.IntN(3)]}
		case 1: // opaque values, and null (no target)
			args[name] = []any{
				map[string]any{"p": "secret1.txt"},
				42, nil, true,
				[]any{},
				// strings inside that climb above their root
				map[string]any{"a": "docs/x.md", "b": "../etc/passwd"},
				[]any{[]any{"docs/../../x"}},
			}[r.IntN(7)]
		default:
			args[name] = callTargets[r.IntN(len(callTargets))]
		}
	}
	in.Tool = policy.NewTool(callTools[r.IntN(len(callTools))], args, policy.DefaultTargetArgs)
	switch r.IntN(4) {
	case 0:
		in.Tool.Annotations = map[string]any{"readOnlyHint": true}
	case 1:
		in.Tool.Annotations = map[string]any{"readOnlyHint": "true"}
	case 2:
		in.Tool.Annotations = map[string]any{"readOnlyHint": false}
	}
	return in
}

// userPolicies are package toolgate policies the table runs beside: none,
// the quickstart's, and one with boolean rules.
var userPolicies = []fs.FS{
	nil,
	shipped.Example(),
	fstest.MapFS{"p.rego": {Data: []byte(`package toolgate

allow if input.tool.name == "other"

deny if input.tool.target == "b.txt"

read_only if input.tool.name == "read"
`)}},
}

// TestNativeMatchesRego is the proof that the shipped library evaluated in
// Go decides exactly as its Rego: for generated tables, policies, defaults
// and calls, both engines give the same action, reasons in the same order,
// read-only verdict and error. TOOLGATE_TEST_DIFF_ROUNDS runs more tables.
func TestNativeMatchesRego(t *testing.T) {
	rounds := 150
	if s := os.Getenv("TOOLGATE_TEST_DIFF_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	seed := uint64(1)
	r := rand.New(rand.NewPCG(seed, 2))
	dir := t.TempDir()
	compared := 0
	for round := range rounds {
		rows := genTable(r)
		path := filepath.Join(dir, fmt.Sprintf("rules%d.yaml", round))
		src := "rules: []\n"
		if len(rows) > 0 {
			src = "rules:\n  - " + strings.Join(rows, "\n  - ") + "\n"
		}
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		opts := policy.Options{
			Library: shipped.Library(), RulesFile: path,
			Default: []policy.Action{policy.Deny, policy.Ask}[r.IntN(2)],
		}
		if p := userPolicies[r.IntN(len(userPolicies))]; p != nil {
			opts.Policies = p
		}
		inRego, err := policy.New(t.Context(), opts)
		if err != nil {
			t.Fatalf("round %d: %v\n%s", round, err, src)
		}
		opts.NativeLibrary = true
		native, err := policy.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if !policy.NativeInUse(native) || policy.NativeInUse(inRego) {
			t.Fatalf("round %d: native in use: %v (native engine), %v (Rego engine)", round, policy.NativeInUse(native), policy.NativeInUse(inRego))
		}
		for range 40 {
			in := genCall(r)
			want, wantErr := inRego.Decide(t.Context(), in)
			got, gotErr := native.Decide(t.Context(), in)
			if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || !cmp.Equal(want, got) {
				t.Fatalf("round %d: decisions differ\ntable:\n%s\ninput: %+v tool %+v\nRego:   %+v %v\nnative: %+v %v",
					round, src, *in, in.Tool, want, wantErr, got, gotErr)
			}
			compared++
		}
	}
	t.Logf("%d decisions compared", compared)
}

// TestNativeFallsBack: a policy that extends the library or serves its own
// table is evaluated wholly by OPA, and still decides.
func TestNativeFallsBack(t *testing.T) {
	cases := map[string]fstest.MapFS{
		"extends toolgate.lib": {"lib.rego": {Data: []byte("package toolgate.lib\n\nallow contains \"mine\" if input.tool.name == \"read\"\n")}},
		"defines the table":    {"t.rego": {Data: []byte("package toolgate\n\nrules := [{\"id\": \"x\", \"effect\": \"allow\", \"tool\": \"read\", \"target\": \"*\", \"tool_glob\": false, \"target_glob\": false}]\n")}},
		"table as data":        {"toolgate/data.json": {Data: []byte(`{"rules": [{"id": "x", "effect": "allow", "tool": "read", "target": "*", "tool_glob": false, "target_glob": false}]}`)}},
	}
	for name, fsys := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEngine(t, policy.Options{Policies: fsys})
			if policy.NativeInUse(e) {
				t.Fatal("the library is evaluated in Go although the policy extends it")
			}
			if got := decide(t, e, call("read", "a.txt")); got.Action != "allow" {
				t.Errorf("read a.txt = %v, want allow", got)
			}
		})
	}
	e := newEngine(t, policy.Options{Policies: userPolicies[2]})
	if !policy.NativeInUse(e) {
		t.Error("a plain package toolgate policy should leave the library to Go")
	}
}
