package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"
	opaprint "github.com/open-policy-agent/opa/v1/topdown/print"
)

// Options configure an Engine.
type Options struct {
	// Library is the shipped library (package toolgate.lib), always loaded.
	Library fs.FS
	// NativeLibrary says Library is the shipped rego/lib, whose rules may
	// then be evaluated in Go (native.go) rather than by OPA, for speed.
	// The engine still falls back to OPA for a policy that extends the
	// library or serves its own table. Leave it off for any other library.
	NativeLibrary bool
	// Policies holds the user's .rego modules and .json/.yaml data files,
	// read again at every Reload (os.DirFS(policy.dir) in production).
	Policies fs.FS
	// RulesFile is the rules table (docs/policy.md, the rules table), read again at every Reload.
	RulesFile string
	// Capabilities names OPA built-ins policies may call beyond the safe
	// set: http.send, net.lookup_ip_addr, opa.runtime, json.match_schema
	// and json.verify_schema are refused at load unless listed here (see
	// capabilities.go). A name that is not an OPA built-in is an error.
	Capabilities []string
	// Default is what "no rule fired" means: Deny (the zero value) or Ask.
	Default Action
	// Timeout bounds one evaluation by OPA; past it Decide fails, which
	// callers answer as a deny. Zero means 5s. What the engine decides in
	// Go (the shipped library, rules of the shapes goRules takes) is a
	// bounded walk over the call and needs no clock, so a call decided
	// there sets no timer.
	Timeout time.Duration
	// ErrorDetail keeps an evaluation error's whole text. Off, what a
	// built-in function's error says beyond the function's name is cut,
	// since it may quote the call's arguments (evalerr.go). Turn it on
	// where the arguments may be shown: with log.arguments, and in the
	// policy commands, which evaluate an input the author wrote.
	ErrorDetail bool
	// Print receives what the policy's print() calls write, with where
	// (file:line). Nil drops them, as OPA does unless asked: the compiler
	// then removes the calls.
	Print func(location, message string)
	// Logger receives reload reports. Nil discards them.
	Logger *slog.Logger
	// OnReload, if set, is called after every load attempt with the
	// revision now in force and the error of the attempt (nil on success).
	OnReload func(revision string, err error)

	// noGoRules leaves package toolgate's rules to OPA even where they
	// could run in Go (goRules), for the tests that compare the two.
	noGoRules bool
}

// Engine decides calls. It is safe for concurrent use; Reload swaps the
// whole compiled policy atomically.
type Engine struct {
	opts    Options
	current atomic.Pointer[prepared]
	mu      sync.Mutex // serialises Reload
}

// prepared is one compiled policy revision with its queries prepared once.
type prepared struct {
	// full evaluates every rule in Rego, the shipped library's included.
	full rego.PreparedEvalQuery
	// native, when set, is the library evaluated in Go; then user holds
	// the query of what is left for OPA, the rules package toolgate
	// defines, and is nil when it defines none.
	native *nativeLib
	user   *rego.PreparedEvalQuery
	// userGo, when set, evaluates user's rules in Go (see goRules).
	userGo *goRules
	// userRules are the rules user reads, as indexes into ruleNames.
	userRules []int
	revision  string
	// misshapen says which decision rules can never give a decision
	// (checkRuleTypes); nil when all can.
	misshapen error
	// unread names the decision rules toolgate never reads (unreadRules).
	unread []string
	// compiler and store are the revision's compiled modules and data,
	// for other queries on the same revision (decision-log masks).
	compiler *ast.Compiler
	store    storage.Store
	// reads is what of the input the compiled modules can read; Decide
	// builds only that.
	reads *inputReads
	// toolCase knows the rules table's tool names without regard to case
	// (toolcase.go); nil for a table that names none.
	toolCase *toolCase
}

// ruleNames are the rules a policy contributes to.
var ruleNames = [...]string{"deny", "ask", "allow", "read_only"}

// fullQuery reads the four rules of package toolgate (the user's) and of
// package toolgate.lib (the shipped library). Each comprehension is always
// defined: empty when the rule is undefined, else the rule's value, so a
// policy that defines only some of the rules still evaluates.
var fullQuery = ast.MustParseBody(`
	deny := [x | x := data.toolgate.deny]
	ask := [x | x := data.toolgate.ask]
	allow := [x | x := data.toolgate.allow]
	read_only := [x | x := data.toolgate.read_only]
	lib_deny := [x | x := data.toolgate.lib.deny]
	lib_ask := [x | x := data.toolgate.lib.ask]
	lib_allow := [x | x := data.toolgate.lib.allow]
	lib_read_only := [x | x := data.toolgate.lib.read_only]
`)

// userQuery reads, of package toolgate's four rules, those it defines.
func userQuery(c *ast.Compiler, data map[string]any) (ast.Body, []int) {
	var body ast.Body
	var names []int
	tg, _ := data["toolgate"].(map[string]any)
	for i, name := range ruleNames {
		ref := ast.MustParseRef("data.toolgate." + name)
		_, inData := tg[name]
		if len(c.GetRules(ref)) == 0 && !inData {
			continue
		}
		names = append(names, i)
		body = append(body, ast.MustParseExpr(name+" := [x | x := data.toolgate."+name+"]"))
	}
	return body, names
}

// New loads and compiles the policy. An unreadable file, a parse or compile
// error or a bad rules table is an error: toolgate does not start on a
// policy it cannot read. A decision rule of the wrong shape (deny := 5) is
// not: it is logged, and [Engine.Misshapen] says so, and every call it
// reaches is denied as a policy error.
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
	p.logMisshapen(opts.Logger)
	return e, nil
}

// Unread names, as file:line and a sentence, the rules named like
// decision rules (deny, ask, allow, read_only) in a package under toolgate
// that toolgate never reads: only package toolgate's decide. An author
// who split a policy by package (toolgate.deploy) would otherwise see its
// denies pass their tests and decide nothing.
func (e *Engine) Unread() []string { return e.current.Load().unread }

// Misshapen says which decision rules of the policy in force can never
// give a decision (every call they reach is denied); nil when all can.
func (e *Engine) Misshapen() error { return e.current.Load().misshapen }

func (p *prepared) logMisshapen(log *slog.Logger) {
	if p.misshapen != nil {
		log.Error("policy has rules that cannot decide a call: every call they reach is denied as a policy error",
			"revision", p.revision, "error", p.misshapen)
	}
	for _, u := range p.unread {
		log.Warn("policy has a rule toolgate never reads", "revision", p.revision, "rule", u)
	}
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
		p.logMisshapen(e.opts.Logger)
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
	caps, err := capabilities(e.opts.Capabilities)
	if err != nil {
		return nil, err
	}
	c := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1).WithCapabilities(caps).WithEnablePrintStatements(e.opts.Print != nil)
	if c.Compile(b.modules); c.Failed() {
		return nil, fmt.Errorf("policy: compiling: %w", explainRefused(c.Errors))
	}
	if err := decisionFunctions(c); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if at := regoDefines(c, rulesCheckedRef); at != "" {
		return nil, fmt.Errorf("policy: data.toolgate.rules_checked is toolgate's own; your Rego defines it (%s)", at)
	}
	for _, ref := range libraryTableRefs {
		// The library reads the table through these: a rule of the
		// user's there would be a table no check sees.
		if at := regoDefines(c, ref); at != "" {
			return nil, fmt.Errorf("policy: %s is the shipped library's; your Rego defines it (%s): serve the table at data.toolgate.rules", ref, at)
		}
	}
	if tableChecked(b, c) {
		// The library need not check each row at every call: the
		// load has, or refuses the policy (servedRows).
		b.setChecked()
	}
	store := inmem.NewFromObjectWithOpts(b.data, inmem.OptReturnASTValuesOnRead(true))
	p := &prepared{revision: b.revision, compiler: c, store: store, reads: analyseInputReads(b.modules), unread: unreadRules(c)}
	rows := fileRows(b.rules)
	if at := regoDefines(c, rulesIndexRef); at != "" {
		return nil, fmt.Errorf("policy: data.toolgate.rules_index is toolgate's own, written from the rules table; your Rego defines it (%s)", at)
	}
	if b.rulesFromFile {
		if at := regoDefines(c, rulesRef); at != "" {
			return nil, fmt.Errorf("policy: data.toolgate.rules is defined both by policy.rules_file and by your Rego (%s); keep one", at)
		}
	} else {
		if rows, err = servedRows(ctx, e.timeout(), c, caps, store); err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		if err := checkRegoRows(ctx, e.timeout(), c, caps, store); err != nil {
			return nil, fmt.Errorf("policy: the rules table: %w", err)
		}
	}
	if p.toolCase, err = newToolCase(rows); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if p.full, err = prepareQuery(ctx, fullQuery, c, caps, store, e.opts.Print); err != nil {
		return nil, err
	}
	// A decision rule of the wrong shape (deny := 5) loads, and every call
	// it reaches is denied as a policy error: the full query checks each
	// rule's value at every decision (verdictOf), which the Go paths below
	// were never built to judge, so they are not used.
	if p.misshapen = checkRuleTypes(c, b.data); p.misshapen != nil {
		return p, nil
	}
	if !e.opts.NativeLibrary || !nativeEligible(b) {
		return p, nil
	}
	if p.native, err = newNativeLib(b.rules); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	body, names := userQuery(c, b.data)
	if len(names) > 0 {
		q, err := prepareQuery(ctx, body, c, caps, store, e.opts.Print)
		if err != nil {
			return nil, err
		}
		p.user, p.userRules = &q, names
		if !e.opts.noGoRules {
			p.userGo = newGoRules(c, b.data, names)
		}
	}
	return p, nil
}

// servedRows are the rows of a rules table the library reads from data
// (a data file, or the user's Rego), evaluated once as the policy loads,
// within the timeout of a decision (a table fetched by http.send must not
// hold a load or a reload); none when the table is not there or depends on
// the call (its rows are then not known before a call, and a call reads
// them as they are; so too when its evaluation fails without input, as a
// table whose rules conflict unless the call decides between them does). A
// table not evaluated in time, or whose built-ins fail (http.send to a
// service that is down), refuses the policy: loaded without its rows,
// the tool-name check would be off for the policy's life while later
// decisions read the table (a reload keeps the policy in force).
func servedRows(ctx context.Context, timeout time.Duration, c *ast.Compiler, caps *ast.Capabilities, store storage.Store) ([]caseRow, error) {
	ctx, done := context.WithTimeout(ctx, timeout)
	defer done()
	rs, err := rego.New(
		rego.Query("data.toolgate.rules"),
		rego.Compiler(c),
		rego.Capabilities(caps),
		rego.Store(store),
		// A built-in that fails (http.send to a service that is down) is
		// an error, not an undefined table that would load unchecked.
		rego.StrictBuiltinErrors(true),
	).Eval(ctx)
	var te *topdown.Error
	if err != nil && (ctx.Err() != nil || errors.As(err, &te) && te.Code == topdown.BuiltinErr) {
		return nil, fmt.Errorf("evaluating the rules table (data.toolgate.rules) as the policy loads: %w", err)
	}
	if err != nil || len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, nil
	}
	table := rs[0].Expressions[0].Value
	if err := checkServedTable(table); err != nil {
		return nil, fmt.Errorf("the rules table: %w", err)
	}
	return dataRows(table), nil
}

func prepareQuery(ctx context.Context, q ast.Body, c *ast.Compiler, caps *ast.Capabilities, store storage.Store, printTo func(string, string)) (rego.PreparedEvalQuery, error) {
	var printing []func(*rego.Rego)
	if printTo != nil {
		printing = append(printing, rego.EnablePrintStatements(true), rego.PrintHook(printHook(printTo)))
	}
	pq, err := rego.New(append(printing,
		rego.ParsedQuery(q),
		rego.Compiler(c),
		// Evaluation reads allow_net from here, not from the compiler.
		rego.Capabilities(caps),
		rego.Store(store),
		rego.StoreReadAST(true),
		// A built-in that fails (a type error, a bad regex) is an error,
		// not "undefined": otherwise a deny rule hitting one would silently
		// not fire and the call could be allowed.
		rego.StrictBuiltinErrors(true),
	)...).PrepareForEval(ctx)
	if err != nil {
		return pq, fmt.Errorf("policy: preparing the decision query: %w", err)
	}
	return pq, nil
}

// Decide evaluates in and applies deny > ask > allow, the default for calls
// no rule matched, and the permission mode of in.Mode. An error means the
// policy could not be evaluated or gave a malformed result; the returned
// Decision is then Deny with the error as its reason, and callers must not
// forward the call.
func (e *Engine) Decide(ctx context.Context, in *Input) (Decision, error) {
	return e.told(e.decide(ctx, in))
}

// told is a decision and its error as the engine hands them on: without
// Options.ErrorDetail, an evaluation error is cut (evalerr.go), in the
// error and in the deny's reason alike.
func (e *Engine) told(d Decision, err error) (Decision, error) {
	if err != nil && !e.opts.ErrorDetail {
		return failed(redactEvalError(err))
	}
	return d, err
}

func (e *Engine) decide(ctx context.Context, in *Input) (Decision, error) {
	p := e.current.Load()
	if in.Tool != nil && in.Kind == KindREST {
		if spelt := p.toolCase.variant(in.Tool.Name); spelt != "" {
			return caseDenied(in.Tool.Name, spelt), nil
		}
	}
	if p.native == nil {
		v, err := in.valueFor(p.reads)
		if err != nil {
			return failed(err)
		}
		return p.decideRego(ctx, e.timeout(), v, in.Mode, e.opts.Default, in.Hook)
	}
	conv := in.convertible(p.reads)
	if !conv && p.user == nil {
		// A value OPA's document cannot hold (a number past its range,
		// with limits.lossy_numbers: allow) fails a decision in Rego
		// whatever reads it: the Go library fails it alike.
		if _, err := in.valueFor(p.reads); err != nil {
			return failed(err)
		}
	}
	var vs [len(ruleNames)]verdict
	if p.user != nil {
		var got [len(ruleNames)]any
		sure := false
		if p.userGo != nil && conv {
			got, sure = p.userGo.eval(goInput{in: in})
		}
		var v ast.Value
		if !sure {
			var err error
			if v, err = in.valueFor(p.reads); err != nil {
				return failed(err)
			}
			if p.userGo != nil {
				got, sure = p.userGo.eval(goInput{doc: v})
			}
		}
		if !sure {
			b, err := eval(ctx, e.timeout(), p.user, v)
			if err != nil {
				return failed(err)
			}
			for _, i := range p.userRules {
				got[i] = b[ruleNames[i]]
			}
		}
		for _, i := range p.userRules {
			var err error
			if vs[i], err = verdictOf(ruleNames[i], got[i]); err != nil {
				return failed(err)
			}
		}
	}
	lib := p.native.decide(in)
	vs[0].merge(lib.deny)
	vs[1].merge(lib.ask)
	vs[2].merge(lib.allow)
	d := combine(vs[0], vs[1], vs[2], e.opts.Default)
	d.ReadOnly = vs[3].fired || lib.readOnly
	return applyModeOrFail(withHook(d, in.Hook), in.Mode)
}

// DecideValue is Decide for an input document given as an OPA value, as
// `toolgate policy eval` reads it from a file. The mode is the document's.
// Everything is evaluated in Rego, the shipped library included.
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
	p := e.current.Load()
	if name, ok := restToolName(v); ok {
		if spelt := p.toolCase.variant(name); spelt != "" {
			return caseDenied(name, spelt), nil
		}
	}
	return e.told(p.decideRego(ctx, e.timeout(), v, mode, e.opts.Default, nil))
}

// decideRego decides with every rule evaluated by OPA.
func (p *prepared) decideRego(ctx context.Context, timeout time.Duration, v ast.Value, mode string, def Action, hook *HookOpinion) (Decision, error) {
	b, err := eval(ctx, timeout, &p.full, v)
	if err != nil {
		return failed(err)
	}
	var vs [len(ruleNames)]verdict
	for i, name := range ruleNames {
		if vs[i], err = verdictOf(name, b[name]); err != nil {
			return failed(err)
		}
		lib, err := verdictOf(name, b["lib_"+name])
		if err != nil {
			return failed(err)
		}
		lib.sortByID() // as the Go form gives them
		vs[i].merge(lib)
	}
	d := combine(vs[0], vs[1], vs[2], def)
	d.ReadOnly = vs[3].fired
	return applyModeOrFail(withHook(d, hook), mode)
}

// eval runs a decision query, which has exactly one result, within
// timeout.
//
// Two of OPA's per-evaluation defaults cost more than a small policy's
// evaluation: a fresh metrics registry (three maps) and a goroutine that
// waits for ctx to end so it can cancel the query. Decisions read no
// metrics, and context.AfterFunc cancels the query the same way with no
// goroutine unless ctx does end while it runs.
func eval(ctx context.Context, timeout time.Duration, q *rego.PreparedEvalQuery, v ast.Value) (rego.Vars, error) {
	ctx, done := context.WithTimeout(ctx, timeout)
	defer done()
	cancel := topdown.NewCancel()
	stop := context.AfterFunc(ctx, cancel.Cancel)
	defer stop()
	rs, err := q.Eval(ctx, rego.EvalParsedInput(v), rego.EvalMetrics(noMetrics), rego.EvalExternalCancel(cancel))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// OPA says only that the query was cancelled.
			return nil, fmt.Errorf("policy: evaluating: took longer than the policy's %s: %w", timeout, err)
		}
		return nil, fmt.Errorf("policy: evaluating: %w", err)
	}
	if len(rs) != 1 {
		return nil, errors.New("policy: the decision query is undefined")
	}
	return rs[0].Bindings, nil
}

// printHook hands print() output to Options.Print.
type printHook func(location, message string)

func (h printHook) Print(pc opaprint.Context, msg string) error {
	loc := ""
	if pc.Location != nil {
		loc = fmt.Sprintf("%s:%d", pc.Location.File, pc.Location.Row)
	}
	h(loc, msg)
	return nil
}

// defaultTimeout is Options.Timeout's zero value.
const defaultTimeout = 5 * time.Second

func (e *Engine) timeout() time.Duration {
	if e.opts.Timeout > 0 {
		return e.opts.Timeout
	}
	return defaultTimeout
}

// noMetrics is the registry decisions evaluate with: they report none.
var noMetrics = metrics.NoOp()

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
			return verdict{}, fmt.Errorf("policy: rule %s: unexpected result %s", name, typeOf(val))
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
				return verdict{}, fmt.Errorf("policy: rule %s must be a boolean or a set of reasons, not %s", name, typeOf(x))
			}
		}
	}
	return v, nil
}

// reasonOf reads one reason: a string, or an object with a string
// "message", an optional string "id", an optional boolean "must_ask" and
// an optional object "approvers".
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
		if ap, present := x["approvers"]; present {
			a, err := approversOf(ap)
			if err != nil {
				return Reason{}, err
			}
			r.Approvers = a
		}
		return r, nil
	}
	return Reason{}, fmt.Errorf("a reason must be a string or an object, not %s", typeOf(x))
}
