package policy

import (
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// InputVersion is the version of the input document.
const InputVersion = "toolgate/v1"

// Kinds of call.
const (
	KindREST = "rest" // POST {prefix}tools/{tool} to a REST upstream
	KindMCP  = "mcp"  // a JSON-RPC message to an MCP upstream
	KindHTTP = "http" // any other request to a REST upstream
)

// Phases of a decision.
const (
	PhaseCall = "call" // the call is about to run
	PhaseList = "list" // the tool is being listed (MCP tools/list)
)

// Input is the policy input document (docs/policy.md, the input
// document). Its JSON form is what Rego sees as input.
type Input struct {
	CallID   string    `json:"call_id"`
	Kind     string    `json:"kind"`
	Time     time.Time `json:"time"`
	Mode     string    `json:"mode"`
	Phase    string    `json:"phase"`
	Upstream Upstream  `json:"upstream"`
	Subject  Subject   `json:"subject"`
	Tool     *Tool     `json:"tool,omitempty"`
	MCP      *MCP      `json:"mcp,omitempty"`
	HTTP     HTTP      `json:"http"`
	// Hook is what the PreToolUse hooks said of the call (nil: nothing);
	// it is weighed against the rules, not shown to them.
	Hook *HookOpinion `json:"-"`
}

// Upstream names the tool server a call goes to.
type Upstream struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
}

// Subject is the verified caller.
type Subject struct {
	ID            string         `json:"id"`
	Groups        []string       `json:"groups"`
	Claims        map[string]any `json:"claims"`
	Authenticated bool           `json:"authenticated"`
}

// Tool is the tool being called. Build it with NewTool so the target is
// extracted and normalised the one way toolgate promises.
type Tool struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
	// HasTarget is false when no argument named in target_args is a string;
	// then target, target_raw and target_escapes are absent from the input
	// (targets too, unless an array or another value makes some).
	HasTarget     bool   `json:"-"`
	Target        string `json:"target,omitempty"`
	TargetRaw     string `json:"target_raw,omitempty"`
	TargetEscapes bool   `json:"target_escapes"`
	// Targets is every string argument named in target_args, in that
	// order; the first is Target. Rules-table deny and ask rows match a call
	// when any of them matches, allow rows only when all do.
	Targets     []TargetArg    `json:"targets,omitempty"`
	Annotations map[string]any `json:"annotations,omitempty"`
}

// MCP describes a JSON-RPC message.
type MCP struct {
	Method          string `json:"method"`
	ID              any    `json:"id,omitempty"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// Params are, for a message decided as a tool call (tools/call,
	// resources/read, prompts/get), the members of its params that Tool
	// does not hold and the upstream receives all the same: a tools/call's
	// _meta, inputResponses, requestState, task, ...; the pseudo-tools'
	// _meta. Absent when there are none, and for other messages.
	Params map[string]any `json:"params,omitempty"`
}

// HTTP describes the request as it arrived. Headers are lower-cased and
// never include credentials or cookies.
type HTTP struct {
	Method  string              `json:"method"`
	Path    string              `json:"path"`
	Query   url.Values          `json:"query"`
	Headers map[string][]string `json:"headers"`
}

// MarshalJSON writes the document exactly as policies see it (Value):
// with its version, defaults filled in and empty collections rather than
// null, so a stored or logged input evaluates as the live one did.
// TestInputValue holds the two forms together.
func (in Input) MarshalJSON() ([]byte, error) { return in.AppendJSON(nil, false) }

// Value returns the input as an OPA value, built directly rather than
// through a JSON round trip: this runs on every call.
func (in *Input) Value() (ast.Value, error) { return in.valueFor(everything) }

// valueFor is Value with only what r says a policy reads: the keys it
// never names are left out (inputReads).
func (in *Input) valueFor(r *inputReads) (ast.Value, error) {
	items := make([][2]*ast.Term, 0, 12)
	add := func(k string, v *ast.Term) { items = append(items, ast.Item(term(k), v)) }
	if r.top("version") {
		add("version", term(InputVersion))
	}
	if r.top("call_id") {
		add("call_id", ast.StringTerm(in.CallID))
	}
	if r.top("kind") {
		add("kind", term(in.Kind))
	}
	if r.top("time") {
		add("time", ast.StringTerm(in.Time.UTC().Format(time.RFC3339Nano)))
	}
	if r.top("mode") {
		mode := in.Mode
		if mode == "" {
			mode = ModeDefault
		}
		add("mode", term(mode))
	}
	if r.top("phase") {
		phase := in.Phase
		if phase == "" {
			phase = PhaseCall
		}
		add("phase", term(phase))
	}
	if r.top("upstream") {
		add("upstream", ast.NewTerm(ast.NewObject(
			ast.Item(term("name"), ast.StringTerm(in.Upstream.Name)),
			ast.Item(term("protocol"), term(in.Upstream.Protocol)),
		)))
	}
	if r.top("subject") {
		subj, err := in.Subject.value(r)
		if err != nil {
			return nil, err
		}
		add("subject", ast.NewTerm(subj))
	}
	if in.Tool != nil && r.top("tool") {
		t, err := in.Tool.value(r, !in.listing())
		if err != nil {
			return nil, err
		}
		add("tool", ast.NewTerm(t))
	}
	if in.MCP != nil && r.top("mcp") {
		m := []*ast.Term{term("method"), term(in.MCP.Method)}
		obj := ast.NewObject(ast.Item(m[0], m[1]))
		if in.MCP.ID != nil {
			id, err := ast.InterfaceToValue(in.MCP.ID)
			if err != nil {
				return nil, fmt.Errorf("policy: input mcp.id: %w", err)
			}
			obj.Insert(term("id"), ast.NewTerm(id))
		}
		if in.MCP.ProtocolVersion != "" {
			obj.Insert(term("protocol_version"), term(in.MCP.ProtocolVersion))
		}
		if len(in.MCP.Params) > 0 && r.sub("mcp", "params") {
			params, err := objectTerm(in.MCP.Params)
			if err != nil {
				return nil, fmt.Errorf("policy: input mcp.params: %w", err)
			}
			obj.Insert(term("params"), params)
		}
		add("mcp", ast.NewTerm(obj))
	}
	if r.top("http") {
		add("http", ast.NewTerm(in.HTTP.value(r)))
	}
	return ast.NewObject(items...), nil
}

func (s *Subject) value(r *inputReads) (ast.Value, error) {
	items := make([][2]*ast.Term, 0, 4)
	if r.sub("subject", "id") {
		items = append(items, ast.Item(term("id"), ast.StringTerm(s.ID)))
	}
	if r.sub("subject", "groups") {
		groups := make([]*ast.Term, len(s.Groups))
		for i, g := range s.Groups {
			groups[i] = ast.StringTerm(g)
		}
		items = append(items, ast.Item(term("groups"), ast.ArrayTerm(groups...)))
	}
	if r.sub("subject", "claims") {
		claims, err := objectTerm(s.Claims)
		if err != nil {
			return nil, fmt.Errorf("policy: input subject.claims: %w", err)
		}
		items = append(items, ast.Item(term("claims"), claims))
	}
	if r.sub("subject", "authenticated") {
		items = append(items, ast.Item(term("authenticated"), ast.InternedTerm(s.Authenticated)))
	}
	return ast.NewObject(items...), nil
}

// listing reports whether the input is a listed tool's (MCP tools/list),
// which has no arguments, not even empty ones: it is not being called.
func (in *Input) listing() bool { return in.Phase == PhaseList }

// value is t as the policy reads it; without args (a listed tool, see
// listing) it has no arguments.
func (t *Tool) value(r *inputReads, args bool) (ast.Value, error) {
	items := make([][2]*ast.Term, 0, 6)
	if r.sub("tool", "name") {
		items = append(items, ast.Item(term("name"), ast.StringTerm(t.Name)))
	}
	if args && r.sub("tool", "arguments") {
		args, err := objectTerm(t.Arguments)
		if err != nil {
			return nil, fmt.Errorf("policy: input tool.arguments: %w", err)
		}
		items = append(items, ast.Item(term("arguments"), args))
	}
	if t.HasTarget {
		if r.sub("tool", "target") {
			items = append(items, ast.Item(term("target"), ast.StringTerm(t.Target)))
		}
		if r.sub("tool", "target_raw") {
			items = append(items, ast.Item(term("target_raw"), ast.StringTerm(t.TargetRaw)))
		}
		if r.sub("tool", "target_escapes") {
			items = append(items, ast.Item(term("target_escapes"), ast.InternedTerm(t.TargetEscapes)))
		}
	}
	if t.hasTargets() && r.sub("tool", "targets") {
		items = append(items, ast.Item(term("targets"), targetsTerm(t.AllTargets())))
	}
	if r.sub("tool", "annotations") {
		ann, err := objectTerm(t.Annotations)
		if err != nil {
			return nil, fmt.Errorf("policy: input tool.annotations: %w", err)
		}
		items = append(items, ast.Item(term("annotations"), ann))
	}
	return ast.NewObject(items...), nil
}

// targetsTerm is tool.targets as a term.
func targetsTerm(all []TargetArg) *ast.Term {
	terms := make([]*ast.Term, len(all))
	for i, a := range all {
		if a.Opaque {
			items := [][2]*ast.Term{ast.Item(term("arg"), term(a.Arg)), ast.Item(term("opaque"), ast.InternedTerm(true))}
			if a.Escapes {
				items = append(items, ast.Item(term("raw"), ast.StringTerm(a.Raw)), ast.Item(term("escapes"), ast.InternedTerm(true)))
			}
			terms[i] = ast.ObjectTerm(items...)
			continue
		}
		items := [][2]*ast.Term{
			ast.Item(term("arg"), term(a.Arg)),
			ast.Item(term("target"), ast.StringTerm(a.Target)),
			ast.Item(term("raw"), ast.StringTerm(a.Raw)),
			ast.Item(term("escapes"), ast.InternedTerm(a.Escapes)),
		}
		if a.Relative != "" {
			items = append(items, ast.Item(term("relative"), ast.StringTerm(a.Relative)))
		}
		terms[i] = ast.ObjectTerm(items...)
	}
	return ast.ArrayTerm(terms...)
}

// objectTerm is m as a term; an empty or nil map is the shared empty object.
func objectTerm(m map[string]any) (*ast.Term, error) {
	if len(m) == 0 {
		return emptyObject, nil
	}
	v, err := ast.InterfaceToValue(m)
	if err != nil {
		return nil, err
	}
	return ast.NewTerm(v), nil
}

var emptyObject = ast.NewTerm(ast.NewObject())

func (h *HTTP) value(r *inputReads) ast.Value {
	items := make([][2]*ast.Term, 0, 4)
	if r.sub("http", "method") {
		items = append(items, ast.Item(term("method"), term(h.Method)))
	}
	if r.sub("http", "path") {
		items = append(items, ast.Item(term("path"), ast.StringTerm(h.Path)))
	}
	if r.sub("http", "query") {
		items = append(items, ast.Item(term("query"), ast.NewTerm(multiMap(h.Query))))
	}
	if r.sub("http", "headers") {
		items = append(items, ast.Item(term("headers"), ast.NewTerm(multiMap(h.Headers))))
	}
	return ast.NewObject(items...)
}

func multiMap[M ~map[string][]string](m M) ast.Value {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	items := make([][2]*ast.Term, 0, len(keys))
	for _, k := range keys {
		vs := m[k]
		terms := make([]*ast.Term, len(vs))
		for i, v := range vs {
			terms[i] = ast.StringTerm(v)
		}
		items = append(items, ast.Item(term(k), ast.ArrayTerm(terms...)))
	}
	return ast.NewObject(items...)
}

// constTerms are the strings every input repeats (keys, kinds, modes,
// methods, common header names), made into terms once: building a term
// costs two allocations, and an input has dozens. OPA never modifies an
// input's terms, so they are shared, as OPA shares its own interned terms.
var constTerms = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, s := range []string{
		// keys of the input document
		"version", "call_id", "kind", "time", "mode", "phase", "upstream", "name", "protocol",
		"subject", "id", "groups", "claims", "authenticated", "tool", "arguments", "target",
		"target_raw", "target_escapes", "targets", "arg", "raw", "escapes", "opaque", "relative", "annotations", "mcp", "method", "protocol_version", "params",
		"http", "path", "query", "headers",
		// values from closed sets
		InputVersion, KindREST, KindMCP, KindHTTP, PhaseCall, PhaseList,
		ModeDefault, ModeDontAsk, ModePlan, ModeBypass,
		"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS",
		"tools/call", "tools/list", "initialize", "notifications/initialized", "ping",
		// header names most requests carry
		"accept", "accept-encoding", "content-type", "content-length", "content-encoding",
		"user-agent", "host", "connection", "traceparent", "tracestate", "baggage",
		"mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name",
		"idempotency-key", "prefer", "last-event-id",
	} {
		m[s] = ast.StringTerm(s)
	}
	return m
}()

// term is s as a term, shared when s is one of constTerms.
func term(s string) *ast.Term {
	if t, ok := constTerms[s]; ok {
		return t
	}
	return ast.StringTerm(s)
}
