package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
)

// The upstream answers toolgate rewrites so that MCP clients see the tasks
// it adds: tasks/list with the caller's parked calls first, and the task
// capability in initialize and server/discover answers and listed tools.

// tasksListProxy forwards a 2025-11-25 tasks/list to the upstream, whose
// own tasks pass through, and puts the caller's parked calls before them
// on the first page (a request without a cursor). An upstream without
// tasks/list (a JSON-RPC error) leaves toolgate's tasks alone in the
// answer; a store that cannot be read makes the answer an error.
func (s *Server) tasksListProxy(r *http.Request, c *call) *httputil.ReverseProxy {
	first := !c.mcp.listCursor
	return answerProxy(c, func(res *http.Response) error {
		if !first {
			return nil
		}
		own, err := s.ownTasks(r.Context(), c)
		if res.StatusCode == http.StatusBadRequest {
			// An upstream that refuses the method outright (some answer
			// 400 to a method they do not know): toolgate's tasks alone.
			// Other failures stay the upstream's.
			res.Body.Close()
			body := withOwnTasks(mustJSON(map[string]any{"jsonrpc": "2.0", "id": c.mcp.rpcID(), "result": map[string]any{}}), own, err)
			res.StatusCode, res.Status = http.StatusOK, "200 OK"
			res.Header = http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(body))}}
			res.Body, res.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			return nil
		}
		return rewriteRPCAnswer(res, func(b []byte) []byte { return withOwnTasks(b, own, err) })
	})
}

// answerProxy forwards to c's upstream, and lets modify rewrite the
// upstream's answer once screenAnswer has passed it.
func answerProxy(c *call, modify func(*http.Response) error) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:    c.up.proxy.Rewrite,
		Transport:  c.up.transport,
		BufferPool: copyBuffers,
		ModifyResponse: func(res *http.Response) error {
			if err := screenAnswer(res); err != nil {
				return err
			}
			return modify(res)
		},
		ErrorHandler: upstreamError,
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// withOwnTasks returns a tasks/list answer (one JSON-RPC message) with own
// put first in its result's tasks; messages that are not the answer
// (notifications, requests) are returned as they are.
func withOwnTasks(b []byte, own []any, storeErr error) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(b, &msg) != nil || msg["method"] != nil || (msg["result"] == nil && msg["error"] == nil) {
		return b
	}
	if storeErr != nil {
		delete(msg, "result")
		msg["error"], _ = json.Marshal(map[string]any{"code": rpcInternal, "message": "Approval store unavailable: the tasks cannot be listed now; retry later"})
	} else {
		var result map[string]json.RawMessage
		if msg["error"] != nil || json.Unmarshal(msg["result"], &result) != nil || result == nil {
			// No tasks/list upstream, or not an object: toolgate's alone.
			result = map[string]json.RawMessage{}
			delete(msg, "error")
		}
		var theirs []json.RawMessage
		_ = json.Unmarshal(result["tasks"], &theirs)
		all := make([]any, 0, len(own)+len(theirs))
		all = append(all, own...)
		for _, t := range theirs {
			all = append(all, t)
		}
		result["tasks"], _ = json.Marshal(all)
		return withResult(msg, result, b)
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return b
	}
	return out
}

// initializeProxy forwards initialize and server/discover, and declares
// toolgate's task support beside the upstream's capabilities: the Tasks
// utility in a 2025-11-25 initialize answer, the Tasks extension in a
// server/discover answer (2026-07-28).
func (s *Server) initializeProxy(c *call) *httputil.ReverseProxy {
	return answerProxy(c, func(res *http.Response) error { return rewriteRPCAnswer(res, withTaskCapability) })
}

// rewriteRPCAnswer applies f to the JSON-RPC message of a JSON answer, or
// to each of an SSE answer's events.
func rewriteRPCAnswer(res *http.Response, f func([]byte) []byte) error {
	if res.StatusCode != http.StatusOK {
		return nil
	}
	ct := res.Header.Get("Content-Type")
	isJSON, isSSE := strings.HasPrefix(ct, "application/json"), strings.HasPrefix(ct, "text/event-stream")
	if !isJSON && !isSSE {
		return nil
	}
	body, err := readAnswer(res)
	if err != nil {
		return err
	}
	if isJSON {
		body = f(body)
	} else {
		body = rewriteSSE(body, f)
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	res.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// withTaskCapability merges toolgate's task support into the upstream's
// capabilities: capabilities.tasks (task-augmented tools/call, tasks/list,
// tasks/cancel) in an initialize result of the 2025-11-25 revision, or
// capabilities.extensions["io.modelcontextprotocol/tasks"] in a
// server/discover result (supportedVersions). The upstream's own task
// capabilities stay. Anything else is returned unchanged.
func withTaskCapability(b []byte) []byte {
	msg, result, ok := rpcResult(b)
	if !ok {
		return b
	}
	_, discover := result["supportedVersions"]
	var version string
	if !discover && (json.Unmarshal(result["protocolVersion"], &version) != nil || !taskEra(version)) {
		return b
	}
	var caps map[string]any
	if raw, has := result["capabilities"]; has {
		if json.Unmarshal(raw, &caps) != nil {
			return b
		}
	}
	if caps == nil {
		caps = map[string]any{}
	}
	if discover {
		ext, _ := caps["extensions"].(map[string]any)
		if ext == nil {
			ext = map[string]any{}
		}
		if _, has := ext[tasksExtension]; !has {
			// Exactly {}: the extension defines no settings, and the
			// published client (@modelcontextprotocol/ext-tasks 0.2)
			// stops using tasks when the object holds anything.
			ext[tasksExtension] = map[string]any{}
		}
		caps["extensions"] = ext
	} else {
		addTaskUtility(caps)
	}
	var err error
	if result["capabilities"], err = json.Marshal(caps); err != nil {
		return b
	}
	return withResult(msg, result, b)
}

// addTaskUtility declares the 2025-11-25 Tasks utility in caps.
func addTaskUtility(caps map[string]any) {
	tasks, _ := caps["tasks"].(map[string]any)
	if tasks == nil {
		tasks = map[string]any{}
	}
	requests, _ := tasks["requests"].(map[string]any)
	if requests == nil {
		requests = map[string]any{}
	}
	tools, _ := requests["tools"].(map[string]any)
	if tools == nil {
		tools = map[string]any{}
	}
	if _, has := tools["call"]; !has {
		tools["call"] = map[string]any{}
	}
	requests["tools"] = tools
	tasks["requests"] = requests
	for _, k := range []string{"list", "cancel"} {
		if _, has := tasks[k]; !has {
			tasks[k] = map[string]any{}
		}
	}
	caps["tasks"] = tasks
}

// markTaskSupport returns a listed tool, a JSON object, with
// execution.taskSupport "optional" added: its calls may be parked, and a
// client may then follow them as tasks. A tool whose execution the
// upstream set is returned as it is.
func markTaskSupport(tool json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(tool, &m) != nil {
		return tool
	}
	if _, has := m["execution"]; has {
		return tool
	}
	end := bytes.LastIndexByte(tool, '}')
	if end <= 0 {
		return tool
	}
	out := make([]byte, 0, len(tool)+40)
	out = append(out, tool[:end]...)
	out = append(out, `,"execution":{"taskSupport":"optional"}`...)
	out = append(out, tool[end:]...)
	if !json.Valid(out) {
		return tool
	}
	return out
}
