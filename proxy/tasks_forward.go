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
// byte. Approvers are shown the params as the agent sent them, the
// request for a task included: they see all that is sent, and this one
// member more. Everything else that weighs the params (the attach key, a
// remembered grant, the policy input) keeps it too: a call that a grant
// lets through is an allowed call, and goes untouched, as the upstream may
// hold its task then.

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

// dropTaskRequest leaves out of c's body, about to be parked, the member
// that asks for a task, when there is one, and makes the policy input's
// headers (what the approved call's re-check decides on) say the length
// that is then sent (bodyHeaders), as a hook's rewrite does.
func (c *call) dropTaskRequest() {
	path := c.mcp.taskRequestPath()
	if path == nil {
		return
	}
	c.body, _ = strictjson.Cut(c.body, append([]string{"params"}, path...)...)
	if c.input.HTTP.Headers != nil {
		// A copy: the decision log holds the map, and an ask was logged
		// before it is parked.
		h := maps.Clone(c.input.HTTP.Headers)
		bodyHeaders(h, len(c.body))
		c.input.HTTP.Headers = h
	}
}
