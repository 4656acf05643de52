package policy

import (
	"encoding/json"
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

// Input is the policy input document (SPEC.md §6.1). Its JSON form is what
// Rego sees as input.
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
	// then target, target_raw and target_escapes are absent from the input.
	HasTarget     bool           `json:"-"`
	Target        string         `json:"target,omitempty"`
	TargetRaw     string         `json:"target_raw,omitempty"`
	TargetEscapes bool           `json:"target_escapes"`
	Annotations   map[string]any `json:"annotations,omitempty"`
}

// MCP describes a JSON-RPC message.
type MCP struct {
	Method          string `json:"method"`
	ID              any    `json:"id,omitempty"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
}

// HTTP describes the request as it arrived. Headers are lower-cased and
// never include credentials or cookies.
type HTTP struct {
	Method  string              `json:"method"`
	Path    string              `json:"path"`
	Query   url.Values          `json:"query"`
	Headers map[string][]string `json:"headers"`
}

// MarshalJSON adds the version field.
func (in Input) MarshalJSON() ([]byte, error) {
	type plain Input
	return json.Marshal(struct {
		Version string `json:"version"`
		plain
	}{InputVersion, plain(in)})
}

// Value returns the input as an OPA value, built directly rather than
// through a JSON round trip: this runs on every call.
func (in *Input) Value() (ast.Value, error) {
	items := make([][2]*ast.Term, 0, 12)
	add := func(k string, v ast.Value) { items = append(items, ast.Item(ast.InternedTerm(k), ast.NewTerm(v))) }
	add("version", ast.String(InputVersion))
	add("call_id", ast.String(in.CallID))
	add("kind", ast.String(in.Kind))
	add("time", ast.String(in.Time.UTC().Format(time.RFC3339Nano)))
	mode := in.Mode
	if mode == "" {
		mode = ModeDefault
	}
	add("mode", ast.String(mode))
	phase := in.Phase
	if phase == "" {
		phase = PhaseCall
	}
	add("phase", ast.String(phase))
	add("upstream", ast.NewObject(
		ast.Item(ast.InternedTerm("name"), ast.StringTerm(in.Upstream.Name)),
		ast.Item(ast.InternedTerm("protocol"), ast.StringTerm(in.Upstream.Protocol)),
	))
	subj, err := in.Subject.value()
	if err != nil {
		return nil, err
	}
	add("subject", subj)
	if in.Tool != nil {
		t, err := in.Tool.value()
		if err != nil {
			return nil, err
		}
		add("tool", t)
	}
	if in.MCP != nil {
		m := []*ast.Term{ast.InternedTerm("method"), ast.StringTerm(in.MCP.Method)}
		obj := ast.NewObject(ast.Item(m[0], m[1]))
		if in.MCP.ID != nil {
			id, err := ast.InterfaceToValue(in.MCP.ID)
			if err != nil {
				return nil, fmt.Errorf("policy: input mcp.id: %w", err)
			}
			obj.Insert(ast.InternedTerm("id"), ast.NewTerm(id))
		}
		if in.MCP.ProtocolVersion != "" {
			obj.Insert(ast.InternedTerm("protocol_version"), ast.StringTerm(in.MCP.ProtocolVersion))
		}
		add("mcp", obj)
	}
	add("http", in.HTTP.value())
	return ast.NewObject(items...), nil
}

func (s *Subject) value() (ast.Value, error) {
	groups := make([]*ast.Term, len(s.Groups))
	for i, g := range s.Groups {
		groups[i] = ast.StringTerm(g)
	}
	claims := ast.Value(ast.NewObject())
	if len(s.Claims) > 0 {
		c, err := ast.InterfaceToValue(s.Claims)
		if err != nil {
			return nil, fmt.Errorf("policy: input subject.claims: %w", err)
		}
		claims = c
	}
	return ast.NewObject(
		ast.Item(ast.InternedTerm("id"), ast.StringTerm(s.ID)),
		ast.Item(ast.InternedTerm("groups"), ast.ArrayTerm(groups...)),
		ast.Item(ast.InternedTerm("claims"), ast.NewTerm(claims)),
		ast.Item(ast.InternedTerm("authenticated"), ast.InternedTerm(s.Authenticated)),
	), nil
}

func (t *Tool) value() (ast.Value, error) {
	obj := ast.NewObject(ast.Item(ast.InternedTerm("name"), ast.StringTerm(t.Name)))
	args := ast.Value(ast.NewObject())
	if len(t.Arguments) > 0 {
		a, err := ast.InterfaceToValue(t.Arguments)
		if err != nil {
			return nil, fmt.Errorf("policy: input tool.arguments: %w", err)
		}
		args = a
	}
	obj.Insert(ast.InternedTerm("arguments"), ast.NewTerm(args))
	if t.HasTarget {
		obj.Insert(ast.InternedTerm("target"), ast.StringTerm(t.Target))
		obj.Insert(ast.InternedTerm("target_raw"), ast.StringTerm(t.TargetRaw))
		obj.Insert(ast.InternedTerm("target_escapes"), ast.InternedTerm(t.TargetEscapes))
	}
	ann := ast.Value(ast.NewObject())
	if len(t.Annotations) > 0 {
		a, err := ast.InterfaceToValue(t.Annotations)
		if err != nil {
			return nil, fmt.Errorf("policy: input tool.annotations: %w", err)
		}
		ann = a
	}
	obj.Insert(ast.InternedTerm("annotations"), ast.NewTerm(ann))
	return obj, nil
}

func (h *HTTP) value() ast.Value {
	return ast.NewObject(
		ast.Item(ast.InternedTerm("method"), ast.StringTerm(h.Method)),
		ast.Item(ast.InternedTerm("path"), ast.StringTerm(h.Path)),
		ast.Item(ast.InternedTerm("query"), ast.NewTerm(multiMap(h.Query))),
		ast.Item(ast.InternedTerm("headers"), ast.NewTerm(multiMap(h.Headers))),
	)
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
		items = append(items, ast.Item(ast.StringTerm(k), ast.ArrayTerm(terms...)))
	}
	return ast.NewObject(items...)
}
