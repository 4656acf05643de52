package policy_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

// The vocabulary of the generated package toolgate policies: the input
// values they test (some absent, some of a type a built-in refuses), the
// constants they test them against, and the tests.
var (
	goRefs = []string{
		"input.tool.name", "input.tool.target", "input.tool.arguments.path", "input.tool.arguments.n",
		"input.tool.arguments.flag", "input.tool.arguments.obj.k", "input.tool.arguments.list",
		`input.tool.arguments["a-b"]`, "input.subject.id", "input.subject.groups", "input.subject.authenticated",
		"input.phase", "input.kind", "input.http.method", "input.missing", "input.tool.arguments.list.x",
		"input.tool.target.x", "input.subject.claims.role", "input.subject.claims.n", "input.mcp.id",
	}
	goConsts = []string{`"read"`, `"write"`, `"docs/"`, `"/etc"`, `"a.txt"`, `""`, `"1"`, "1", "1.0", "2", "true", "false", "null", `["a", 1]`, `{"k": "a"}`, "1e400", "1E400", `[1e400]`}
	goTests  = []string{"%s == %s", "%s != %s", "%s < %s", "%s >= %s", "startswith(%s, %s)", "endswith(%s, %s)", "contains(%s, %s)", "%s = %s"}
)

// genExpr is one expression of a generated body; other=true makes shapes
// goRules leaves to OPA.
func genExpr(r *rand.Rand, other bool) string {
	ref := goRefs[r.IntN(len(goRefs))]
	c := goConsts[r.IntN(len(goConsts))]
	if r.IntN(4) == 0 {
		c = goRefs[r.IntN(len(goRefs))] // two input values
	}
	var e string
	switch n := r.IntN(10); {
	case other && n < 3:
		e = []string{
			`lower(REF) == "read"`, `count(REF) > 1`, `some x in input.subject.groups; x == CONST`,
			`regex.match("^r", REF)`, `helper(REF)`,
		}[r.IntN(5)]
		e = strings.NewReplacer("REF", ref, "CONST", c).Replace(e)
	case n < 2:
		e = ref
	case n < 4:
		set := []string{`{"read", "write", 1}`, `["docs/", 1.0, true]`, `{"k": "read", "j": 1}`, `{"a.txt"}`}[r.IntN(4)]
		e = ref + " in " + set
	default:
		t := goTests[r.IntN(len(goTests))]
		if r.IntN(2) == 0 {
			e = fmt.Sprintf(t, ref, c)
		} else {
			e = fmt.Sprintf(t, c, ref)
		}
	}
	if r.IntN(4) == 0 && !strings.HasPrefix(e, "some ") {
		e = "not " + e
	}
	return e
}

// genUserPolicy is a package toolgate policy of one to four rules.
func genUserPolicy(r *rand.Rand, other bool) string {
	var b strings.Builder
	b.WriteString("package toolgate\n\nhelper(x) if startswith(x, \"r\")\n\n")
	multi := map[string]bool{}
	for _, name := range []string{"deny", "ask", "allow", "read_only"} {
		multi[name] = r.IntN(3) > 0
	}
	for i := range 1 + r.IntN(4) {
		name := []string{"deny", "ask", "allow", "read_only"}[r.IntN(4)]
		head := name
		if multi[name] {
			switch r.IntN(3) {
			case 0:
				head += fmt.Sprintf(" contains %q", fmt.Sprintf("%s %d", name, i%2))
			case 1:
				head += fmt.Sprintf(` contains {"id": "%s.%d", "message": "rule %d"}`, name, i, i)
			default:
				head += ` contains {"id": "z", "message": "same"}`
			}
		}
		exprs := make([]string, 1+r.IntN(3))
		for j := range exprs {
			exprs[j] = genExpr(r, other)
		}
		fmt.Fprintf(&b, "%s if {\n\t%s\n}\n\n", head, strings.Join(exprs, "\n\t"))
	}
	return b.String()
}

// genGoCall is a call whose arguments hold values of every type under the
// names the policies test.
func genGoCall(r *rand.Rand) *policy.Input {
	in := genCall(r)
	if in.Tool == nil || r.IntN(5) == 0 {
		return in
	}
	pick := func(vals ...any) any { return vals[r.IntN(len(vals))] }
	args := map[string]any{}
	for name, v := range map[string]any{
		"path": pick("docs/a.txt", "/etc/passwd", "a.txt", json.Number("1"), 1.0, true, nil),
		// numbers beyond a float64 (which OPA's rule index tells apart by
		// their text) and beyond what OPA reads at all (an error)
		"n":    pick(json.Number("1"), json.Number("1.0"), 2.5, "1", nil, json.Number("1E400"), json.Number("1e400"), json.Number("1e100000")),
		"flag": pick(true, false, "false", nil),
		"obj":  pick(map[string]any{"k": "a"}, map[string]any{"k": json.Number("1")}, "k", []any{"k"}),
		"list": pick([]any{"a", json.Number("1")}, []any{}, "a"),
		"a-b":  pick("read", "x.x", json.Number("2")),
	} {
		if r.IntN(4) > 0 {
			args[name] = v
		}
	}
	in.Tool = policy.NewTool(in.Tool.Name, args, policy.DefaultTargetArgs)
	if r.IntN(3) == 0 {
		in.Subject.Groups = []string{"sre", "read"}
	}
	if r.IntN(3) == 0 {
		in.Subject.Claims = map[string]any{"role": pick("read", json.Number("1e100000")), "n": pick(json.Number("1E400"), 1.0)}
	}
	if in.MCP != nil && r.IntN(2) == 0 {
		in.MCP.ID = pick(json.Number("1"), "a", json.Number("1e100000"))
	}
	return in
}

// TestGoRulesMatchOPA: package toolgate's rules run in Go decide every
// call as OPA does, errors included, on generated policies and calls; a
// policy of another shape is left to OPA.
func TestGoRulesMatchOPA(t *testing.T) {
	rounds := 300
	if s := os.Getenv("TOOLGATE_TEST_DIFF_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	r := rand.New(rand.NewPCG(7, 11))
	path := writeRules(t, t.TempDir(), benchRows(10))
	compared, inGo, failed, refused := 0, 0, 0, 0
	for round := range rounds {
		other := r.IntN(5) == 0
		src := genUserPolicy(r, other)
		opts := policy.Options{Library: shipped.Library(), RulesFile: path, Policies: fstest.MapFS{"p.rego": {Data: []byte(src)}}}
		inRego, err := policy.New(t.Context(), opts)
		if err != nil {
			refused++
			continue // a generated policy OPA refuses (a type error it sees at compile time)
		}
		opts.NativeLibrary = true
		withOPA, err := policy.New(t.Context(), policy.WithoutGoRules(opts))
		if err != nil {
			t.Fatal(err)
		}
		withGo, err := policy.New(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if policy.GoRulesInUse(withOPA) {
			t.Fatal("WithoutGoRules: package toolgate is still run in Go")
		}
		if policy.GoRulesInUse(withGo) {
			inGo++
			if strings.Contains(src, "helper(input") || strings.Contains(src, "lower(") || strings.Contains(src, "some x") {
				t.Fatalf("round %d: a policy of another shape is run in Go:\n%s", round, src)
			}
		}
		for range 30 {
			in := genGoCall(r)
			want, wantErr := inRego.Decide(t.Context(), in)
			opaOnly, opaErr := withOPA.Decide(t.Context(), in)
			got, gotErr := withGo.Decide(t.Context(), in)
			if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || !cmp.Equal(want, got) ||
				fmt.Sprint(wantErr) != fmt.Sprint(opaErr) || !cmp.Equal(want, opaOnly) {
				t.Fatalf("round %d: decisions differ\npolicy:\n%s\ninput: %+v tool %+v\nRego:     %+v %v\nuser OPA: %+v %v\nuser Go:  %+v %v",
					round, src, *in, in.Tool, want, wantErr, opaOnly, opaErr, got, gotErr)
			}
			if wantErr != nil {
				failed++
			}
			compared++
		}
	}
	t.Logf("%d decisions compared (%d failing as OPA fails), %d of %d policies run in Go (%d refused by OPA)", compared, failed, inGo, rounds, refused)
	if inGo < (rounds-refused)/2 || failed == 0 {
		t.Errorf("the generator exercised too little: %d policies of %d in Go, %d failing decisions", inGo, rounds, failed)
	}
}
