package policy_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
	shipped "github.com/toolgate/toolgate/rego"
)

func mcpMessage(method string) *policy.Input {
	return &policy.Input{
		CallID: "test", Kind: policy.KindMCP,
		Upstream: policy.Upstream{Name: "notes", Protocol: "mcp"},
		Subject:  policy.Subject{ID: "agent-42", Authenticated: true},
		MCP:      &policy.MCP{Method: method},
		HTTP:     policy.HTTP{Method: "POST", Path: "/mcp"},
	}
}

// TestMCPMethods: the protocol's own methods, responses and GET/DELETE are
// plumbing, in plan mode too (it moves no tool); any other method,
// misspelt, in another case or decided as a tool call, is denied, in Go as
// in Rego.
func TestMCPMethods(t *testing.T) {
	for _, native := range []bool{true, false} {
		e := newEngine(t, policy.Options{Library: shipped.Library(), NativeLibrary: native})
		for _, mode := range []string{"", policy.ModePlan} {
			for _, m := range []string{"", "initialize", "ping", "tools/list", "notifications/initialized", "notifications/roots/list_changed", "tasks/update", "subscriptions/listen"} {
				in := mcpMessage(m)
				in.Mode = mode
				if got := decide(t, e, in); got.Action != "allow" {
					t.Errorf("native %v, mode %q: method %q: %v, want allow", native, mode, m, got)
				}
			}
			get := mcpMessage("")
			get.MCP, get.HTTP.Method, get.Mode = nil, "GET", mode
			if got := decide(t, e, get); got.Action != "allow" {
				t.Errorf("native %v, mode %q: GET: %v, want allow", native, mode, got)
			}
		}
		plan := mcpMessage("resources/subscribe")
		plan.Mode = policy.ModePlan
		if got := decide(t, e, plan); got.Action != "deny" {
			t.Errorf("native %v: plan mode, resources/subscribe: %v, want deny", native, got)
		}
		for _, m := range []string{"Tools/Call", "tools/call ", "tools/List", "tools/call", "resources/read", "prompts/get", "completion/complete", "resources/subscribe", "notifications/x"} {
			d, err := e.Decide(t.Context(), mcpMessage(m))
			if err != nil || d.Action != policy.Deny || len(d.Reasons) != 1 || d.Reasons[0].ID != "toolgate.mcp_method" || !strings.Contains(d.Reasons[0].Message, `"`+m+`"`) {
				t.Errorf("native %v: method %q: %+v %v, want deny toolgate.mcp_method naming it", native, m, d, err)
			}
		}
	}
}

// TestMCPPseudoTools: resources/read, prompts/get and completion/complete
// are calls of pseudo-tools, which the rules table allows by target; a
// completion's target is what it completes, read as resources/read's URI
// or prompts/get's name is.
func TestMCPPseudoTools(t *testing.T) {
	rules := writeRules(t, t.TempDir(), []string{
		`{id: docs, effect: allow, tool: "mcp:resources/read", target: "file:///docs/**"}`,
		`{id: summary, effect: allow, tool: "mcp:prompts/get", target: summary}`,
		`{id: complete-docs, effect: allow, tool: "mcp:completion/resource", target: "file:///docs/**"}`,
		`{id: complete-prompts, effect: allow, tool: "mcp:completion/prompt", target: "*"}`,
	})
	e := newEngine(t, policy.Options{RulesFile: rules})
	cases := []struct {
		method string
		params map[string]any
		want   string
		target string
	}{
		{"resources/read", map[string]any{"uri": "file:///docs/a/../b.md", "_meta": map[string]any{"progressToken": 1}}, "allow", "file:///docs/b.md"},
		{"resources/read", map[string]any{"uri": "file:///docs/../etc/passwd"}, "deny", "file:///etc/passwd"},
		// Other spellings of a file URL, read as a WHATWG parser, Go's
		// url.Parse and Python's urlparse read them.
		{"resources/read", map[string]any{"uri": "file:/docs/a.md"}, "allow", "file:///docs/a.md"},
		{"resources/read", map[string]any{"uri": "FILE://LocalHost/docs/a.md"}, "allow", "file:///docs/a.md"},
		{"resources/read", map[string]any{"uri": "file://localhost/etc/passwd"}, "deny", "file:///etc/passwd"},
		{"resources/read", map[string]any{"uri": "file://server/docs/a.md"}, "deny", "file://server/docs/a.md"},
		// localhost spelt otherwise is localhost once read as a lookup
		// reads it, and no host to a WHATWG parser (the TypeScript SDK's).
		{"resources/read", map[string]any{"uri": "file://%6cocalhost/etc/passwd"}, "deny", "file:///etc/passwd"},
		{"resources/read", map[string]any{"uri": "file://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/etc/passwd"}, "deny", "file:///etc/passwd"},
		// A drive letter is never taken away by "..".
		{"resources/read", map[string]any{"uri": "file:///C:/../docs/x"}, "deny", "file:///C:/docs/x"},
		{"resources/read", map[string]any{"uri": "file:///c|/x/../../docs/x"}, "deny", "file:///c:/docs/x"},
		// An escaped colon is no drive letter to a WHATWG parser: ".."
		// takes it away.
		{"resources/read", map[string]any{"uri": "file:///D%3A/../docs/x"}, "allow", "file:///docs/x"},
		{"resources/read", map[string]any{"uri": "file:///D%3A/../etc/passwd"}, "deny", "file:///etc/passwd"},
		// A template's variable in the query climbs out of the root.
		{"resources/read", map[string]any{"uri": "file:///docs/view?file=../secrets/key"}, "deny", "file:///docs/view?file=../secrets/key"},
		{"resources/read", map[string]any{"uri": "file:///docs/view?file=.."}, "deny", "file:///docs/view?file=.."},
		// %5C is a separator to a Windows server once decoded.
		{"resources/read", map[string]any{"uri": "file:///docs/%5C..%5Cetc/passwd"}, "deny", "file:///etc/passwd"},
		{"resources/read", map[string]any{"uri": "../secret"}, "deny", "../secret"},
		{"prompts/get", map[string]any{"name": "summary", "arguments": map[string]any{"topic": "x"}}, "allow", "summary"},
		{"prompts/get", map[string]any{"name": "Summary"}, "deny", "Summary"},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "file:///docs/{name}"}, "argument": map[string]any{"name": "name", "value": "a"}}, "allow", "file:///docs/%7Bname%7D"},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "file:///docs/../secrets/{name}"}, "_meta": map[string]any{}}, "deny", "file:///secrets/%7Bname%7D"},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "file:///secrets/{name}"}}, "deny", "file:///secrets/%7Bname%7D"},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "summary"}, "argument": map[string]any{"name": "topic", "value": ""}}, "allow", "summary"},
		// complete-prompts allows every prompt's completion, and no resource's (above).
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "admin"}}, "allow", "admin"},
	}
	for _, tc := range cases {
		tool, err := policy.MCPTool(tc.method, tc.params, policy.FoldNone)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := tool.Arguments["_meta"]; ok || !tool.HasTarget || tool.Target != tc.target {
			t.Errorf("%s %v: tool %+v, want target %q and no _meta", tc.method, tc.params, tool, tc.target)
		}
		in := mcpMessage(tc.method)
		in.Tool = tool
		if got := decide(t, e, in); got.Action != tc.want {
			t.Errorf("%s %v: %v, want %s", tc.method, tc.params, got, tc.want)
		}
		// A parked call's tool, rebuilt from its name and arguments, is the same.
		again := policy.NewToolWith(tool.Name, tool.Arguments, policy.DefaultTargetArgs, policy.FoldNone)
		if again.Target != tool.Target || again.HasTarget != tool.HasTarget || again.TargetEscapes != tool.TargetEscapes {
			t.Errorf("%s: rebuilt %+v, want %+v", tc.method, again, tool)
		}
	}
	for _, m := range []string{"tools/call", "tools/list", "initialize", "Resources/Read"} {
		if tool, err := policy.MCPTool(m, map[string]any{"uri": "x", "name": "y"}, policy.FoldNone); tool != nil || err != nil {
			t.Errorf("MCPTool(%q) = %v, %v; want nil, nil", m, tool, err)
		}
	}
	for _, bad := range []struct {
		method string
		params map[string]any
	}{
		{"resources/read", nil},
		{"resources/read", map[string]any{"uri": 5}},
		{"prompts/get", map[string]any{"uri": "x"}},
		{"completion/complete", map[string]any{}},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "uri": "x"}}},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "name": "x"}}},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/tool", "name": "x"}}},
		{"completion/complete", map[string]any{"ref": "ref/prompt"}},
	} {
		if _, err := policy.MCPTool(bad.method, bad.params, policy.FoldNone); err == nil {
			t.Errorf("MCPTool(%q, %v) accepted", bad.method, bad.params)
		}
	}
	var ce *policy.ControlError
	if _, err := policy.MCPTool("resources/read", map[string]any{"uri": "file:///a\x00.txt"}, policy.FoldNone); !errors.As(err, &ce) {
		t.Errorf("a NUL in the URI: err = %v, want a *ControlError", err)
	}
	if _, err := policy.MCPTool("completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "a\x1b"}}, policy.FoldNone); !errors.As(err, &ce) {
		t.Errorf("a control character in a completion's prompt name: err = %v, want a *ControlError", err)
	}
}

// TestMCPResourceSubscriptions: subscriptions/listen with
// notifications.resourceSubscriptions is resources/subscribe by another
// name, and denied as that is, in Go as in Rego; without resource
// subscriptions it stays plumbing.
func TestMCPResourceSubscriptions(t *testing.T) {
	cases := []struct {
		params map[string]any
		deny   bool
	}{
		{nil, false},
		{map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, false},
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": nil}}, false},
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": []any{}}}, false},
		{map[string]any{"notifications": "x"}, false},
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": []any{"file:///secrets/key"}}}, true},
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": "file:///secrets/key"}}, true},
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": map[string]any{}}}, true},
		// Built in Go rather than decoded from JSON: read as OPA reads them.
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{}}}, false},
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string(nil)}}, false},
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{"file:///secrets/key"}}}, true},
		{map[string]any{"notifications": map[string][]string{"resourceSubscriptions": {"file:///secrets/key"}}}, true},
		{map[string]any{"notifications": map[string][]string{"resourceSubscriptions": {}}}, false},
		{map[string]any{"notifications": &map[string]any{"resourceSubscriptions": []any{"file:///secrets/key"}}}, true},
		{map[string]any{"notifications": struct {
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		}{[]string{"file:///secrets/key"}}}, true},
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": []byte{}}}, true}, // JSON ""
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": json.RawMessage(`[]`)}}, false},
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": json.RawMessage(`null`)}}, false},
		{map[string]any{"notifications": map[string]any{"resourceSubscriptions": json.RawMessage(`["file:///a"]`)}}, true},
	}
	for _, native := range []bool{true, false} {
		e := newEngine(t, policy.Options{Library: shipped.Library(), NativeLibrary: native})
		for _, tc := range cases {
			in := mcpMessage("subscriptions/listen")
			in.MCP.Params = tc.params
			d, err := e.Decide(t.Context(), in)
			denied := err == nil && d.Action == policy.Deny && len(d.Reasons) == 1 && d.Reasons[0].ID == "toolgate.mcp_subscribe"
			if denied != tc.deny || err != nil || (!tc.deny && d.Action != policy.Allow) {
				t.Errorf("native %v: params %v: %+v %v, want deny toolgate.mcp_subscribe: %v", native, tc.params, d, err, tc.deny)
			}
		}
	}
}
