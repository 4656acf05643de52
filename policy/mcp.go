package policy

import (
	"errors"
	"maps"
)

// The MCP pseudo-tools: requests that read what the upstream holds, decided
// as calls of a tool so that the rules table can allow them by target. No
// real tool has these names: tool names hold no "/".
const (
	// ToolResourcesRead is resources/read; its target is params.uri,
	// normalised as a "uri" argument is.
	ToolResourcesRead = "mcp:resources/read"
	// ToolPromptsGet is prompts/get; its target is params.name as sent.
	ToolPromptsGet = "mcp:prompts/get"
	// ToolCompletePrompt and ToolCompleteResource are completion/complete,
	// whose answer tells what the server holds under a prompt's argument
	// (a ref/prompt; target: params.ref.name as sent) or a resource
	// template (a ref/resource; target: params.ref.uri, the template,
	// normalised as a "uri" argument is). Two tools, so that a row for
	// every prompt (target "*") allows no resource's completion.
	ToolCompletePrompt   = "mcp:completion/prompt"
	ToolCompleteResource = "mcp:completion/resource"
)

// IsMCPMethod reports whether method is one of the protocol's own: a
// method the shipped library lets through as plumbing, or one decided as a
// tool call. Anything else is a name the caller made up.
func IsMCPMethod(method string) bool { return mcpMethods[method] || IsMCPToolMethod(method) }

// IsMCPToolMethod reports whether an MCP request of method is decided as a
// tool call: tools/call, and the pseudo-tools' resources/read, prompts/get
// and completion/complete.
func IsMCPToolMethod(method string) bool {
	switch method {
	case "tools/call", "resources/read", "prompts/get", "completion/complete":
		return true
	}
	return false
}

// MCPTool is the tool an MCP request is decided as, beside tools/call: for
// resources/read and prompts/get, a call of ToolResourcesRead or
// ToolPromptsGet whose arguments are the request's params without _meta.
// For any other method it returns nil, nil: the message is protocol
// plumbing, decided on its method alone. A resources/read without a string
// params.uri, a prompts/get without a string params.name, or params whose
// keys or target hold a control character (CheckControl) or a spelling a
// tool may read as other path syntax (CheckTargetSpelling) are an error, for
// a JSON-RPC invalid-params answer.
func MCPTool(method string, params map[string]any, fold Fold) (*Tool, error) {
	if !IsMCPToolMethod(method) || method == "tools/call" {
		return nil, nil
	}
	var name, key string
	switch method {
	case "resources/read":
		name, key = ToolResourcesRead, "uri"
	case "prompts/get":
		name, key = ToolPromptsGet, "name"
	case "completion/complete":
		return completionTool(params, fold)
	default:
		return nil, nil
	}
	if _, ok := params[key].(string); !ok {
		return nil, errors.New(method + ": params." + key + " must be a string")
	}
	args := maps.Clone(params)
	delete(args, "_meta")
	if err := CheckControl(args, []string{key}); err != nil {
		return nil, err
	}
	if err := CheckTargetSpelling(args, []string{key}, fold); err != nil {
		return nil, err
	}
	return NewToolWith(name, args, nil, fold), nil
}

// completionTool is the ToolCompletePrompt or ToolCompleteResource call of a
// completion/complete
// whose params are params: its ref must be a ref/prompt with a string name
// or a ref/resource with a string uri, checked as prompts/get's name and
// resources/read's uri are.
func completionTool(params map[string]any, fold Fold) (*Tool, error) {
	key, target, ok := completionRef(params)
	if !ok {
		return nil, errors.New(`completion/complete: params.ref must be {"type":"ref/prompt","name":…} or {"type":"ref/resource","uri":…}, the name or uri a string`)
	}
	args := maps.Clone(params)
	delete(args, "_meta")
	ref := map[string]any{key: target}
	if err := CheckControl(args, nil); err != nil {
		return nil, err
	}
	if err := CheckControl(ref, []string{key}); err != nil {
		return nil, err
	}
	if err := CheckTargetSpelling(ref, []string{key}, fold); err != nil {
		return nil, err
	}
	if key == "name" {
		return NewToolWith(ToolCompletePrompt, args, nil, fold), nil
	}
	return NewToolWith(ToolCompleteResource, args, nil, fold), nil
}

// completionRef is what a completion/complete's params.ref completes: the
// key ("name" of a ref/prompt, "uri" of a ref/resource) and its value.
func completionRef(params map[string]any) (key, target string, ok bool) {
	ref, _ := params["ref"].(map[string]any)
	switch ref["type"] {
	case "ref/prompt":
		key = "name"
	case "ref/resource":
		key = "uri"
	default:
		return "", "", false
	}
	target, ok = ref[key].(string)
	return key, target, ok
}

// mcpMethods are the protocol's own methods of the MCP revisions toolgate
// speaks (2025-03-26 to 2026-07-28) that the shipped library lets through
// as plumbing: the client's requests and notifications. tools/call,
// resources/read, prompts/get and completion/complete are decided as tool
// calls; the client's answers to server requests carry no method. Keep in
// step with mcp_methods in rego/lib/toolgate.rego (TestNativeMatchesRego).
var mcpMethods = map[string]bool{
	"initialize":                           true,
	"ping":                                 true,
	"tools/list":                           true,
	"resources/list":                       true,
	"resources/templates/list":             true,
	"prompts/list":                         true,
	"logging/setLevel":                     true,
	"server/discover":                      true,
	"subscriptions/listen":                 true,
	"tasks/get":                            true,
	"tasks/result":                         true,
	"tasks/list":                           true,
	"tasks/cancel":                         true,
	"tasks/update":                         true,
	"notifications/initialized":            true,
	"notifications/cancelled":              true,
	"notifications/progress":               true,
	"notifications/roots/list_changed":     true,
	"notifications/message":                true,
	"notifications/resources/updated":      true,
	"notifications/resources/list_changed": true,
	"notifications/tools/list_changed":     true,
	"notifications/prompts/list_changed":   true,
	"notifications/elicitation/complete":   true,
	"notifications/tasks/status":           true,
}
