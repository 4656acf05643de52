package proxy

import "github.com/toolgate/toolgate/internal/strictjson"

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

// taskRequestPath is where m's tools/call asks for a task: params.task in
// 2025-11-25; from 2026-07-28 the Tasks extension among the request's own
// client capabilities. Nil when it asks for none.
func (m *mcpMessage) taskRequestPath() []string {
	switch {
	case m == nil || !m.task:
		return nil
	case m.version >= statelessEra:
		return []string{"params", "_meta", clientCapsKey, "extensions", tasksExtension}
	default:
		return []string{"params", "task"}
	}
}

// dropTaskRequest leaves out of c's body, about to be parked, the member
// that asks for a task, when there is one (replaceBody: the policy input
// the approved call's re-check decides on says the length then sent).
func (c *call) dropTaskRequest() {
	if path := c.mcp.taskRequestPath(); path != nil {
		if body, cut := strictjson.Cut(c.body, path...); cut {
			c.replaceBody(body)
		}
	}
}
