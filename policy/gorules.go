package policy

import (
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// goRules are the decision rules of package toolgate (the user's) run in
// Go, when every one of them has the shape teams write most: a constant
// reason (or true) if a conjunction of tests of input values against
// constants, such as
//
//	deny contains {"id": "no-etc", "message": "nothing under /etc"} if startswith(input.tool.arguments.path, "/etc")
//	ask contains "a person reads it first" if { input.tool.name == "send_mail"; not endswith(input.tool.arguments.to, "@example.com") }
//	allow if input.subject.id in {"ci", "release"}
//
// OPA's evaluation of such a rule costs ~8 µs and ~90 allocations a call
// (query setup, a store transaction, its caches, converting the result);
// this costs a few map lookups. It reads the rules as the compiler left
// them (imports resolved, refs passed to built-ins bound to locals first),
// evaluates their expressions in the compiler's order on the values OPA's
// input document would hold (read from the call where Input.lookup knows
// them, else from the document), and builds the result OPA's query would
// have.
//
// Where it could differ from OPA it does not answer, and Decide asks OPA:
// a built-in given a value of the wrong type (OPA's error), a value inside
// an array, a number a float64 cannot hold (OPA's rule index tells 1e400
// and 1E400 apart), and, before anything is read from the call, any value
// the input document could not be built from (Input.convertible). So
// errors and every unusual case are OPA's own. A policy with any other shape (helper rules, functions,
// variables, comprehensions, other built-ins, `with`, data) is evaluated
// by OPA alone. TestGoRulesMatchOPA holds both forms together on generated
// policies and inputs.
type goRules struct {
	rules [len(ruleNames)][]goRule
	// multi[i] is true when rule i is a set of reasons ("contains"),
	// false when it is a boolean ("if" alone).
	multi [len(ruleNames)]bool
}

// goRule is one rule: its reason (nil for a boolean rule) and its body.
type goRule struct {
	reason *ast.Term
	body   []goExpr
}

type goOp uint8

const (
	opBind       goOp = iota // local = value
	opTruthy                 // value: defined and not false
	opUnify                  // a = b, both known
	opEqual                  // a == b
	opNotEqual               // a != b
	opLess                   // a < b
	opLessEq                 // a <= b
	opGreater                // a > b
	opGreaterEq              // a >= b
	opStartsWith             // startswith(a, b)
	opEndsWith               // endswith(a, b)
	opContains               // contains(a, b)
	opMember                 // a in b (b a constant collection)
)

// goOps are the built-ins goRules runs, by the name in compiled rules.
var goOps = map[string]goOp{
	ast.Equality.Name: opUnify, ast.Equal.Name: opEqual, ast.NotEqual.Name: opNotEqual,
	ast.LessThan.Name: opLess, ast.LessThanEq.Name: opLessEq, ast.GreaterThan.Name: opGreater,
	ast.GreaterThanEq.Name: opGreaterEq, ast.StartsWith.Name: opStartsWith, ast.EndsWith.Name: opEndsWith,
	ast.Contains.Name: opContains, ast.Member.Name: opMember,
}

// goExpr is one expression of a body.
type goExpr struct {
	op      goOp
	negated bool
	args    [2]goArg // args[0] alone for opTruthy and opBind
	local   int      // opBind: the local it binds
}

// goArg is an operand: an input value, a local bound earlier or a constant.
type goArg struct {
	path  []*ast.Term // input.<path>, each a string
	local int         // ≥ 0: a local
	c     ast.Value   // a constant
}

// newGoRules compiles the rules names (indexes into ruleNames) of package
// toolgate, or returns nil when any of them has another shape or the data
// defines one.
func newGoRules(c *ast.Compiler, data map[string]any, names []int) *goRules {
	if tg, _ := data["toolgate"].(map[string]any); len(tg) > 0 {
		for _, i := range names {
			if _, inData := tg[ruleNames[i]]; inData {
				return nil
			}
		}
	}
	g := &goRules{}
	pkg := ast.MustParseRef("data.toolgate")
	for _, i := range names {
		name := ruleNames[i]
		for _, r := range c.GetRules(pkg.Append(ast.StringTerm(name))) {
			if !r.Module.Package.Path.Equal(pkg) || !r.Head.Ref().Equal(ast.Ref{ast.VarTerm(name)}) ||
				r.Default || r.Else != nil || len(r.Head.Args) > 0 {
				return nil
			}
			rule := goRule{}
			switch r.Head.RuleKind() {
			case ast.MultiValue:
				if r.Head.Key == nil || !ast.IsConstant(r.Head.Key.Value) {
					return nil
				}
				rule.reason = r.Head.Key
				g.multi[i] = true
			case ast.SingleValue:
				if r.Head.Key != nil || r.Head.Value == nil || !r.Head.Value.Equal(ast.BooleanTerm(true)) {
					return nil
				}
			default:
				return nil
			}
			if len(g.rules[i]) > 0 && g.multi[i] != (rule.reason != nil) {
				return nil
			}
			var ok bool
			if rule.body, ok = compileBody(r.Body); !ok {
				return nil
			}
			g.rules[i] = append(g.rules[i], rule)
		}
	}
	return g
}

// compileBody compiles a rule body, or reports that it has another shape.
func compileBody(body ast.Body) ([]goExpr, bool) {
	locals := map[ast.Var]int{}
	out := make([]goExpr, 0, len(body))
	for _, e := range body {
		if len(e.With) > 0 {
			return nil, false
		}
		x := goExpr{negated: e.Negated}
		switch {
		case e.IsCall():
			op, known := goOps[e.Operator().String()]
			operands := e.Operands()
			if !known || len(operands) != 2 {
				return nil, false
			}
			x.op = op
			if op == opUnify {
				// local = value: the compiler binds a ref it passes to a
				// built-in to a new local first.
				if v, isVar := operands[0].Value.(ast.Var); isVar && !e.Negated {
					if _, bound := locals[v]; !bound {
						a, ok := compileArg(operands[1], locals)
						if !ok {
							return nil, false
						}
						x.op, x.args[0], x.local = opBind, a, len(locals)
						locals[v] = len(locals)
						out = append(out, x)
						continue
					}
				}
			}
			for j, t := range operands {
				a, ok := compileArg(t, locals)
				if !ok {
					return nil, false
				}
				x.args[j] = a
			}
			if op == opMember && !isCollection(x.args[1].c) {
				return nil, false
			}
		case isTerm(e):
			a, ok := compileArg(e.Terms.(*ast.Term), locals)
			if !ok || a.c != nil {
				return nil, false
			}
			x.op, x.args[0] = opTruthy, a
		default:
			return nil, false
		}
		out = append(out, x)
	}
	return out, true
}

// compileArg compiles an operand: input.<strings>, a bound local or a
// constant.
func compileArg(t *ast.Term, locals map[ast.Var]int) (goArg, bool) {
	switch v := t.Value.(type) {
	case ast.Var:
		if i, bound := locals[v]; bound {
			return goArg{local: i}, true
		}
		return goArg{}, false
	case ast.Ref:
		if !v[0].Equal(ast.InputRootDocument) {
			return goArg{}, false
		}
		for _, k := range v[1:] {
			if _, isString := k.Value.(ast.String); !isString {
				return goArg{}, false
			}
		}
		return goArg{path: v[1:], local: -1}, true
	}
	if !ast.IsConstant(t.Value) || !plain(t.Value) {
		return goArg{}, false
	}
	return goArg{c: t.Value, local: -1}, true
}

func isTerm(e *ast.Expr) bool {
	_, ok := e.Terms.(*ast.Term)
	return ok
}

func isCollection(v ast.Value) bool {
	switch v.(type) {
	case ast.Set, *ast.Array, ast.Object:
		return true
	}
	return false
}

// eval evaluates the rules on input and returns, for each name of
// ruleNames they define, what the query `[x | x := data.toolgate.<name>]`
// gives in Go. ok is false when it cannot answer as OPA would (a built-in
// given a value of the wrong type, a value it does not walk): the caller
// then asks OPA.
func (g *goRules) eval(input goInput) (out [len(ruleNames)]any, ok bool) {
	var locals [8]ast.Value
	for i, rules := range g.rules {
		if len(rules) == 0 {
			continue
		}
		var fired []*ast.Term
		for _, r := range rules {
			holds, sure := r.holds(input, locals[:0])
			if !sure {
				return out, false
			}
			// Every rule is evaluated, a boolean one's too after one held:
			// OPA does, so an error in any of them is OPA's to give.
			if holds {
				fired = append(fired, r.reason)
			}
		}
		switch {
		case g.multi[i] && len(fired) == 0:
			out[i] = []any{[]any{}}
		case g.multi[i]:
			// A set of reasons, in the order (and without the duplicates)
			// OPA's set gives them.
			v, err := ast.JSONWithOpt(ast.NewSet(fired...), ast.JSONOpt{})
			if err != nil {
				return out, false
			}
			out[i] = []any{v}
		case len(fired) > 0:
			out[i] = []any{true}
		default:
			out[i] = []any{}
		}
	}
	return out, true
}

// holds evaluates a rule's body: whether it holds, and whether the answer
// is sure (see eval).
func (r *goRule) holds(input goInput, locals []ast.Value) (holds, sure bool) {
	for _, x := range r.body {
		if x.op == opBind {
			v, defined, sure := x.args[0].value(input, locals)
			if !sure {
				return false, false
			}
			if !defined {
				return false, true
			}
			if x.local >= cap(locals) {
				return false, false
			}
			locals = append(locals[:x.local], v)
			continue
		}
		t, sure := x.test(input, locals)
		if !sure {
			return false, false
		}
		if t == x.negated {
			return false, true
		}
	}
	return true, true
}

// test evaluates a test expression (not negated): whether it holds, and
// whether the answer is sure. An undefined operand makes it not hold.
func (x *goExpr) test(input goInput, locals []ast.Value) (holds, sure bool) {
	a, defined, sure := x.args[0].value(input, locals)
	if !sure || !defined {
		return false, sure
	}
	if x.op == opTruthy {
		return !ast.ValueEqual(ast.Boolean(false), a), true
	}
	b, defined, sure := x.args[1].value(input, locals)
	if !sure || !defined {
		return false, sure
	}
	if (x.args[0].c == nil && !plain(a)) || (x.args[1].c == nil && !plain(b)) {
		return false, false // constants were checked when compiled
	}
	switch x.op {
	case opUnify, opEqual:
		return ast.ValueEqual(a, b), true
	case opNotEqual:
		return !ast.ValueEqual(a, b), true
	case opLess:
		return a.Compare(b) < 0, true
	case opLessEq:
		return a.Compare(b) <= 0, true
	case opGreater:
		return a.Compare(b) > 0, true
	case opGreaterEq:
		return a.Compare(b) >= 0, true
	case opMember:
		return member(a, b), true
	}
	s, isString := a.(ast.String)
	t, isString2 := b.(ast.String)
	if !isString || !isString2 {
		return false, false // OPA's type error: OPA answers
	}
	switch x.op {
	case opStartsWith:
		return strings.HasPrefix(string(s), string(t)), true
	case opEndsWith:
		return strings.HasSuffix(string(s), string(t)), true
	case opContains:
		return strings.Contains(string(s), string(t)), true
	}
	return false, false
}

// plain reports whether v holds only numbers a float64 holds: OPA's rule
// index hashes any other number by its text (1e400 and 1E400 apart, where
// comparing them says equal), and comparing a number that is not one
// panics, so for such values OPA answers.
func plain(v ast.Value) bool {
	switch x := v.(type) {
	case ast.Number:
		_, ok := x.Float64()
		return ok
	case *ast.Array:
		return !x.Until(func(e *ast.Term) bool { return !plain(e.Value) })
	case ast.Object:
		return !x.Until(func(k, e *ast.Term) bool { return !plain(k.Value) || !plain(e.Value) })
	case ast.Set:
		return !x.Until(func(e *ast.Term) bool { return !plain(e.Value) })
	}
	return true
}

// member is OPA's internal.member_2 on a collection.
func member(x, coll ast.Value) bool {
	switch c := coll.(type) {
	case ast.Set:
		return c.Contains(ast.NewTerm(x))
	case *ast.Array:
		return c.Until(func(e *ast.Term) bool { return ast.ValueEqual(x, e.Value) })
	case ast.Object:
		return c.Until(func(_, v *ast.Term) bool { return ast.ValueEqual(x, v.Value) })
	}
	return false
}

// value resolves an operand: its value, whether it is defined, and
// whether the answer is sure.
func (a *goArg) value(input goInput, locals []ast.Value) (v ast.Value, defined, sure bool) {
	switch {
	case a.c != nil:
		return a.c, true, true
	case a.local >= 0:
		if a.local >= len(locals) {
			return nil, false, false
		}
		return locals[a.local], true, true
	}
	return input.get(a.path)
}

// goInput is the input goRules read: the call itself (Input.lookup) or,
// where that does not know a value, the document OPA would get.
type goInput struct {
	in  *Input
	doc ast.Value
}

func (g goInput) get(path []*ast.Term) (v ast.Value, defined, sure bool) {
	if g.doc == nil {
		return g.in.lookup(path)
	}
	v = g.doc
	for _, k := range path {
		switch o := v.(type) {
		case ast.Object:
			t := o.Get(k)
			if t == nil {
				return nil, false, true
			}
			v = t.Value
		case ast.Set, *ast.Array:
			return nil, false, false // OPA indexes these by value: OPA answers
		default:
			return nil, false, true // a scalar has no fields
		}
	}
	return v, true, true
}
