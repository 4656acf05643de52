package policy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestOptions configure RunTests.
type TestOptions struct {
	Verbose bool   // report passing tests too, like `opa test -v`
	Run     string // only tests whose name matches this regular expression, like `opa test -r`
	// Library, if set, is loaded beside the trees without its own tests:
	// users' tests run against the shipped library, which is not retested.
	Library fs.FS
	// Capabilities are the built-ins allowed beyond the safe set, as in
	// Options.Capabilities: tests compile as the engine compiles.
	Capabilities []string
	// RulesFile, if set, is a rules table served as Options.RulesFile
	// serves it (data.toolgate.rules and its index), so that tests can
	// decide calls against the configured table.
	RulesFile string
}

// TestSummary counts the outcome of a test run.
type TestSummary struct{ Passed, Failed, Errored, Skipped int }

// OK reports whether every test that ran passed and at least one ran.
func (s TestSummary) OK() bool { return s.Failed == 0 && s.Errored == 0 && s.Passed > 0 }

// RunTests runs the Rego unit tests (rules named test_*) of every tree
// exactly as `opa test` would: modules, _test.rego files and data files are
// loaded together, and the report is written to out in OPA's format. Trees
// are keyed by a name used to keep module names apart ("lib", a directory).
func RunTests(ctx context.Context, out io.Writer, trees map[string]fs.FS, opts TestOptions) (TestSummary, error) {
	caps, err := capabilities(opts.Capabilities)
	if err != nil {
		return TestSummary{}, err
	}
	modules := map[string]*ast.Module{}
	data := map[string]any{}
	// The library first: a copy of one of its files among the trees (a
	// checkout's rego/, whose lib/ is the library) is read once, from the
	// library, as serve reads it (load).
	shipped := map[string]bool{} // the library's modules, by their text
	library := map[string]bool{} // their names among modules
	if opts.Library != nil {
		lib := libraryTree
		for trees[lib] != nil {
			lib += "'" // a name no tree has: a tree's modules never replace the library's
		}
		res, err := loadTree(opts.Library, skipNonPolicy)
		if err != nil {
			return TestSummary{}, fmt.Errorf("%s: %w", lib, err)
		}
		for mname, m := range res.Modules {
			modules[lib+"/"+strings.TrimPrefix(mname, "/")] = m.Parsed
			library[lib+"/"+strings.TrimPrefix(mname, "/")] = true
			shipped[string(m.Raw)] = true
		}
		maps.Copy(data, res.Documents)
	}
	for name, fsys := range trees {
		res, err := loadTree(fsys, skipNonRegoOrData)
		if err != nil {
			return TestSummary{}, fmt.Errorf("%s: %w", name, err)
		}
		for mname, m := range res.Modules {
			if shipped[string(m.Raw)] {
				continue // the shipped library's own file, loaded once above
			}
			modules[name+"/"+strings.TrimPrefix(mname, "/")] = m.Parsed
		}
		for k, v := range res.Documents {
			if _, dup := data[k]; dup {
				return TestSummary{}, fmt.Errorf("%s: data document %q is defined twice", name, k)
			}
			data[k] = v
		}
	}
	// As serve refuses them (prepare): with the library loaded apart, a
	// tree's rules at its table are the user's (a tree tested without it
	// is the library itself).
	userModule := func(name string) bool { return !library[name] && !strings.HasSuffix(name, "_test.rego") }
	if ref, at := definesAny(modules, userModule, libraryTableRefs...); opts.Library != nil && at != "" {
		return TestSummary{}, fmt.Errorf("%s is the shipped library's; %s defines it: serve the table at data.toolgate.rules", ref, at)
	}
	if opts.RulesFile != "" {
		// As load serves it; the trees may not serve one beside it.
		b := &bundle{data: data}
		src, err := os.ReadFile(opts.RulesFile)
		if err != nil {
			return TestSummary{}, fmt.Errorf("rules file: %w", err)
		}
		rules, err := ParseRules(src)
		if err != nil {
			return TestSummary{}, fmt.Errorf("%s: %w", opts.RulesFile, err)
		}
		if err := b.setRules(rules); err != nil {
			return TestSummary{}, err
		}
		// Without its index: the library then reads the table as it is,
		// so a test's own rows (with data.toolgate.rules as …) are the
		// ones decided, as they are without -rules. The index only
		// speeds a call up.
		delete(data["toolgate"].(map[string]any), "rules_index")
		if ref, at := definesAny(modules, userModule, rulesRef, rulesIndexRef, rulesCheckedRef); at != "" {
			// As serve refuses it: the rules file's table, or toolgate's
			// own beside it.
			return TestSummary{}, fmt.Errorf("%s is served by -rules, and %s defines it too", ref, at)
		}
	}
	// Run untraced, then the tests that failed again traced, so that the
	// report names the expression that failed and its variables' values,
	// as opa test --var-values does, without every passing test keeping
	// its trace.
	results, err := runTests(ctx, modules, data, caps, opts.Run, false)
	if err != nil {
		return TestSummary{}, err
	}
	var failed []string
	for _, res := range results {
		if res.Fail || res.Error != nil {
			failed = append(failed, regexp.QuoteMeta(res.Package+"."+res.Name))
		}
	}
	if len(failed) > 0 {
		traced, err := runTests(ctx, modules, data, caps, "^(?:"+strings.Join(failed, "|")+")$", true)
		if err != nil {
			return TestSummary{}, err
		}
		// The traced run stands in for a failure only where it failed
		// too, at the same place: a test that passed when run again (one
		// reading the clock, or one of two tests of one name, which OPA
		// renames in no fixed order) keeps its failure, untraced.
		byPlace := map[string]*tester.Result{}
		for _, res := range traced {
			if res.Fail || res.Error != nil {
				byPlace[resultPlace(res)] = res
			}
		}
		for i, res := range results {
			if t, ok := byPlace[resultPlace(res)]; ok && (res.Fail || res.Error != nil) {
				results[i] = t
			}
		}
	}
	var sum TestSummary
	ch := make(chan *tester.Result, len(results))
	for _, res := range results {
		switch {
		case res.Error != nil:
			sum.Errored++
		case res.Fail:
			sum.Failed++
		case res.Skip:
			sum.Skipped++
		default:
			sum.Passed++
		}
		ch <- res
	}
	close(ch)
	if err := (tester.PrettyReporter{Output: out, Verbose: opts.Verbose, FailureLine: true, LocalVars: true}).Report(ch); err != nil {
		return sum, err
	}
	return sum, nil
}

// resultPlace names a test result by its test's name and where the test
// is written.
func resultPlace(res *tester.Result) string {
	place := res.Package + "." + res.Name
	if res.Location != nil {
		place += "@" + res.Location.File + ":" + strconv.Itoa(res.Location.Row)
	}
	return place
}

// runTests runs the tests of modules whose name filter matches (all for
// ""), traced or not, and returns their results in the runner's order.
func runTests(ctx context.Context, modules map[string]*ast.Module, data map[string]any, caps *ast.Capabilities, filter string, traced bool) ([]*tester.Result, error) {
	r := tester.NewRunner().
		SetCompiler(ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1).WithEnablePrintStatements(true).WithCapabilities(caps)).
		SetStore(inmem.NewFromObject(data)).
		CapturePrintOutput(true).
		EnableTracing(traced).
		RaiseBuiltinErrors(true)
	if filter != "" {
		r = r.Filter(filter)
	}
	ch, err := r.SetModules(modules).RunTests(ctx, nil)
	if err != nil {
		var astErrs ast.Errors
		if errors.As(err, &astErrs) {
			explainRefused(astErrs)
		}
		return nil, err
	}
	var results []*tester.Result
	for res := range ch {
		results = append(results, res)
	}
	return results, nil
}

// libraryTree names the shipped library's modules apart from the trees'.
const libraryTree = "toolgate-library"

func loadTree(fsys fs.FS, filter loader.Filter) (*loader.Result, error) {
	return loader.NewFileLoader().
		WithFS(fsys).
		WithRegoVersion(ast.RegoV1).
		WithProcessAnnotation(true).
		Filtered([]string{"."}, filter)
}

// skipNonRegoOrData is skipNonPolicy with the _test.rego files kept.
func skipNonRegoOrData(abspath string, info fs.FileInfo, depth int) bool {
	if !info.IsDir() && strings.HasSuffix(info.Name(), "_test.rego") {
		return false
	}
	return skipNonPolicy(abspath, info, depth)
}
