package proxy

import (
	"maps"

	"github.com/toolgate/toolgate/internal/strictjson"
)

// A tools/call that asks for a task and is decided ask becomes toolgate's
// own task, whose ID is the call's (tasks.go, taskext.go). Once approved,
// the call goes to the upstream without asking it for a task: toolgate
// holds the task already, and an upstream that made one of its own would
// answer with that task (its ID, "working") where the tool's result should
// complete toolgate's. What asks for the task is a request to whoever
// answers the client, as Prefer is (stored.go leaves that out too); the
// tool, its arguments and every other member go as they came, byte for
// byte, and approvers are shown the call as it will be sent. A call that a
// remembered grant lets through goes the same way: its grant was given on
// a call shown without the request, and binds the params so shown
// (shownParamsForm), so it covers the call with or without one.

// dropTaskRequest leaves out of c's body the member that asks for a task,
// when there is one, and makes the policy input's headers (what an
// approved call's re-check decides on) say the length that is then sent
// (bodyHeaders), as a hook's rewrite does. The policy
// input's params keep it: they are what the call was decided on, and what
// an identical retry must carry alike to attach.
func (c *call) dropTaskRequest() {
	if c.mcp.taskRequestPath() == nil {
		return
	}
	c.body = c.mcp.withoutTaskRequest(c.body)
	if c.input.HTTP.Headers != nil {
		// A copy: the decision log may hold the map, and an ask was
		// logged before it is parked.
		h := maps.Clone(c.input.HTTP.Headers)
		bodyHeaders(h, len(c.body))
		c.input.HTTP.Headers = h
	}
}

// taskRequestPath is where m's tools/call asks for a task, under params:
// params.task in 2025-11-25; from 2026-07-28 the Tasks extension among
// the request's own client capabilities. Nil when it asks for none.
func (m *mcpMessage) taskRequestPath() []string {
	switch {
	case m == nil || !m.task:
		return nil
	case m.version >= statelessEra:
		return []string{"_meta", clientCapsKey, "extensions", tasksExtension}
	default:
		return []string{"task"}
	}
}

// withoutTaskRequest is body, the JSON-RPC message of m, as an approved
// call sends it: without the member that asks for a task.
func (m *mcpMessage) withoutTaskRequest(body []byte) []byte {
	path := m.taskRequestPath()
	if path == nil {
		return body
	}
	out, _ := strictjson.Cut(body, append([]string{"params"}, path...)...)
	return out
}

// withoutTaskParams is params (never changed) as withoutTaskRequest
// leaves them.
func (m *mcpMessage) withoutTaskParams(params map[string]any) map[string]any {
	if path := m.taskRequestPath(); path != nil {
		return cutParam(params, path)
	}
	return params
}

// cutParam returns m without the member at path; m is not changed, and
// what lies on the path is copied.
func cutParam(m map[string]any, path []string) map[string]any {
	v, ok := m[path[0]]
	if !ok {
		return m
	}
	if len(path) == 1 {
		out := maps.Clone(m)
		delete(out, path[0])
		return out
	}
	inner, ok := v.(map[string]any)
	if !ok {
		return m
	}
	out := maps.Clone(m)
	out[path[0]] = cutParam(inner, path[1:])
	return out
}
