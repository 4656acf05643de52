package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

func cmdPolicy(ctx context.Context, args []string, e env) int {
	const use = "usage: toolgate policy test [PATH...] | toolgate policy eval --config FILE --input FILE\n('toolgate policy test -h', 'toolgate policy eval -h' list their flags)"
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, use)
		return exitUsage
	}
	if isHelp(args[0]) {
		fmt.Fprintln(e.stdout, use)
		return exitOK
	}
	switch args[0] {
	case "test":
		return cmdPolicyTest(ctx, args[1:], e)
	case "eval":
		return cmdPolicyEval(ctx, args[1:], e)
	}
	fmt.Fprintf(e.stderr, "toolgate policy: unknown subcommand %q (test, eval)\n", args[0])
	return exitUsage
}

// cmdPolicyTest runs Rego unit tests like `opa test`, with the shipped
// library loaded (its own tests are not rerun).
func cmdPolicyTest(ctx context.Context, args []string, e env) int {
	fs := flag.NewFlagSet("toolgate policy test", flag.ContinueOnError)
	verbose := fs.Bool("v", false, "report passing tests too")
	run := fs.String("run", "", "run only tests whose name matches this regular expression")
	fs.StringVar(run, "r", "", "short for -run, as opa test takes it")
	caps := fs.String("capabilities", "", "comma-separated built-ins the policies may call beyond the safe set (as policy.capabilities), e.g. http.send")
	rules := fs.String("rules", "", "a rules table (as policy.rules_file), served to the tests as serve serves it (data.toolgate.rules)")
	// Flags may follow the paths, as opa test takes them (opa test . -v).
	var paths []string
	for rest := args; ; {
		if ok, status := parseFlagsArgs(fs, rest, e, true); !ok {
			return status
		}
		if rest = fs.Args(); len(rest) == 0 {
			break
		}
		paths, rest = append(paths, rest[0]), rest[1:]
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	trees := map[string]fsFS{}
	for _, p := range paths {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			fmt.Fprintf(e.stderr, "toolgate policy test: %v\n", err)
			return exitUsage
		case st.IsDir():
			trees[p] = os.DirFS(p)
		default:
			// One file, as opa test takes one: a tree of it alone.
			data, err := os.ReadFile(p)
			if err != nil {
				fmt.Fprintf(e.stderr, "toolgate policy test: %v\n", err)
				return exitUsage
			}
			trees[p] = fstest.MapFS{filepath.Base(p): {Data: data}}
		}
	}
	sum, err := policy.RunTests(ctx, e.stdout, trees, policy.TestOptions{
		Verbose: *verbose, Run: *run, Library: shipped.Library(), Capabilities: splitList(*caps), RulesFile: *rules,
	})
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate policy test: %v\n", err)
		return exitUsage
	}
	if sum.Passed+sum.Failed+sum.Errored == 0 {
		fmt.Fprintln(e.stderr, "toolgate policy test: no tests found (tests are rules named test_* in *_test.rego files)")
		return exitFail
	}
	if !sum.OK() {
		return exitFail
	}
	return exitOK
}

type fsFS = fs.FS

// splitList is a comma-separated flag's values, trimmed, empty ones left out.
func splitList(v string) []string {
	var out []string
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// cmdPolicyEval prints the decision toolgate would take for an input
// document, with the policy a config describes.
func cmdPolicyEval(ctx context.Context, args []string, e env) int {
	cf := newConfigFlags("policy eval")
	input := cf.fs.String("input", "", "input document (JSON, as docs/policy.md describes it); - for stdin")
	if ok, status := parseFlags(cf.fs, args, e); !ok {
		return status
	}
	if *input == "" {
		fmt.Fprintln(e.stderr, "toolgate policy eval: --input FILE is required")
		return exitUsage
	}
	// The decision needs the policy's parts of the configuration, not
	// its secrets: the production file loads without them.
	cfg, err := cf.loadWith(e, true)
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate: configuration refused:\n%v\n", err)
		return exitUsage
	}
	in := os.Stdin
	if *input != "-" {
		if in, err = os.Open(*input); err != nil {
			fmt.Fprintf(e.stderr, "toolgate policy eval: %v\n", err)
			return exitUsage
		}
		defer in.Close()
	}
	v, err := ast.ValueFromReader(in)
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate policy eval: --input: %v\n", err)
		return exitUsage
	}
	printTo := func(location, message string) { fmt.Fprintf(e.stderr, "%s: %s\n", location, message) }
	engine, err := newEngine(ctx, cfg, policySourceOf(cfg), slog.New(slog.DiscardHandler), nil, true, printTo)
	if err != nil {
		fmt.Fprintf(e.stderr, "toolgate policy eval: %v\n", err)
		return exitUsage
	}
	if w := withoutArguments(v); w != "" {
		fmt.Fprintf(e.stderr, "toolgate policy eval: warning: %s\n", w)
	}
	v = withConfiguredMode(cfg, v)
	d, evalErr := engine.DecideValue(ctx, v)
	out := map[string]any{"decision": d, "revision": engine.Revision()}
	if evalErr != nil {
		out["error"] = evalErr.Error()
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
	if evalErr != nil {
		return exitFail
	}
	return exitOK
}

// withoutArguments warns of an input document of a tool call without its
// arguments, as a decision-log event's input is unless log.arguments is on
// (they are left out, and targets and the query hidden): rules that read
// them decide it as a call that sent none, maybe otherwise than the call
// was decided. "" for any other document.
func withoutArguments(v ast.Value) string {
	obj, ok := v.(ast.Object)
	if !ok {
		return ""
	}
	t := obj.Get(ast.InternedTerm("tool"))
	if t == nil {
		return ""
	}
	if tool, ok := t.Value.(ast.Object); !ok || tool.Get(ast.InternedTerm("arguments")) != nil {
		return ""
	}
	if p := obj.Get(ast.InternedTerm("phase")); p != nil && p.Value.Compare(ast.String(policy.PhaseList)) == 0 {
		return "" // a listed tool has none
	}
	return "the input's tool has no arguments: a decision-log event's input leaves them out (and hides targets and the query) unless log.arguments is on, and rules that read them decide it as a call that sent none, maybe otherwise than toolgate decided the call"
}

// withConfiguredMode gives an input document without a mode the mode serve
// would give its call (a subject's, else its upstream's, else
// policy.mode; a mode header it cannot know): the decision printed is the
// one toolgate would take. A document that names its mode keeps it.
func withConfiguredMode(cfg *config.Config, v ast.Value) ast.Value {
	obj, ok := v.(ast.Object)
	if !ok || obj.Get(ast.InternedTerm("mode")) != nil {
		return v
	}
	str := func(path ...string) string {
		ref := make(ast.Ref, len(path))
		for i, k := range path {
			ref[i] = ast.StringTerm(k)
		}
		v, _ := obj.Find(ref)
		s, _ := v.(ast.String)
		return string(s)
	}
	upMode := ""
	if up := str("upstream", "name"); up != "" {
		for _, u := range cfg.Upstreams {
			if u.Name == up {
				upMode = u.Mode
			}
		}
	}
	mode := policy.ConfiguredMode(cfg.Policy.SubjectModes, str("subject", "id"), upMode, cfg.Policy.Mode)
	if mode == "" {
		return v
	}
	obj = obj.Copy()
	obj.Insert(ast.InternedTerm("mode"), ast.StringTerm(mode))
	return obj
}
