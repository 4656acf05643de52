package proxy

import (
	"context"
	"net/http"

	"github.com/toolgate/toolgate/lifecycle"
	"github.com/toolgate/toolgate/pending"
)

// Parked calls as tasks of the Tasks extension (io.modelcontextprotocol/
// tasks) of MCP 2026-07-28. A client declares the extension in each
// request's own capabilities; a tools/call that declares it and is
// decided ask is answered at once with a CreateTaskResult (resultType
// "task", the task's fields flat in the result) whose taskId is the call
// ID. toolgate answers tasks/get, tasks/update and tasks/cancel for the
// caller's own call IDs from the store, so any replica answers any task;
// other task IDs (another principal's too) go to the upstream untouched.
//
// Statuses, as the extension defines them:
//
//	waiting, approved, executing            working (input_required: see below)
//	executed                                completed, with the upstream's result (isError included)
//	rejected, expired, denied at re-check   completed, with the isError result a deny gets
//	the upstream's JSON-RPC error           failed, with that error
//	unknown (sent, no answer)               failed, with an internal error
//	cancelled                               cancelled
//
// A waiting call that its requester may confirm (confirm.go) is
// input_required for a client that declares URL elicitation on its
// tasks/get: the input request sends its human to the confirmation page.
// tasks/update is acknowledged and its answers ignored: a client can
// answer by itself, so only the page decides.

const (
	// confirmPollInterval is the polling interval a task its requester may
	// confirm suggests at creation, in milliseconds: the confirmation page
	// reaches the client with its first tasks/get.
	confirmPollInterval = 1000
	tasksExtension      = "io.modelcontextprotocol/tasks"
	clientCapsKey       = "io.modelcontextprotocol/clientCapabilities"
	// rpcMissingCapability: a task method from a client that did not
	// declare the extension on the request.
	rpcMissingCapability = -32021
)

// readClientCaps reads what toolgate needs of a 2026-07-28 request's own
// client capabilities (params._meta), and whether it answers toolgate's
// confirmation input request (params.inputResponses).
func (m *mcpMessage) readClientCaps(params map[string]any) {
	meta, _ := params["_meta"].(map[string]any)
	caps, _ := meta[clientCapsKey].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, m.tasksExt = ext[tasksExtension]
	m.urlElicit = declaresURLElicitation(caps)
	answers, _ := params["inputResponses"].(map[string]any)
	_, answered := answers[confirmKey]
	// toolgate hands out the call's ID as the requestState, which a
	// client echoes (or leaves out); a retry with JSON of another type
	// there is not the one it addressed, and attaches to nothing.
	rs, has := params["requestState"]
	_, str := rs.(string)
	m.confirmAnswered = answered && (!has || str)
}

// declaresURLElicitation reports whether client capabilities declare
// URL-mode elicitation (elicitation.url).
func declaresURLElicitation(caps any) bool {
	c, _ := caps.(map[string]any)
	el, _ := c["elicitation"].(map[string]any)
	_, url := el["url"]
	return url
}

// extTaskGet is tasks/get of the extension: an approved call nobody has
// claimed runs now (the extension has no blocking tasks/result, and the
// client should not wait for the sweeper's grace); a finished call is
// marked delivered, as a status read is.
func (s *Server) extTaskGet(ctx context.Context, principal, id string) (pending.Call, error) {
	if !s.draining.Load() {
		if ran, err := s.life.Run(ctx, principal, id); err != nil || !ran.State.Terminal() {
			return ran, err
		}
	}
	return s.life.Status(ctx, principal, id, 0, true)
}

// extTaskAnswer answers an extension task method for the caller's own
// call pc.
func (s *Server) extTaskAnswer(c *call, pc pending.Call) answer {
	if c.mcp.method != "tasks/get" {
		// tasks/update and tasks/cancel: an empty acknowledgement.
		return rpcAnswer(c, map[string]any{"resultType": "complete"})
	}
	d := s.detailedTask(c, pc)
	d["resultType"] = "complete"
	return rpcAnswer(c, d)
}

// missingTasksCapability answers an extension task method about the
// caller's own call from a request that does not declare the extension.
func missingTasksCapability(c *call) answer {
	return answer{kind: document, status: http.StatusOK, outcome: outcomeInvalid, doc: map[string]any{
		"jsonrpc": "2.0", "id": c.mcp.rpcID(), "error": map[string]any{
			"code": rpcMissingCapability, "message": "Missing required client capability",
			"data": map[string]any{"requiredCapabilities": map[string]any{
				"extensions": map[string]any{tasksExtension: map[string]any{}},
			}},
		},
	}}
}

// detailedTask is pc as the extension's DetailedTask: the task, with its
// result, error or input requests inline.
func (s *Server) detailedTask(c *call, pc pending.Call) map[string]any {
	t := taskOf(pc)
	d := t.extDoc()
	switch {
	case !pc.State.Terminal():
		if req, ok := s.confirmRequest(c, pc); ok {
			d["status"], d["statusMessage"] = "input_required", "waiting for its requester to confirm it, or for an approver"
			d["inputRequests"] = map[string]any{confirmKey: req}
		}
	case pc.State == pending.Cancelled:
	case pc.State == pending.Unknown:
		d["status"] = "failed"
		d["error"] = map[string]any{"code": rpcInternal, "message": t.message}
	default:
		doc, _ := taskResult(c, pc).doc.(map[string]any)
		if e, failed := doc["error"]; failed {
			d["status"], d["error"] = "failed", e
		} else {
			d["status"], d["result"] = "completed", doc["result"]
		}
	}
	return d
}

// extDoc is the extension's Task: the 2025-11-25 task's fields, with the
// durations renamed.
func (t task) extDoc() map[string]any {
	d := t.doc()
	d["ttlMs"] = d["ttl"]
	delete(d, "ttl")
	if p, has := d["pollInterval"]; has {
		d["pollIntervalMs"] = p
		delete(d, "pollInterval")
	}
	return d
}

// extTaskCreated answers a tools/call that declared the extension and was
// parked (or attached to a waiting call): the CreateTaskResult. A call
// that is already decided answers as it would without a task: the server
// decides when a task is worth it. A task its requester may confirm
// (confirm: through the client's URL elicitation) says so, and asks to be
// polled soon: its first tasks/get carries the confirmation page.
func extTaskCreated(c *call, o lifecycle.Outcome, confirm bool) (answer, bool) {
	if o.Kind != lifecycle.Waiting {
		return answer{}, false
	}
	d := taskOf(o.Call).extDoc()
	d["resultType"] = "task"
	if confirm {
		d["statusMessage"] = "waiting for its requester to confirm it (tasks/get carries the page), or for an approver"
		d["pollIntervalMs"] = confirmPollInterval
	}
	return ofCall(rpcAnswer(c, d), o.Call), true
}
