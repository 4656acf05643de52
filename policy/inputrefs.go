package policy

import "github.com/open-policy-agent/opa/v1/ast"

// inputReads is what of the input document a compiled policy can read:
// the top-level keys its modules name, and for each the second-level keys
// (nil: the whole value). Building the input as an OPA value is a large
// part of a decision's cost (the request's headers, query and claims
// become dozens of terms), so Decide builds only what the policy can see.
// A policy cannot observe a key it never names, so leaving it out changes
// no decision; TestInputReadsDecideAlike holds that on every shape of
// reference. Any reference this analysis cannot bound (input as a whole,
// input[x] with a variable, with input as ...) makes it read everything.
type inputReads struct {
	all  bool
	keys map[string]map[string]bool // top-level key → second-level keys, nil for all of it
}

// everything is the analysis of a policy that reads the whole input.
var everything = &inputReads{all: true}

// analyseInputReads walks every module as parsed (compiling binds input
// to generated locals, which would hide what is read), rule bodies,
// heads, functions, comprehensions and imports alike. It is deliberately
// over-inclusive: a module that no decision rule reaches still counts,
// and an import of input.k counts as reading all of input.k.
func analyseInputReads(modules map[string]*ast.Module) *inputReads {
	r := &inputReads{keys: map[string]map[string]bool{}}
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		switch x := x.(type) {
		case *ast.Expr:
			// object.get(input, path, default) reads input at path: the
			// shipped library reads input.mcp.method so.
			if x.IsCall() && x.Operator().Equal(ast.ObjectGet.Ref()) {
				return r.objectGet(vis, x.Operands(), x.With)
			}
		case ast.Call:
			if len(x) > 0 && x[0].Value.Compare(ast.ObjectGet.Ref()) == 0 {
				return r.objectGet(vis, x[1:], nil)
			}
		case *ast.Head:
			// The walker visits a head's key and value but not its
			// reference, whose parts may read input (a.b[input.k] := v);
			// the rest of the head it walks as usual.
			for _, t := range x.Reference[1:] {
				vis.Walk(t)
			}
		case *ast.Term:
			return r.term(vis, x.Value)
		case ast.Value:
			return r.term(vis, x)
		}
		return false
	})
	for _, m := range modules {
		if vis.Walk(m); r.all {
			return everything
		}
	}
	return r
}

// term records a reference into input, or a bare input; true when it
// walked the value's parts itself.
func (r *inputReads) term(vis *ast.GenericVisitor, v ast.Value) bool {
	switch v := v.(type) {
	case ast.Var:
		// A bare input, outside a reference.
		if v.Equal(ast.InputRootDocument.Value) {
			r.all = true
		}
	case ast.Ref:
		if v.HasPrefix(ast.InputRootRef) {
			r.add(v)
		}
		// The other parts may hold refs of their own (x[input.k]); so
		// may a head that is not a variable: a call, an array or a
		// comprehension (object.get(input, "k", {}).id, [input][0].k).
		if _, ok := v[0].Value.(ast.Var); !ok {
			vis.Walk(v[0])
		}
		for _, e := range v[1:] {
			vis.Walk(e)
		}
		return true
	}
	return false
}

// objectGet records object.get(obj, path, default) with obj = input as the
// reference input.path; true when it walked the operands itself.
func (r *inputReads) objectGet(vis *ast.GenericVisitor, ops []*ast.Term, with []*ast.With) bool {
	if len(ops) < 2 || !isInput(ops[0]) {
		return false
	}
	ref := ast.InputRootRef.Copy()
	switch p := ops[1].Value.(type) {
	case ast.String:
		ref = append(ref, ops[1])
	case *ast.Array:
		p.Foreach(func(t *ast.Term) { ref = append(ref, t) })
	}
	if len(ref) < 2 || !ast.IsConstant(ops[1].Value) {
		r.all = true
		return true
	}
	r.add(ref)
	for _, t := range ops[2:] {
		vis.Walk(t)
	}
	for _, w := range with {
		vis.Walk(w)
	}
	return true
}

// isInput says whether t is the bare input document, as a var (parsed)
// or as the ref "input".
func isInput(t *ast.Term) bool {
	switch v := t.Value.(type) {
	case ast.Var:
		return v.Equal(ast.InputRootDocument.Value)
	case ast.Ref:
		return v.Equal(ast.InputRootRef)
	}
	return false
}

// add records one reference into input.
func (r *inputReads) add(ref ast.Ref) {
	if len(ref) < 2 {
		r.all = true
		return
	}
	top, ok := ref[1].Value.(ast.String)
	if !ok {
		r.all = true
		return
	}
	subs, seen := r.keys[string(top)]
	if seen && subs == nil {
		return // already the whole of it
	}
	if len(ref) < 3 {
		r.keys[string(top)] = nil
		return
	}
	sub, ok := ref[2].Value.(ast.String)
	if !ok {
		r.keys[string(top)] = nil
		return
	}
	if subs == nil {
		subs = map[string]bool{}
		r.keys[string(top)] = subs
	}
	subs[string(sub)] = true
}

// top says whether the top-level key k is read at all.
func (r *inputReads) top(k string) bool {
	if r.all {
		return true
	}
	_, ok := r.keys[k]
	return ok
}

// sub says whether the second-level key s of k is read.
func (r *inputReads) sub(k, s string) bool {
	if r.all {
		return true
	}
	subs, ok := r.keys[k]
	return ok && (subs == nil || subs[s])
}
