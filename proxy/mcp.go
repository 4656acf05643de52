package proxy

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/pending"

	"github.com/toolgate/toolgate/policy"
)

// JSON-RPC error codes toolgate answers with. Denials use a code outside
// the range JSON-RPC reserves (-32768 to -32000).
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcInvalidParams  = -32602
	rpcHeaderMismatch = -32020 // MCP 2026-07-28: Mcp-Method, Mcp-Name or Mcp-Param-* disagree with the body
	rpcDenied         = -31001
	rpcUnavailable    = -31003
)

// maxBatch bounds the messages of a JSON-RPC batch: each distinct method in
// it is decided on its own.
const maxBatch = 100

// mcpMessage is what toolgate read of one JSON-RPC message to an MCP
// upstream.
type mcpMessage struct {
	method        string
	id            json.RawMessage // the request's id, exactly as sent; nil for notifications
	version       string          // Mcp-Protocol-Version
	isToolCall    bool
	progressToken any
	// task is set for a tools/call that asks for a task (params.task,
	// MCP 2025-11-25); taskID is the taskId of tasks/get, tasks/result
	// and tasks/cancel (tasks.go).
	task   bool
	taskID string
	// From a 2026-07-28 request's own client capabilities (taskext.go):
	// tasksExt, the Tasks extension; urlElicit, URL-mode elicitation.
	// confirmAnswered is set when the request answers toolgate's
	// confirmation input request (its answer decides nothing).
	tasksExt, urlElicit, confirmAnswered bool
	// ownResponse is set for a JSON-RPC response to one of toolgate's own
	// requests (confirm.go): toolgate answers it, no upstream sees it.
	ownResponse bool
	// cancels is the request a notifications/cancelled names (its
	// params.requestId, as id is kept), or nil (mcpcancel.go).
	cancels []byte
	// listCursor: a list request asks for a later page (params.cursor).
	listCursor bool
	// batch is the distinct methods of a batch's members: each is decided
	// too.
	batch []string
}

// notMCPEndpoint refuses a plain HTTP call to an MCP upstream that an
// upstream may take for its MCP endpoint all the same: a spelling of
// mcp_path in another case or with a trailing slash (routers that match
// loosely, as Express does by default, serve both there) or trailing dots
// and spaces (IIS and ASP.NET drop them, as Windows does from a name), or
// any request naming an MCP session. Either would reach the MCP server
// without its message being read or its session checked against the caller.
// The path is judged as sent (rawRel) and decoded (rel): "/mcp%20" is
// "/mcp " to the router.
func notMCPEndpoint(r *http.Request, rawRel, rel, mcpPath string) *answer {
	endpoint := strings.TrimRight(mcpPath, "/")
	if strings.EqualFold(strings.TrimRight(rawRel, "/. "), endpoint) || strings.EqualFold(strings.TrimRight(rel, "/. "), endpoint) {
		return invalid(http.StatusBadRequest, "Not the MCP endpoint", "the MCP endpoint is "+mcpPath+", spelt exactly so")
	}
	if _, has := r.Header[headerSessionID]; has {
		return invalid(http.StatusBadRequest, "Session outside the MCP endpoint", "Mcp-Session-Id is sent to the MCP endpoint "+mcpPath+" only")
	}
	return nil
}

// readMCP reads a request to an MCP upstream. POSTs to its mcp_path carry
// one JSON-RPC message, parsed as strictly as a REST body; tools/call is a
// tool call, every other method, GET (the SSE stream) and DELETE (session
// end) are protocol plumbing; any other path is a plain HTTP call.
func (s *Server) readMCP(r *http.Request, c *call, query url.Values) *answer {
	in := c.input
	if c.rawRel != c.up.MCPPath {
		if a := notMCPEndpoint(r, c.rawRel, c.rel, c.up.MCPPath); a != nil {
			return a
		}
		if a := checkOverrideQuery(query); a != nil {
			return a
		}
		return s.readPlain(r, c)
	}
	in.Kind = policy.KindMCP
	if a := checkOverrideQuery(query); a != nil {
		return a // with tool_query, a query reaches the endpoint
	}
	if r.URL.RawQuery != "" && !c.up.ToolQuery {
		// The transport defines no query: one an MCP server reads (hosted
		// servers take settings there) would be arguments that the rules,
		// which judge params, never see. With tool_query a tools/call's
		// query is checked against its arguments, as a REST call's is.
		return invalid(http.StatusBadRequest, "Query on the MCP endpoint", "MCP messages carry their params in the body; this upstream takes no query string (upstreams[].tool_query)")
	}
	c.mcp = &mcpMessage{version: r.Header.Get("Mcp-Protocol-Version")}
	c.out = &rpcResponder{msg: c.mcp}
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodDelete:
		// The SSE stream and the end of a session: a body here would be
		// a message to the upstream that no method decision covered.
		body, cerr := s.readBody(r, c)
		if cerr == nil && len(body) > 0 {
			cerr = invalid(http.StatusBadRequest, "Body not allowed", "a "+r.Method+" to the MCP endpoint carries no body")
		}
		if cerr == nil {
			cerr = noRoutingHeaders(r.Header, "a "+r.Method+" of the MCP endpoint carries no message")
		}
		if cerr == nil {
			cerr = c.checkParamHeaders(r.Context(), r.Header, "", nil) // no tools/call: none is allowed
		}
		return cerr
	default:
		a := invalid(http.StatusMethodNotAllowed, "Method not allowed", "the MCP endpoint takes POST, GET and DELETE")
		a.allow = "POST, GET, DELETE"
		return a
	}
	if cerr := checkJSONContentType(r.Header); cerr != nil {
		return cerr
	}
	body, cerr := s.readBody(r, c)
	if cerr != nil {
		return cerr
	}
	c.body = body
	v, err := s.json.Decode(body)
	if err != nil {
		return rpcInvalid(http.StatusBadRequest, rpcParseError, "Bad JSON-RPC message", err.Error())
	}
	switch msg := v.(type) {
	case []any:
		// A batch (2025-03-26) could hide a tools/call among plumbing; it
		// is refused whole rather than split.
		if a := noRoutingHeaders(r.Header, "a batch has no single method or name for them"); a != nil {
			return a
		}
		if a := c.checkParamHeaders(r.Context(), r.Header, "", nil); a != nil {
			return a // a batch holds no tools/call
		}
		if len(msg) > maxBatch {
			return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", "a JSON-RPC batch holds at most "+strconv.Itoa(maxBatch)+" messages")
		}
		for _, m := range msg {
			o, ok := m.(map[string]any)
			if !ok {
				return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", "every member of a JSON-RPC batch must be an object")
			}
			if k := caseVariant(o, "jsonrpc", "id", "method", "params", "result", "error"); k != "" {
				return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", "member "+strconv.Quote(k)+" differs only in case from a JSON-RPC member")
			}
			if k := foreignMember(o); k != "" {
				return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", foreignMemberDetail(k))
			}
			if detail := badEnvelope(o); detail != "" {
				return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", "a member's "+detail)
			}
			method, isString := o["method"].(string)
			if _, has := o["method"]; has && (!isString || method == "") {
				return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", `every member's "method" must be a non-empty string`)
			}
			if id, has := o["id"]; len(method) > maxRPCName || has && len(rpcIDJSON(id)) > maxRPCName {
				return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", `a member's "method" or "id" is longer than `+strconv.Itoa(maxRPCName)+" bytes")
			}
			if !oneKind(o, method) {
				return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", oneKindDetail)
			}
			// Tool calls are decided one per request, a tools/list,
			// resources/list or prompts/list answer is filtered per
			// caller, which a batch's is not,
			// subscriptions/listen is decided on its params, which a
			// batch member's are not, and task methods and answers to
			// toolgate's own requests may be toolgate's to answer, which
			// it does one per request. initialize opens a session, which
			// is counted against its principal's cap before it is sent
			// (session.go), and its answer, like server/discover's, is
			// toolgate's to complete (2025-03-26 forbids it in a batch).
			if policy.IsMCPToolMethod(method) || filteredList(method) || method == "subscriptions/listen" || strings.HasPrefix(method, "tasks/") ||
				method == "initialize" || method == "server/discover" {
				return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", "a JSON-RPC batch that holds "+method+" is refused whole; send it one per request")
			}
			if id, _ := o["id"].(string); method == "" && strings.HasPrefix(id, confirmRPCPrefix) {
				return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", "a JSON-RPC batch that answers toolgate's own request is refused whole; send the answer alone")
			}
			if s.cancellable(r, c, cancelledID(o, method)) {
				return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Batch refused", "a JSON-RPC batch that cancels a request toolgate holds for a decision is refused whole; send the cancel alone")
			}
			if isString && !slices.Contains(c.mcp.batch, method) {
				c.mcp.batch = append(c.mcp.batch, method)
			}
		}
		in.MCP = &policy.MCP{Method: "", ProtocolVersion: r.Header.Get("Mcp-Protocol-Version")}
		return nil
	case map[string]any:
		return s.readRPCObject(r, c, msg)
	}
	return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Bad JSON-RPC message", "a JSON-RPC message is an object (or a batch array)")
}

func (s *Server) readRPCObject(r *http.Request, c *call, msg map[string]any) *answer {
	in := c.input
	if k := caseVariant(msg, "jsonrpc", "id", "method", "params", "result", "error"); k != "" {
		return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Bad JSON-RPC message", "member "+strconv.Quote(k)+" differs only in case from a JSON-RPC member; a Go upstream would read it as that member")
	}
	if k := foreignMember(msg); k != "" {
		return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Bad JSON-RPC message", foreignMemberDetail(k))
	}
	if detail := badEnvelope(msg); detail != "" {
		return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Bad JSON-RPC message", detail)
	}
	if id, ok := msg["id"]; ok {
		c.mcp.id = rpcIDJSON(id)
		if len(c.mcp.id) > maxRPCName {
			c.mcp.id = nil // not echoed: the refusal would be as large
			return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Bad JSON-RPC message", `"id" is longer than `+strconv.Itoa(maxRPCName)+" bytes")
		}
	}
	method, _ := msg["method"].(string)
	if _, has := msg["method"]; has && method == "" {
		return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Bad JSON-RPC message", `"method" must be a non-empty string`)
	}
	if len(method) > maxRPCName {
		return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Bad JSON-RPC message", `"method" is longer than `+strconv.Itoa(maxRPCName)+" bytes")
	}
	c.mcp.method = method
	if id, has := msg["id"]; has && id == nil && method != "" {
		// MCP: a request's id is never null. The SDKs refuse one (the
		// TypeScript SDK's server answers -32700): decided as a call, it
		// would be logged as run, or answered as if it were a request.
		return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Bad JSON-RPC message", `a request's "id" is a string or a number, never null`)
	}
	if !oneKind(msg, method) {
		return rpcInvalid(http.StatusBadRequest, rpcInvalidRequest, "Bad JSON-RPC message", oneKindDetail)
	}
	if id, isString := msg["id"].(string); isString && method == "" && strings.HasPrefix(id, confirmRPCPrefix) {
		c.mcp.ownResponse = true
	}
	params, _ := msg["params"].(map[string]any)
	c.mcp.cancels = cancelledID(msg, method)
	// With the members the policy reads one level down: completion/
	// complete's ref, and the resource subscriptions of subscriptions/listen.
	ref, _ := params["ref"].(map[string]any)
	subs, _ := params["notifications"].(map[string]any)
	if k := cmp.Or(caseVariant(params, "name", "arguments", "_meta", "uri", "task", "taskId", "ref", "notifications"),
		caseVariant(ref, "type", "name", "uri"), caseVariant(subs, "resourceSubscriptions")); k != "" {
		return rpcInvalid(http.StatusBadRequest, rpcInvalidParams, "Bad params", "params member "+strconv.Quote(k)+" differs only in case from an MCP member; a Go upstream would read it as that member")
	}
	for k := range params {
		if len(k) > callinfo.MaxParamName {
			// Approvers are shown such a name cut, and two cut alike
			// would look the same.
			return rpcInvalid(http.StatusBadRequest, rpcInvalidParams, "Bad params", "a params member's name is longer than "+strconv.Itoa(callinfo.MaxParamName)+" bytes")
		}
	}
	if _, has := msg["params"]; has && params == nil && method == "tools/call" {
		return rpcInvalid(http.StatusBadRequest, rpcInvalidParams, "Bad tools/call", `"params" must be an object`)
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	if cerr := c.checkMCPHeaders(r.Context(), r.Header, version, method, params); cerr != nil {
		return cerr
	}
	in.MCP = &policy.MCP{Method: method, ProtocolVersion: version}
	if id, ok := msg["id"]; ok {
		in.MCP.ID = id
	}
	if meta, ok := params["_meta"].(map[string]any); ok {
		tok, has := meta["progressToken"]
		if has && !progressToken(tok) {
			// Approvers are not shown a progress token, nor do grants bind
			// one (shownParams): the plumbing of progress notifications, as
			// long as it is what MCP says it is.
			return rpcInvalid(http.StatusBadRequest, rpcInvalidParams, "Bad progressToken", "_meta.progressToken is a string of at most 256 bytes or an integer")
		}
		c.mcp.progressToken = tok
	}
	switch {
	case version >= statelessEra:
		c.mcp.readClientCaps(params)
	case method == "initialize":
		// The session era declares capabilities once; the session's
		// binding keeps what toolgate needs of them (session.go).
		c.mcp.urlElicit = declaresURLElicitation(params["capabilities"])
	}
	c.mcp.readTaskParams(params)
	_, c.mcp.listCursor = params["cursor"]
	if method != "tools/call" {
		// resources/read and prompts/get are decided as calls of
		// pseudo-tools; every other method on its name alone.
		tool, err := policy.MCPTool(method, params, c.up.fold)
		if err != nil {
			return rpcBadArgument("Bad params", err)
		}
		in.Tool = tool
		switch {
		case tool != nil:
			in.MCP.Params = otherParams(method, params)
		case method == "subscriptions/listen":
			// What the client subscribes to is the policy's to see: a
			// resource subscription is a resources/subscribe by
			// another name (toolgate.mcp_subscribe).
			in.MCP.Params = params
		}
		return nil
	}
	name, _ := params["name"].(string)
	if !toolName.MatchString(name) {
		return rpcInvalid(http.StatusBadRequest, rpcInvalidParams, "Bad tool name", "params.name must be 1 to 128 of A-Z a-z 0-9 _ . : - and start with a letter, digit or _")
	}
	args := map[string]any{}
	if a, has := params["arguments"]; has && a != nil {
		obj, ok := a.(map[string]any)
		if !ok {
			return rpcInvalid(http.StatusBadRequest, rpcInvalidParams, "Bad tools/call", "params.arguments must be an object")
		}
		args = obj
	}
	if a := checkToolQuery(c.up, r.URL.RawQuery, in.HTTP.Query, args); a != nil {
		return a
	}
	if err := policy.CheckArgNames(args); err != nil {
		return rpcBadArgument("Ambiguous argument", err)
	}
	if err := policy.CheckControl(args, c.up.TargetArgs); err != nil {
		return rpcBadArgument("Control character", err)
	}
	if err := policy.CheckTargetSpelling(args, c.up.TargetArgs, c.up.fold); err != nil {
		return rpcBadArgument("Ambiguous target", err)
	}
	if err := policy.CheckTargets(args, c.up.TargetArgs); err != nil {
		return rpcInvalid(http.StatusBadRequest, rpcInvalidParams, "Too many targets", err.Error())
	}
	c.mcp.isToolCall = true
	in.Tool = policy.NewToolWith(name, args, c.up.TargetArgs, c.up.fold)
	in.MCP.Params = otherParams(method, params)
	// The policy sees what the tool's listing told, through whichever
	// replica it went. With the store away, a tool this replica saw no
	// listing of is decided without annotations, as before any replica
	// shared them: allow and deny keep working without Redis, and
	// annotations are the upstream's hints, never a grant (a call with
	// Mcp-Param headers was refused above, its headers uncheckable).
	lt, _, err := c.up.listing(r.Context(), name)
	if err != nil {
		c.up.shared.log.Warn("listing store unavailable; the tool is decided without its annotations", "call_id", c.id, "upstream", c.up.Name, "tool", name, "error", err)
	}
	in.Tool.Annotations = lt.annotations
	return nil
}

// rpcIDJSON is a JSON-RPC id as JSON. A number is the literal strictjson
// checked and kept, as json.Marshal writes a json.Number; other ids (strings
// above all) go through json.Marshal.
func rpcIDJSON(id any) []byte {
	if n, ok := id.(json.Number); ok && n != "" {
		return []byte(n)
	}
	b, _ := json.Marshal(id)
	return b
}

// otherParams are the members of a tool call's params that its tool does
// not hold, and that the upstream receives all the same (policy.MCP.Params):
// every member but name and arguments for tools/call, _meta for
// resources/read and prompts/get (whose other params are their pseudo-tool's
// arguments). nil when there are none. The values are params' own, shared.
func otherParams(method string, params map[string]any) map[string]any {
	var other map[string]any
	for k, v := range params {
		switch {
		case method == "tools/call" && (k == "name" || k == "arguments"):
			continue
		case method != "tools/call" && k != "_meta":
			continue
		}
		if other == nil {
			other = make(map[string]any, len(params))
		}
		other[k] = v
	}
	return other
}

// oneKind reports whether msg, whose method is method, is one kind of
// message (JSON-RPC 2.0 §4, §5): a request or notification, with a method
// and neither result nor error, or a response, without a method, with
// exactly one of result and error and no params. Anything else, a call
// with its method left out, or one that also carries a result, would be
// read by a lenient server as what it is not: an upstream that looks for
// a response first takes {"method":"ping","result":…} for the answer to
// its own request, while the policy decided a ping. A single message and
// every member of a batch are held to it.
func oneKind(msg map[string]any, method string) bool {
	_, isResult := msg["result"]
	_, isError := msg["error"]
	if method != "" {
		return !isResult && !isError
	}
	_, hasParams := msg["params"]
	return isResult != isError && !hasParams
}

// oneKindDetail is the refusal of a message oneKind refuses.
const oneKindDetail = `a message with "method" is a request or a notification, with neither "result" nor "error"; one without is a response: exactly one of "result" and "error", and no "params"`

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// rpcResult reads b as a JSON-RPC response whose result is an object:
// the message and its result as raw members, so that a rewrite keeps what
// it does not touch byte for byte (re-encoding would round large numbers
// and reorder keys). ok is false for anything else.
func rpcResult(b []byte) (msg, result map[string]json.RawMessage, ok bool) {
	if json.Unmarshal(b, &msg) != nil || msg["result"] == nil || msg["method"] != nil {
		return nil, nil, false
	}
	if json.Unmarshal(msg["result"], &result) != nil || result == nil {
		return nil, nil, false
	}
	return msg, result, true
}

// withResult encodes msg with result as its result; orig when that fails.
func withResult(msg, result map[string]json.RawMessage, orig []byte) []byte {
	var err error
	if msg["result"], err = json.Marshal(result); err != nil {
		return orig
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return orig
	}
	return out
}

// rpcID is the id to answer with: the request's, or null.
func (m *mcpMessage) rpcID() json.RawMessage {
	if m == nil || m.id == nil {
		return json.RawMessage("null")
	}
	return m.id
}

// withRPCID returns res with the id of every JSON-RPC response in it (a
// JSON body, or the data lines of an SSE stream) set to id. Requests and
// notifications the upstream sent on the stream keep theirs.
func withRPCID(res pending.Result, id json.RawMessage) pending.Result {
	ct := http.Header(res.Header).Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/json"):
		if b, ok := rewriteResponseID(res.Body, id); ok {
			res.Body = b
		}
	case strings.HasPrefix(ct, "text/event-stream"):
		res.Body = rewriteSSE(res.Body, func(data []byte) []byte {
			if b, ok := rewriteResponseID(data, id); ok {
				return b
			}
			return data
		})
	}
	return res
}

func rewriteResponseID(b []byte, id json.RawMessage) ([]byte, bool) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(b, &msg) != nil {
		return nil, false
	}
	_, isResult := msg["result"]
	_, isError := msg["error"]
	if _, isRequest := msg["method"]; isRequest || !(isResult || isError) {
		return nil, false
	}
	msg["id"] = id
	out, err := json.Marshal(msg)
	return out, err == nil
}

// caseVariant returns a key of m that equals one of the known member names
// under case folding without being spelled the same: parsers that match
// case-insensitively (Go's encoding/json into a struct) would read it as
// that member, case-sensitive ones would not, so it is refused.
// maxRPCName bounds a message's method and id (an id as JSON). The
// protocol's methods are a few dozen bytes and ids are counters or UUIDs;
// both go into the decision log, the refusal, the policy's reasons and
// spans, so an unbounded one would make each of them as large as the body.
const maxRPCName = 256

// foreignMember is a member of JSON-RPC message m that JSON-RPC does not
// define, if m has one. Such a member would be forwarded with the message
// (and parked with it) while neither the policy input nor an approver sees
// it, and an upstream or a gateway beside it may act on it.
func foreignMember(m map[string]any) string {
	for k := range m {
		switch k {
		case "jsonrpc", "id", "method", "params", "result", "error":
		default:
			return k
		}
	}
	return ""
}

// badEnvelope says what is wrong with message m's "jsonrpc" and "id", if
// anything: JSON-RPC 2.0 has "jsonrpc": "2.0" and an id that is a string,
// a number or null. Neither member reaches the policy or an approver, so
// another value (an object id, "jsonrpc": "1.0") would be parked and
// sent unseen, to an upstream that may read it otherwise.
func badEnvelope(m map[string]any) string {
	if v, ok := m["jsonrpc"].(string); !ok || v != "2.0" {
		return `"jsonrpc" must be "2.0"`
	}
	switch m["id"].(type) {
	case nil, string, json.Number:
		return ""
	}
	return `"id" must be a string, a number or null`
}

func foreignMemberDetail(k string) string {
	return "member " + strconv.Quote(logCut(k, 64)) + " is not a JSON-RPC member (jsonrpc, id, method, params, result, error): nothing decides it, so nothing sends it"
}

func caseVariant[V any](m map[string]V, known ...string) string {
	for k := range m {
		// The names known are ASCII: an ASCII key of another length is
		// none of them in any case. A key with other letters may be
		// ("ſ" folds to "s", in two bytes), so EqualFold decides it.
		ascii := !strings.ContainsFunc(k, func(r rune) bool { return r >= utf8.RuneSelf })
		for _, want := range known {
			if (len(k) == len(want) || !ascii) && k != want && strings.EqualFold(k, want) {
				return k
			}
		}
	}
	return ""
}

// progressToken reports whether v is a progress token as MCP defines one
// (a string or an integer), of a size that carries nothing else.
func progressToken(v any) bool {
	switch t := v.(type) {
	case string:
		return len(t) <= 256
	case json.Number:
		_, err := strconv.ParseInt(string(t), 10, 64)
		return err == nil
	}
	return false
}
