package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"go.yaml.in/yaml/v3"
)

// servedRule is a row of a rules table served as data (a data file's
// data.toolgate.rules, or the user's Rego): a rules file's row, with the two
// keys rulesData writes, which the library reads when a row has them.
type servedRule struct {
	Rule       `yaml:",inline"`
	ToolGlob   *bool `yaml:"tool_glob"`
	TargetGlob *bool `yaml:"target_glob"`
}

// checkServedTable holds a rules table served as data, as evaluated when
// the policy loads (an array of rows, or an object of them), to a rules
// file's checks: a row with a key the library does not read, a bad
// effect or a malformed glob would otherwise be skipped by the library,
// and a deny row with a typo would let through what it was written to
// stop.
func checkServedTable(table any) error {
	const at = "data.toolgate.rules"
	var rows []any
	switch t := table.(type) {
	case []any:
		rows = t
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			rows = append(rows, t[k])
		}
	default:
		return fmt.Errorf("%s is neither an array nor an object of rows", at)
	}
	rules := make([]Rule, len(rows))
	var errs []error
	for i, row := range rows {
		m, ok := row.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("%s[%d] is not an object", at, i))
			continue
		}
		// The decoder below would read 22 as "22"; the library reads a
		// number, and fails every call the row reaches.
		if err := rowTypes(m); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", at, i, err))
			continue
		}
		b, err := json.Marshal(row)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", at, i, err))
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		var r servedRule
		if err := dec.Decode(&r); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", at, i, err))
			continue
		}
		rules[i] = r.Rule
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return checkRules(rules, at)
}

// rowTypes checks the types of a served row's scalar members, which the
// library reads as they are: strings, and booleans.
func rowTypes(row map[string]any) error {
	for _, k := range slices.Sorted(maps.Keys(row)) {
		var ok bool
		switch v := row[k]; k {
		case "id", "effect", "tool", "target", "message":
			_, ok = v.(string)
		case "read_only", "must_ask", "tool_glob", "target_glob":
			_, ok = v.(bool)
		default:
			ok = true // unknown keys are refused by name, below
		}
		if !ok {
			return fmt.Errorf("%s is %s", k, typeOf(row[k]))
		}
	}
	return nil
}

// typeOf names a JSON value's type as Rego's authors know it: "a
// number", "an object", … (not Go's: json.Number, map[string]interface {}).
func typeOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number"
}

// libraryTableRefs are where the shipped library reads the rules table
// (its rules and candidates rules).
var libraryTableRefs = []ast.Ref{ast.MustParseRef("data.toolgate.lib.rules"), ast.MustParseRef("data.toolgate.lib.candidates")}

var (
	rulesRef      = ast.MustParseRef("data.toolgate.rules")
	rulesIndexRef = ast.MustParseRef("data.toolgate.rules_index")
)

// regoDefines names where the user's Rego defines a rule at ref, or
// within it, or one that may produce it (a rule above it with a key
// from the call), as file:line; "" when it does not.
func regoDefines(c *ast.Compiler, ref ast.Ref) string {
	_, at := definesAny(c.Modules, func(name string) bool { return !strings.HasPrefix(name, "lib/") }, ref)
	return at
}

// definesAny finds, among the modules whose names user keeps, (sorted by
// name, so the same one is named each time) a rule at, within or above
// one of refs: the ref, and where as file:line; "" when there is none.
// It reads the modules as parsed, so it serves the test runner's, which
// are not compiled, and the engine's alike.
func definesAny(modules map[string]*ast.Module, user func(name string) bool, refs ...ast.Ref) (ast.Ref, string) {
	for _, name := range slices.Sorted(maps.Keys(modules)) {
		if !user(name) {
			continue
		}
		m := modules[name]
		for _, r := range m.Rules {
			p := m.Package.Path.Extend(r.Head.Ref().GroundPrefix())
			for _, ref := range refs {
				if !p.HasPrefix(ref) && !ref.HasPrefix(p) {
					continue
				}
				if r.Location != nil {
					return ref, fmt.Sprintf("%s:%d", r.Location.File, r.Location.Row)
				}
				return ref, name
			}
		}
	}
	return nil, ""
}

// checkRegoRows checks the rows of a table the user's Rego defines that
// can be read without a call, rule by rule (else branches included): a
// rule's value (rules := […], rules[k] := {…}) or member (rules contains
// {…}), where it is known before the call. The table as a whole is not,
// when some of its rules hold only for some calls; their rows are checked
// all the same, so that a typo in a row that holds for a call alone is
// refused at load too. Values built from the call, or that this cannot
// read (a function's, a with's), are left to the library, which denies a
// call that reads a row it cannot use (toolgate.bad_row). The check takes
// at most timeout in all: past it, the rules left are left to the library.
func checkRegoRows(ctx context.Context, timeout time.Duration, c *ast.Compiler, caps *ast.Capabilities, store storage.Store) error {
	ctx, done := context.WithTimeout(ctx, timeout)
	defer done()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.Modules)) {
		if strings.HasPrefix(name, "lib/") {
			continue
		}
		for _, first := range c.Modules[name].Rules {
			// rules := […] (a table), rules[k] := {…} (a row of an
			// object), rules contains {…} (a row of a set).
			ref := first.Ref()
			if !ref.GroundPrefix().HasPrefix(rulesRef) || len(ref) > len(rulesRef)+1 {
				continue
			}
			for r := first; r != nil && ctx.Err() == nil; r = r.Else {
				h := r.Head
				term, table := h.Value, len(ref) == len(rulesRef)
				if h.RuleKind() == ast.MultiValue {
					term, table = h.Key, false
				}
				if term == nil {
					continue
				}
				for _, v := range evalTerm(ctx, c, caps, store, bound(r.Body, term)) {
					if !table {
						v = []any{v}
					}
					if err := checkServedTable(v); err != nil {
						errs = append(errs, fmt.Errorf("%s:%d: %w", r.Location.File, r.Location.Row, err))
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// bound is what term stands for: the compiler writes a head's value
// other than a constant as a variable of the rule, which its body binds
// (__local0__ = data.toolgate.fs_rows); term itself otherwise.
func bound(body ast.Body, term *ast.Term) *ast.Term {
	v, ok := term.Value.(ast.Var)
	if !ok {
		return term
	}
	for _, e := range body {
		if !e.IsEquality() || e.Negated {
			continue
		}
		l, r := e.Operand(0), e.Operand(1)
		if l.Value.Compare(v) == 0 {
			return r
		}
		if r.Value.Compare(v) == 0 {
			return l
		}
	}
	return term
}

// evalTerm evaluates term without input: each value it takes (none when
// it reads the call or a variable of its rule).
func evalTerm(ctx context.Context, c *ast.Compiler, caps *ast.Capabilities, store storage.Store, term *ast.Term) []any {
	x := ast.VarTerm("x")
	rs, err := rego.New(
		rego.ParsedQuery(ast.NewBody(ast.Equality.Expr(x, term))),
		rego.Compiler(c),
		rego.Capabilities(caps),
		rego.Store(store),
		rego.StrictBuiltinErrors(true),
	).Eval(ctx)
	if err != nil {
		return nil
	}
	var out []any
	for _, r := range rs {
		if v, ok := r.Bindings["x"]; ok {
			out = append(out, v)
		}
	}
	return out
}

// rulesCheckedRef is where the library learns that the table was checked
// whole as the policy loaded (tableChecked), and need not check its rows
// again at every call (toolgate.bad_row).
var rulesCheckedRef = ast.MustParseRef("data.toolgate.rules_checked")

// tableChecked reports whether the rules table is one the load checks
// whole, and that cannot change until the next load: a rules file's
// (ParseRules) or a data file's (servedRows evaluates it, and
// checkServedTable refuses it whole). A table the user's Rego defines, or
// adds to, is not: it may be undefined at load and defined per call, or
// change with the call, the clock, a random number or a service it
// fetches, so its rows are checked at each call.
func tableChecked(b *bundle, c *ast.Compiler) bool {
	return b.rulesFromFile || regoDefines(c, rulesRef) == ""
}
