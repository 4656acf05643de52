package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// Options configure an Engine.
type Options struct {
	// Library is the shipped library (package toolgate.lib), always loaded.
	Library fs.FS
	// Policies holds the user's .rego modules and .json/.yaml data files,
	// read again at every Reload (os.DirFS(policy.dir) in production).
	Policies fs.FS
	// RulesFile is the rules table (SPEC.md §6.3), read again at every Reload.
	RulesFile string
	// Default is what "no rule fired" means: Deny (the zero value) or Ask.
	Default Action
	// Logger receives reload reports. Nil discards them.
	Logger *slog.Logger
	// OnReload, if set, is called after every load attempt with the
	// revision now in force and the error of the attempt (nil on success).
	OnReload func(revision string, err error)
}

// Engine decides calls. It is safe for concurrent use; Reload swaps the
// whole compiled policy atomically.
type Engine struct {
	opts    Options
	current atomic.Pointer[prepared]
	mu      sync.Mutex // serialises Reload
}

// prepared is one compiled policy revision with its query prepared once.
type prepared struct {
	query    rego.PreparedEvalQuery
	revision string
	// compiler and store are the revision's compiled modules and data,
	// for other queries on the same revision (decision-log masks).
	compiler *ast.Compiler
	store    storage.Store
}

// decisionQuery reads the three rules of package toolgate (the user's) and
// of package toolgate.lib (the shipped library). Each comprehension is
// always defined: empty when the rule is undefined, else the rule's value,
// so a policy that defines only some of the rules still evaluates.
var decisionQuery = ast.MustParseBody(`
	deny := [x | x := data.toolgate.deny]
	ask := [x | x := data.toolgate.ask]
	allow := [x | x := data.toolgate.allow]
	read_only := [x | x := data.toolgate.read_only]
	lib_deny := [x | x := data.toolgate.lib.deny]
	lib_ask := [x | x := data.toolgate.lib.ask]
	lib_allow := [x | x := data.toolgate.lib.allow]
	lib_read_only := [x | x := data.toolgate.lib.read_only]
`)

// New loads and compiles the policy. An unreadable file, a parse or compile
// error or a bad rules table is an error: toolgate does not start on a
// policy it cannot read.
func New(ctx context.Context, opts Options) (*Engine, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Engine{opts: opts}
	p, err := e.prepare(ctx)
	if err != nil {
		return nil, err
	}
	e.current.Store(p)
	return e, nil
}

// Revision identifies the policy in force: a digest of every module, data
// file and the rules table.
func (e *Engine) Revision() string { return e.current.Load().revision }

// Reload loads and compiles the policy again. On failure the policy in
// force stays as it was and the error is returned.
func (e *Engine) Reload(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, err := e.prepare(ctx)
	old := e.current.Load()
	if err != nil {
		e.opts.Logger.Error("policy reload failed, keeping the last good policy", "revision", old.revision, "error", err)
		if e.opts.OnReload != nil {
			e.opts.OnReload(old.revision, err)
		}
		return err
	}
	e.current.Store(p)
	if p.revision != old.revision {
		e.opts.Logger.Info("policy reloaded", "revision", p.revision, "previous", old.revision)
	}
	if e.opts.OnReload != nil {
		e.opts.OnReload(p.revision, nil)
	}
	return nil
}

func (e *Engine) prepare(ctx context.Context) (*prepared, error) {
	b, err := load(&e.opts)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	c := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1)
	if c.Compile(b.modules); c.Failed() {
		return nil, fmt.Errorf("policy: compiling: %w", c.Errors)
	}
	store := inmem.NewFromObjectWithOpts(b.data, inmem.OptReturnASTValuesOnRead(true))
	pq, err := rego.New(
		rego.ParsedQuery(decisionQuery),
		rego.Compiler(c),
		rego.Store(store),
		rego.StoreReadAST(true),
		// A built-in that fails (a type error, a bad regex) is an error,
		// not "undefined": otherwise a deny rule hitting one would silently
		// not fire and the call could be allowed.
		rego.StrictBuiltinErrors(true),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("policy: preparing the decision query: %w", err)
	}
	return &prepared{query: pq, revision: b.revision, compiler: c, store: store}, nil
}

// Decide evaluates in and applies deny > ask > allow, the default for calls
// no rule matched, and the permission mode of in.Mode. An error means the
// policy could not be evaluated or gave a malformed result; the returned
// Decision is then Deny with the error as its reason, and callers must not
// forward the call.
func (e *Engine) Decide(ctx context.Context, in *Input) (Decision, error) {
	v, err := in.Value()
	if err != nil {
		return failed(err)
	}
	return e.decide(ctx, v, in.Mode)
}

// DecideValue is Decide for an input document given as an OPA value, as
// `toolgate policy eval` reads it from a file. The mode is the document's.
func (e *Engine) DecideValue(ctx context.Context, v ast.Value) (Decision, error) {
	mode := ""
	if obj, ok := v.(ast.Object); ok {
		if t := obj.Get(ast.InternedTerm("mode")); t != nil {
			s, ok := t.Value.(ast.String)
			if !ok {
				return failed(errors.New("policy: input mode is not a string"))
			}
			mode = string(s)
		}
	}
	return e.decide(ctx, v, mode)
}

func (e *Engine) decide(ctx context.Context, v ast.Value, mode string) (Decision, error) {
	p := e.current.Load()
	rs, err := p.query.Eval(ctx, rego.EvalParsedInput(v))
	if err != nil {
		return failed(fmt.Errorf("policy: evaluating: %w", err))
	}
	if len(rs) != 1 {
		return failed(errors.New("policy: the decision query is undefined"))
	}
	b := rs[0].Bindings
	var vs [3]verdict
	for i, name := range [3]string{"deny", "ask", "allow"} {
		if vs[i], err = verdictOf(name, b[name], b["lib_"+name]); err != nil {
			return failed(err)
		}
	}
	d := combine(vs[0], vs[1], vs[2], e.opts.Default)
	ro, err := verdictOf("read_only", b["read_only"], b["lib_read_only"])
	if err != nil {
		return failed(err)
	}
	d.ReadOnly = ro.fired
	return applyModeOrFail(d, mode)
}

func applyModeOrFail(d Decision, mode string) (Decision, error) {
	d, err := applyMode(d, mode)
	if err != nil {
		return failed(err)
	}
	return d, nil
}

// failed is the decision of a policy error: deny, with the error as reason.
func failed(err error) (Decision, error) {
	return Decision{Action: Deny, Reasons: []Reason{{ID: "toolgate.policy_error", Message: "policy error: " + err.Error()}}}, err
}

// verdictOf reads what rule name produced in each package. Each value is
// the result of `[x | x := data.<pkg>.<rule>]`: an empty array when the
// rule is undefined, else a one-element array holding a boolean (for
// "allow if ...") or a set of reasons (for "allow contains reason if ...").
// Any other shape is a malformed rule, which is an error (the call is denied).
func verdictOf(name string, vals ...any) (verdict, error) {
	var v verdict
	for _, val := range vals {
		arr, ok := val.([]any)
		if !ok {
			return verdict{}, fmt.Errorf("policy: rule %s: unexpected result %T", name, val)
		}
		for _, x := range arr {
			switch x := x.(type) {
			case bool:
				if x {
					v.fired = true
					v.reasons = append(v.reasons, Reason{ID: "toolgate." + name, Message: name + " rule fired"})
				}
			case []any: // a set arrives as an array
				for _, r := range x {
					reason, err := reasonOf(r)
					if err != nil {
						return verdict{}, fmt.Errorf("policy: rule %s: %w", name, err)
					}
					v.fired = true
					v.reasons = append(v.reasons, reason)
				}
			default:
				return verdict{}, fmt.Errorf("policy: rule %s must be a boolean or a set of reasons, not %T", name, x)
			}
		}
	}
	return v, nil
}

// reasonOf reads one reason: a string, or an object with a string
// "message", an optional string "id" and an optional boolean "must_ask".
func reasonOf(x any) (Reason, error) {
	switch x := x.(type) {
	case string:
		return Reason{Message: x}, nil
	case map[string]any:
		var r Reason
		var ok bool
		if r.Message, ok = x["message"].(string); !ok {
			return Reason{}, errors.New(`a reason object needs a string "message"`)
		}
		if id, present := x["id"]; present {
			if r.ID, ok = id.(string); !ok {
				return Reason{}, errors.New(`a reason's "id" must be a string`)
			}
		}
		if ma, present := x["must_ask"]; present {
			if r.MustAsk, ok = ma.(bool); !ok {
				return Reason{}, errors.New(`a reason's "must_ask" must be a boolean`)
			}
		}
		return r, nil
	}
	return Reason{}, fmt.Errorf("a reason must be a string or an object, not %T", x)
}
