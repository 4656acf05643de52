package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/lifecycle"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// Parked calls as MCP tasks, in the session era (the Tasks utility of MCP
// 2025-11-25, basic/utilities/tasks): a tools/call that carries
// params.task and is decided ask is parked as any ask, and answered at once
// with a CreateTaskResult whose taskId is the call ID. toolgate answers
// tasks/get, tasks/result, tasks/list and tasks/cancel for its own call
// IDs, from the store alone, so any replica answers any task, and only to
// the call's principal; a taskId that is not one of toolgate's calls (a task
// the upstream created for an allowed call) goes to the upstream untouched,
// and so does another principal's.
//
// Task statuses of a parked call:
//
//	waiting, approved, executing          working
//	executed, the upstream's result        completed
//	executed, isError or a JSON-RPC error  failed (the utility: a tool result with isError is failed)
//	rejected, expired, denied at re-check  failed, with the isError result a deny gets
//	failed, unknown                        failed
//	cancelled                              cancelled
//
// Reading a task is not the once-only delivery of a held request's result:
// tasks/get and tasks/result read the call as the store keeps it, for as
// long as it keeps it (pending.result_ttl).

const (
	// tasksEra is the revision whose Tasks utility this file speaks; the
	// stateless revision (2026-07-28) moved tasks to an extension.
	tasksEra     = "2025-11-25"
	statelessEra = "2026-07-28"
	// relatedTaskKey ties a tasks/result answer to its task (_meta).
	relatedTaskKey = "io.modelcontextprotocol/related-task"
	// immediateKey is the optional text a host may hand the model while
	// the task runs (_meta of a CreateTaskResult).
	immediateKey = "io.modelcontextprotocol/model-immediate-response"
	// taskPollInterval is the polling interval toolgate suggests, in
	// milliseconds (the Retry-After of a REST call's 202).
	taskPollInterval = 5000
	// maxListedTasks bounds tasks/list: the principal's calls among the
	// newest this many of each state the store lists (see ownTasks).
	maxListedTasks = 100
	rpcInternal    = -32603
)

// taskEra reports whether version speaks the 2025-11-25 Tasks utility.
func taskEra(version string) bool {
	return version >= tasksEra && version < statelessEra
}

// readTaskParams records what the task methods need of a message: whether
// a tools/call asks for a task (params.task), and the taskId of tasks/get,
// tasks/result and tasks/cancel.
func (m *mcpMessage) readTaskParams(params map[string]any) {
	switch m.method {
	case "tools/call":
		// Before 2025-11-25 no client sends params.task; from 2026-07-28
		// the client declares the Tasks extension in the request's
		// capabilities, and the server decides (taskext.go). An absent
		// version header is an older client (the transport's default).
		if m.version >= statelessEra {
			m.task = m.tasksExt
		} else {
			_, m.task = params["task"]
		}
	case "tasks/get", "tasks/result", "tasks/cancel", "tasks/update":
		m.taskID = stringOf(params["taskId"])
	}
}

// taskAnswer answers a task method for one of the caller's own calls; ok
// is false when the message is something else (forward it): not a task
// method of the message's revision, no parked calls here, a taskId
// toolgate never gave out, or one it gave another principal.
func (s *Server) taskAnswer(w http.ResponseWriter, r *http.Request, c *call) (a answer, ok bool) {
	m := c.mcp
	if s.life == nil || m == nil {
		return answer{}, false
	}
	stateless := m.version >= statelessEra
	if m.taskID == "" || !isTaskMethod(m.method, stateless) {
		return answer{}, false
	}
	ctx := r.Context()
	// Only the caller's own calls are answered here. Another principal's
	// call answers exactly as an ID toolgate never gave out: it goes to
	// the upstream, which knows neither. An answer of toolgate's own for
	// it (not found, a missing capability, an acknowledgement) would tell
	// the caller that someone else's task exists.
	pc, err := s.life.Status(ctx, c.subject.Principal, m.taskID, 0, false)
	switch {
	case errors.Is(err, pending.ErrNotFound):
		return answer{}, false
	case err != nil:
		return taskStoreFailed(c), true
	case m.id == nil:
		// A task method sent as a notification asks for no answer: one
		// that names the caller's call is acknowledged (202, as MCP
		// answers notifications) and goes no further.
		w.Header().Set(headerCallID, pc.ID)
		w.Header().Set(headerDecision, stateOutcome(pc.State))
		w.WriteHeader(http.StatusAccepted)
		return answer{kind: written}, true
	case !isTaskOf(pc, c):
		// Every task method may act on the call (cancel it; run it once
		// approved, as tasks/result and a 2026 tasks/get do, and take
		// its outcome): a call of the caller's that is not a task here
		// (a REST call, another upstream's, a resources/read) is not
		// found, and left as it is.
		return taskNotFound(c), true
	case stateless && !m.tasksExt:
		// The extension's methods from a request that does not declare
		// it: refused before anything is read or done.
		return missingTasksCapability(c), true
	}
	if m.method == "tasks/result" {
		s.offerTaskConfirmation(ctx, w, r, c)
	}
	pc, err = s.taskCall(ctx, c)
	switch {
	case errors.Is(err, pending.ErrNotFound):
		// Gone since it was read: as unknown.
		return answer{}, false
	case errors.Is(err, pending.ErrConflict) && stateless:
		// tasks/cancel of a call already decided: cancellation is
		// cooperative in the extension, and acknowledged all the same.
		if !isTaskOf(pc, c) {
			return taskNotFound(c), true
		}
	case errors.Is(err, pending.ErrConflict):
		// tasks/cancel of a call already decided: terminal, or approved
		// and about to run, which nothing stops any more.
		return ofCall(taskError(c, rpcInvalidParams, "Cannot cancel task: it is "+taskOf(pc).status+" ("+string(pc.State)+")"), pc), true
	case err != nil:
		return taskStoreFailed(c), true
	case !isTaskOf(pc, c):
		return taskNotFound(c), true
	}
	if stateless {
		return ofCall(s.extTaskAnswer(c, pc), pc), true
	}
	if m.method != "tasks/result" {
		t := taskOf(pc)
		if _, ok := s.confirmRequest(c, pc); ok {
			// Its requester may confirm it: tasks/result carries the
			// elicitation of the confirmation page.
			t.status, t.message = "input_required", "waiting for its requester to confirm it (tasks/result), or for an approver"
		}
		return ofCall(rpcAnswer(c, t.doc()), pc), true
	}
	if !pc.State.Terminal() {
		t := taskOf(pc)
		a := taskError(c, rpcInternal, "Task still "+t.status+" ("+t.message+") after "+s.cfg.Hold.String()+"; call tasks/result again, or poll tasks/get")
		return ofCall(a, pc), true
	}
	return ofCall(taskResult(c, pc), pc), true
}

// offerTaskConfirmation starts a session-era tasks/result's answer as an
// SSE stream whose first event is the elicitation/create of the task's
// confirmation page, when the caller's waiting task is one its requester
// may confirm and the session's client declared URL elicitation; the
// result follows on the stream.
func (s *Server) offerTaskConfirmation(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) {
	m, ok := c.out.(*rpcResponder)
	if !ok || !c.mcp.urlElicit || s.cfg.ConfirmURL == nil || !acceptsSSE(r) {
		return
	}
	pc, err := s.life.Status(ctx, c.subject.Principal, c.mcp.taskID, 0, false)
	if err != nil || !isTaskOf(pc, c) {
		return
	}
	req, ok := s.confirmRequest(c, pc)
	if !ok {
		return
	}
	params, _ := req["params"].(map[string]any)
	params["_meta"] = map[string]any{relatedTaskKey: map[string]any{"taskId": pc.ID}}
	m.startSSE(w, pc.ID, outcomeAsk)
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": confirmRPCPrefix + pc.ID, "method": req["method"], "params": params})
	m.sse.send(msg)
}

// isTaskMethod reports whether method is one of the task methods of the
// message's revision: the 2025-11-25 utility's, or the extension's.
func isTaskMethod(method string, stateless bool) bool {
	switch method {
	case "tasks/get", "tasks/cancel":
		return true
	case "tasks/result":
		return !stateless
	case "tasks/update":
		return stateless
	}
	return false
}

// taskCall reads, or acts on, the caller's call that a task method names.
func (s *Server) taskCall(ctx context.Context, c *call) (pending.Call, error) {
	m, principal := c.mcp, c.subject.Principal
	switch {
	case m.method == "tasks/cancel":
		return s.life.Cancel(ctx, principal, m.taskID)
	case m.method == "tasks/result":
		return s.taskResultWait(ctx, principal, m.taskID)
	case m.method == "tasks/get" && m.version >= statelessEra:
		return s.extTaskGet(ctx, principal, m.taskID)
	}
	return s.life.Status(ctx, principal, m.taskID, 0, false)
}

func taskNotFound(c *call) answer {
	return taskError(c, rpcInvalidParams, "Failed to retrieve task: Task not found")
}

// taskResultWait follows the call until it ends or the hold runs out
// (lifecycle.Lifecycle.AwaitResult): tasks/result blocks until the task is
// terminal, and toolgate holds no request longer than pending.hold, nor
// more of them per caller than limits.max_held_per_subject. Its result
// stays readable here.
func (s *Server) taskResultWait(ctx context.Context, principal, id string) (pending.Call, error) {
	hold, release := s.holdPlace(principal, s.cfg.Hold)
	defer release()
	return s.life.AwaitResult(ctx, principal, id, hold)
}

// isTaskOf reports whether pc is a task of this upstream's endpoint: a
// parked tools/call of the same upstream.
func isTaskOf(pc pending.Call, c *call) bool {
	return pc.Upstream == c.up.Name && infoOf(pc).MCPMethod == "tools/call"
}

// task is a parked call as an MCP Task.
type task struct {
	id, status, message string
	createdAt, updated  time.Time
	ttl                 time.Duration
}

func (t task) doc() map[string]any {
	d := map[string]any{
		"taskId": t.id, "status": t.status, "statusMessage": t.message,
		"createdAt": t.createdAt.UTC().Format(time.RFC3339), "lastUpdatedAt": t.updated.UTC().Format(time.RFC3339),
		"ttl": t.ttl.Milliseconds(),
	}
	if t.status == "working" {
		d["pollInterval"] = taskPollInterval
	}
	return d
}

// taskOf is pc as a task. Its ttl is the call's life from its creation
// until it expires (it waits no longer; the store keeps its outcome for
// result_ttl after).
func taskOf(pc pending.Call) task {
	t := task{id: pc.ID, createdAt: pc.CreatedAt, updated: pc.CreatedAt, ttl: pc.ExpiresAt.Sub(pc.CreatedAt)}
	if pc.DecidedAt.After(t.updated) {
		t.updated = pc.DecidedAt
	}
	switch pc.State {
	case pending.Waiting:
		t.status, t.message = "working", "waiting for approval"
		if n := len(pc.Approvals); n > 0 {
			t.message += " (" + strconv.Itoa(n) + " approval(s) so far)"
		}
	case pending.Approved:
		t.status, t.message = "working", "approved by "+pc.DecidedBy+"; about to run"
	case pending.Executing:
		t.status, t.message = "working", "approved; executing"
	case pending.Cancelled:
		t.status, t.message = "cancelled", "the call was cancelled before it was decided"
	case pending.Executed:
		t.status, t.message = "completed", "executed"
		if pc.Result != nil && !resultSucceeded(*pc.Result) {
			t.status, t.message = "failed", "executed; the tool reported an error"
		}
	case pending.Rejected:
		t.status, t.message = "failed", ended(pc, policy.Decision{}).detail
	case pending.Expired:
		t.status, t.message = "failed", "nobody approved the call before it expired"
	case pending.Failed:
		t.status, t.message = "failed", "approved, but not sent"
		if pc.Result != nil {
			if _, detail := ownResult(*pc.Result); detail != "" {
				t.status, t.message = "failed", detail
			}
		}
	default: // unknown
		t.status, t.message = "failed", "the call was sent, but no answer came back; it was not retried"
	}
	return t
}

// resultSucceeded reports whether an executed call's result is a
// tools/call result without isError.
func resultSucceeded(res pending.Result) bool {
	if isOwnResult(res) {
		return false
	}
	msg, ok := rpcResponseOf(res)
	if !ok || msg["error"] != nil {
		return false
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(msg["result"], &r) == nil && !r.IsError
}

// rpcResponseOf finds the JSON-RPC response in a stored result: the JSON
// body, or the last response among an SSE stream's events (notifications
// and requests of the upstream's come before it).
func rpcResponseOf(res pending.Result) (map[string]json.RawMessage, bool) {
	if res.Truncated {
		return nil, false
	}
	parse := func(b []byte) (map[string]json.RawMessage, bool) {
		var msg map[string]json.RawMessage
		if json.Unmarshal(b, &msg) != nil || msg["method"] != nil || (msg["result"] == nil && msg["error"] == nil) {
			return nil, false
		}
		return msg, true
	}
	ct := http.Header(res.Header).Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		var found map[string]json.RawMessage
		for _, ev := range sseEvents(res.Body) {
			if msg, ok := parse([]byte(ev.data)); ok {
				found = msg
			}
		}
		return found, found != nil
	}
	return parse(res.Body)
}

// ownResult reads toolgate's own result of an approved call (a problem
// body): whether the re-check denied it, and the problem's detail.
func ownResult(res pending.Result) (deniedNow bool, detail string) {
	if !isOwnResult(res) {
		return false, ""
	}
	var p problem
	if json.Unmarshal(res.Body, &p) != nil {
		return false, "approved, but it could not be completed"
	}
	return p.Status == http.StatusForbidden, p.Detail
}

// taskResult is what tasks/result returns for a terminal call: exactly what
// the tools/call would have returned, with the request's id, and the
// related-task mark in the result's _meta.
func taskResult(c *call, pc pending.Call) answer {
	var a answer
	switch {
	case pc.State == pending.Executed && pc.Result != nil && !isOwnResult(*pc.Result):
		msg, ok := rpcResponseOf(*pc.Result)
		if !ok {
			a = answer{
				kind: verdict, outcome: "failed", title: "The approved call could not be completed",
				detail: "the upstream answered HTTP " + strconv.Itoa(pc.Result.Status) + " without a complete JSON-RPC response",
			}
			break
		}
		out := map[string]any{"jsonrpc": "2.0", "id": c.mcp.rpcID()}
		if e := msg["error"]; e != nil {
			out["error"] = e
		} else {
			out["result"] = withRelatedTask(msg["result"], pc.ID)
		}
		return answer{kind: document, status: http.StatusOK, callID: pc.ID, doc: out}
	case pc.State == pending.Rejected || pc.State == pending.Expired || pc.State == pending.Cancelled:
		a = ended(pc, policy.Decision{})
		info := infoOf(pc)
		a.reasons, a.ruleIDs = info.Reasons, info.RuleIDs
	case pc.Result != nil && isOwnResult(*pc.Result):
		deniedNow, detail := ownResult(*pc.Result)
		a = answer{kind: verdict, outcome: "failed", title: "The approved call could not be completed", detail: detail}
		if deniedNow {
			a.outcome, a.title = outcomeDeny, "Denied by policy"
		}
	default:
		a = answer{
			kind: verdict, outcome: string(pc.State), title: "No result",
			detail: "call " + pc.ID + " ended " + string(pc.State) + " without a result; it was not retried",
		}
	}
	a.callID = pc.ID
	rm := &rpcResponder{msg: c.mcp}
	msg := rm.toolError(a, verdictText(a))
	msg["jsonrpc"] = "2.0"
	res := msg["result"].(map[string]any)
	res["_meta"].(map[string]any)[relatedTaskKey] = map[string]any{"taskId": pc.ID}
	return answer{kind: document, status: http.StatusOK, callID: pc.ID, doc: msg}
}

// withRelatedTask returns a tools/call result with the related-task mark
// added to its _meta; the rest stays as the upstream wrote it.
func withRelatedTask(result json.RawMessage, id string) json.RawMessage {
	var r map[string]json.RawMessage
	if json.Unmarshal(result, &r) != nil || r == nil {
		return result
	}
	meta := map[string]json.RawMessage{}
	if m, has := r["_meta"]; has && json.Unmarshal(m, &meta) != nil {
		return result // the upstream's _meta is not an object: leave it
	}
	meta[relatedTaskKey], _ = json.Marshal(map[string]string{"taskId": id})
	r["_meta"], _ = json.Marshal(meta)
	b, err := json.Marshal(r)
	if err != nil {
		return result
	}
	return b
}

// taskCreated answers a task-augmented tools/call the lifecycle parked
// (or attached to a call already parked): the CreateTaskResult. Outcomes
// that parked nothing answer as they would without a task.
func taskCreated(c *call, o lifecycle.Outcome) (answer, bool) {
	switch o.Kind {
	case lifecycle.Waiting, lifecycle.Ended, lifecycle.Delivered, lifecycle.Taken, lifecycle.NoResult:
	default:
		return answer{}, false
	}
	pc := o.Call
	t := taskOf(pc)
	if o.Kind == lifecycle.Delivered {
		pc.Result = &o.Result
		t = taskOf(pc)
	}
	result := map[string]any{"task": t.doc()}
	if t.status == "working" {
		result["_meta"] = map[string]any{
			immediateKey: "Call " + pc.ID + " waits for a human approver; nothing ran yet. Its result follows through tasks/result.",
		}
	}
	return ofCall(rpcAnswer(c, result), pc), true
}

// ofCall is a task method's answer about the caller's call pc: its
// X-Toolgate-Call-Id names the call and its X-Toolgate-Decision says what
// became of it, as the status endpoint's do.
func ofCall(a answer, pc pending.Call) answer {
	a.callID, a.outcome = pc.ID, stateOutcome(pc.State)
	return a
}

// rpcAnswer is a JSON-RPC result toolgate answers itself.
func rpcAnswer(c *call, result any) answer {
	return answer{kind: document, status: http.StatusOK, doc: map[string]any{"jsonrpc": "2.0", "id": c.mcp.rpcID(), "result": result}}
}

// taskError is a JSON-RPC error of a task method.
func taskError(c *call, code int, message string) answer {
	return answer{kind: document, status: http.StatusOK, doc: map[string]any{
		"jsonrpc": "2.0", "id": c.mcp.rpcID(), "error": map[string]any{"code": code, "message": message},
	}}
}

func taskStoreFailed(c *call) answer {
	a := taskError(c, rpcInternal, "Approval store unavailable: the task cannot be read now; retry later")
	a.outcome = outcomeUnavailable
	return a
}

// ownTasks is the caller's tasks on this upstream, for tasks/list. The
// store lists calls by state, not by principal, so toolgate reads the
// newest maxListedTasks calls of each state (briefs only) and keeps the
// caller's: a principal's task older than that may be missing from the
// list while tasks/get still finds it.
func (s *Server) ownTasks(ctx context.Context, c *call) ([]any, error) {
	var tasks []any
	err := s.life.Owned(ctx, c.subject.Principal, maxListedTasks, func(pc pending.Call) bool {
		return pc.Upstream == c.up.Name && briefMethod(pc) == "tools/call"
	}, func(pc pending.Call) { tasks = append(tasks, taskOf(pc).doc()) })
	if err != nil {
		return nil, err
	}
	if tasks == nil {
		tasks = []any{} // "tasks": [], not null
	}
	return tasks, nil
}

// briefMethod is the JSON-RPC method of a listed call.
func briefMethod(pc pending.Call) string {
	if b, ok := callinfo.DecodeBrief(pc.Brief); ok {
		return b.MCPMethod
	}
	return infoOf(pc).MCPMethod
}
