package policy

import (
	"encoding/json"

	"github.com/open-policy-agent/opa/v1/ast"
)

// lookup is the value at input.<path> of the document valueFor builds,
// read from in without building the document: what goRules reads most
// (the tool's name, target and arguments, the subject's ID, the kind,
// phase and method). defined is false when the document has nothing
// there; sure is false for a path lookup does not know, and the caller
// then builds the document (valueFor) and reads it there. Both must agree:
// TestGoRulesMatchOPA compares goRules, which reads through lookup, with
// OPA, which reads the document.
func (in *Input) lookup(path []*ast.Term) (v ast.Value, defined, sure bool) {
	if len(path) < 1 {
		return nil, false, false
	}
	top, _ := path[0].Value.(ast.String)
	switch rest := path[1:]; top {
	case "kind":
		return leaf(term(in.Kind).Value, rest)
	case "mode":
		mode := in.Mode
		if mode == "" {
			mode = ModeDefault
		}
		return leaf(term(mode).Value, rest)
	case "phase":
		phase := in.Phase
		if phase == "" {
			phase = PhaseCall
		}
		return leaf(term(phase).Value, rest)
	case "subject":
		if len(rest) == 0 {
			return nil, false, false
		}
		switch k, _ := rest[0].Value.(ast.String); k {
		case "id":
			return leaf(ast.String(in.Subject.ID), rest[1:])
		case "authenticated":
			return leaf(ast.Boolean(in.Subject.Authenticated), rest[1:])
		}
	case "http":
		if len(rest) > 0 && ast.String("method").Equal(rest[0].Value) {
			return leaf(term(in.HTTP.Method).Value, rest[1:])
		}
	case "tool":
		if in.Tool == nil {
			return nil, false, true
		}
		return in.Tool.lookup(rest, !in.listing())
	}
	return nil, false, false
}

func (t *Tool) lookup(path []*ast.Term, args bool) (v ast.Value, defined, sure bool) {
	if len(path) == 0 {
		return nil, false, false
	}
	k, _ := path[0].Value.(ast.String)
	rest := path[1:]
	switch k {
	case "name":
		return leaf(ast.String(t.Name), rest)
	case "target", "target_raw", "target_escapes":
		if !t.HasTarget {
			return nil, false, true
		}
		switch k {
		case "target":
			return leaf(ast.String(t.Target), rest)
		case "target_raw":
			return leaf(ast.String(t.TargetRaw), rest)
		}
		return leaf(ast.Boolean(t.TargetEscapes), rest)
	case "arguments":
		if !args {
			return nil, false, true // a listed tool has none (Input.listing)
		}
		var x any = t.Arguments
		for _, p := range rest {
			switch m := x.(type) {
			case map[string]any:
				key, _ := p.Value.(ast.String)
				var present bool
				if x, present = m[string(key)]; !present {
					return nil, false, true
				}
			case string, json.Number, float64, bool, nil:
				return nil, false, true // a scalar has no fields
			default:
				return nil, false, false // an array, or a type JSON does not decode to: the document answers
			}
		}
		if m, isMap := x.(map[string]any); isMap && len(m) == 0 {
			return emptyObject.Value, true, true // as objectTerm gives it
		}
		v, err := ast.InterfaceToValue(x)
		if err != nil {
			return nil, false, false
		}
		return v, true, true
	}
	return nil, false, false
}

// leaf is v at the end of path: a string or boolean has no fields.
func leaf(v ast.Value, rest []*ast.Term) (ast.Value, bool, bool) {
	if len(rest) > 0 {
		return nil, false, true
	}
	return v, true, true
}

// convertible reports whether every free-form value of in that valueFor
// converts for a policy reading r (the arguments, annotations, claims and
// JSON-RPC ID) converts without error. Where one does not, valueFor fails
// and so does the decision, whatever a rule reads: goRules must not read
// the call through lookup then, but build the document and fail as OPA's
// path does.
func (in *Input) convertible(r *inputReads) bool {
	if t := in.Tool; t != nil && r.top("tool") {
		if r.sub("tool", "arguments") && !in.listing() && !convertible(t.Arguments) {
			return false
		}
		if r.sub("tool", "annotations") && !convertible(t.Annotations) {
			return false
		}
	}
	if r.sub("subject", "claims") && !convertible(in.Subject.Claims) {
		return false
	}
	if in.MCP != nil && in.MCP.ID != nil && r.top("mcp") && !convertible(in.MCP.ID) {
		return false
	}
	if in.MCP != nil && len(in.MCP.Params) > 0 && r.sub("mcp", "params") && !convertible(in.MCP.Params) {
		return false
	}
	return true
}

// convertible mirrors ast.InterfaceToValue: whether x converts without
// error, for the types JSON decodes to (anything else: no).
func convertible(x any) bool {
	switch x := x.(type) {
	case nil, bool, string, float64, int, int64, uint64, []string, map[string]string:
		return true
	case json.Number:
		_, err := ast.NumberChecked(string(x))
		return err == nil
	case []any:
		for _, e := range x {
			if !convertible(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !convertible(e) {
				return false
			}
		}
		return true
	}
	return false
}
