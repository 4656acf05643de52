package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// maxListBytes bounds a list answer (tools/list, resources/list,
// prompts/list) toolgate reads to filter it.
const maxListBytes = 8 << 20

// listProxy forwards a tools/list, resources/list or prompts/list request
// and filters the answer per caller, so an agent is not shown what it can
// never use (filterListMessage).
//
// A tool is decided with phase "list" (no arguments, no target) and
// removed when the decision is deny; a tool decided ask is marked in its
// _meta ("toolgate/may_ask": true), so a model can plan for the wait. The
// tools' annotations are remembered for the upstream and offered to later
// decisions as tool.annotations (untrusted hints: the upstream wrote them),
// and so are the Mcp-Param-{Name} headers their inputSchemas declare, which
// later calls' headers are held to (mcpheaders.go).
//
// A resource or a prompt names its target already (its uri, its name), so
// it is decided as the call that would read it: a resources/read of its
// uri, a prompts/get of its name, by this caller. It is removed when that
// call would be denied, and marked when it would be asked about.
func (s *Server) listProxy(r *http.Request, c *call) *httputil.ReverseProxy {
	return wholeAnswers(c, answerProxy(c, func(res *http.Response) error { return s.filterList(r.Context(), res, c) }))
}

// trailerless is a list answer's body, read as it streams, whose trailers
// are forgotten as they come (ownHeaders): the transport sets res.Trailer
// when the body ends, and the reverse proxy sends what it holds then.
type trailerless struct {
	io.ReadCloser
	res *http.Response
}

func (t trailerless) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if err != nil {
		t.res.Trailer = nil
	}
	return n, err
}

// partialHeaders ask an upstream for part of an answer, or for none when
// it has not changed: a list's answer is filtered whole, so they are not
// forwarded with one (a range starting inside a line would hand on a
// fragment no filter reads, and a 304 the unfiltered list's validator).
var partialHeaders = []string{"Range", "If-Range", "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since"}

// wholeAnswers makes rp, c's, forward its requests without
// partialHeaders, and marks c filtered: the upstream's 1xx answers (103
// Early Hints), which the reverse proxy writes before ModifyResponse sees
// anything, are not passed on (answerWriter), as their headers could be
// the unfiltered answer's validators or digests.
func wholeAnswers(c *call, rp *httputil.ReverseProxy) *httputil.ReverseProxy {
	c.filtered = true
	rewrite := rp.Rewrite
	rp.Rewrite = func(pr *httputil.ProxyRequest) {
		rewrite(pr)
		for _, k := range partialHeaders {
			pr.Out.Header.Del(k)
		}
	}
	return rp
}

// streamListProxy forwards a GET of the MCP endpoint (the server's SSE
// stream) and filters, event by event, any list answer on it for the
// caller. A stream resumed with Last-Event-ID replays the answers of
// earlier requests as the upstream first wrote them: a list answer
// toolgate filtered on its way out would otherwise come back whole, all
// the policy hides from this caller in it.
func (s *Server) streamListProxy(r *http.Request, c *call) *httputil.ReverseProxy {
	return wholeAnswers(c, answerProxy(c, func(res *http.Response) error {
		if !success(res) {
			return nil
		}
		mt, err := listMediaType(res)
		if err != nil {
			return err
		}
		if mt == "text/event-stream" {
			ownHeaders(res, mt, -1)
			res.Body = newSSEFilter(trailerless{res.Body, res}, maxListBytes, func(name string, data []byte) []byte {
				// A stream stays open for as long as its session: each
				// event is decided afresh, with a bound of its own (the
				// policy in force then, and no end to the stream's lists).
				c.lists = nil
				out, ok := s.listEvent(r.Context(), name, data, c)
				if !ok {
					return nil // an event whose data is not JSON goes on empty: nobody reads a list from it
				}
				return out
			})
			return nil
		}
		// A stream that came as one JSON message: read whole, as a
		// list's answer to a POST is.
		return s.filterWhole(r.Context(), res, c, mt)
	}))
}

// filteredList reports whether the answer to an MCP request of method is
// filtered per caller (listProxy).
func filteredList(method string) bool {
	return method == "tools/list" || method == "resources/list" || method == "prompts/list"
}

// filterList rewrites the list answer in res.
func (s *Server) filterList(ctx context.Context, res *http.Response, c *call) error {
	if !success(res) {
		return nil // an error of the upstream's: no list in it
	}
	mt, err := listMediaType(res)
	if err != nil {
		return err
	}
	return s.filterWhole(ctx, res, c, mt)
}

// filterWhole reads res, a 2xx answer of media type mt (listMediaType),
// whole and rewrites it filtered.
func (s *Server) filterWhole(ctx context.Context, res *http.Response, c *call, mt string) error {
	body, err := readAnswer(res)
	if err != nil {
		return err
	}
	unread := false
	filter := func(name string, data []byte) []byte {
		out, ok := s.listEvent(ctx, name, data, c)
		unread = unread || !ok
		return out
	}
	if mt == "application/json" {
		body = filter("", body)
	} else {
		body = rewriteSSEEvents(body, filter)
	}
	if unread {
		return errListUnread
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	ownHeaders(res, mt, int64(len(body)))
	return nil
}

// success reports whether res is a 2xx answer, which an MCP client reads
// as the call's (the go-sdk's takes any 2xx).
func success(res *http.Response) bool { return res.StatusCode >= 200 && res.StatusCode <= 299 }

// listMediaType is the media type of res, a 2xx answer toolgate must read
// to filter it: "application/json" or "text/event-stream", read as an MCP
// client reads them (any case, parameters ignored). Any other, or an
// encoded answer, is an error: handing on bytes toolgate did not read
// would hand them on unfiltered.
func listMediaType(res *http.Response) (string, error) {
	if err := readable(res); err != nil {
		return "", err
	}
	cts := res.Header.Values("Content-Type")
	if len(cts) > 1 {
		// One reader takes the first, another joins them with ", " and
		// finds a charset in the second.
		return "", listErr("an MCP answer toolgate must read came with " + strconv.Itoa(len(cts)) + " Content-Type headers")
	}
	ct := res.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && mt != "text/event-stream") {
		return "", listErr("an MCP answer toolgate must read came as " + strconv.Quote(ct) + ", neither JSON nor an event stream")
	}
	// toolgate reads the bytes as UTF-8, as the go-sdk and TypeScript
	// clients do; the Python SDK's client (httpx) decodes an event stream
	// with the charset the type names, and in ISO-8859-1 or UTF-16 the
	// same bytes hold other lines, a list among them.
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return "", listErr("an MCP answer toolgate must read came as " + strconv.Quote(ct) + ", not in UTF-8")
	}
	// The answer goes on with this type alone (ownHeaders): what
	// mime.ParseMediaType let pass unread (a charset*= it cannot decode,
	// which Python's email package reads) names no charset to the client.
	return mt, nil
}

// ownHeaders makes res, a list answer toolgate has read as mt and
// rewritten for one caller, say only that: its media type, no parameters
// (a client decodes UTF-8, as toolgate read it), no encoding, the length
// of the body it now has (length, or -1 for a stream that goes on), no
// validator or digest of the upstream's body, in its headers or trailers
// (a caller could check a guess at what was hidden against it), and not
// to be stored by any cache.
func ownHeaders(res *http.Response, mt string, length int64) {
	h := res.Header
	h["Content-Type"] = []string{mt}
	h["Cache-Control"] = []string{"no-store"}
	for _, k := range []string{"Content-Encoding", "Content-Length", "Content-Range", "Etag", "Last-Modified", "Content-Digest", "Repr-Digest", "Digest", "Content-Md5", "Trailer"} {
		h.Del(k)
	}
	res.Trailer = nil
	res.ContentLength = length
	if length >= 0 {
		h.Set("Content-Length", strconv.FormatInt(length, 10))
	}
}

// readAnswer reads and closes the body of an answer toolgate rewrites, up
// to maxListBytes: a larger one is errListTooLarge, not cut.
func readAnswer(res *http.Response) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(res.Body, maxListBytes+1))
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(body) > maxListBytes {
		return nil, errListTooLarge
	}
	return body, nil
}

// readable refuses an answer toolgate must read that is encoded (a
// compression the transport did not undo): filtering bytes it cannot read
// would hand them on unfiltered.
func readable(res *http.Response) error {
	// Every line: httpx decodes each encoding listed, net/http's
	// transport and Header.Get see the first.
	for _, ce := range res.Header.Values("Content-Encoding") {
		if ce != "" && !strings.EqualFold(strings.TrimSpace(ce), "identity") {
			return listErr("an MCP answer toolgate must read came encoded (" + ce + ")")
		}
	}
	return nil
}

type listErr string

func (e listErr) Error() string { return string(e) }

const (
	errListTooLarge = listErr("list answer larger than 8 MiB")
	errListUnread   = listErr("a list answer holds a message that is not JSON")
)

// listEvent filters the data of one event of a list answer, an event
// named name ("" for a JSON body), for the caller (listMessage). An event
// a client may read as a message must be JSON. Another is one MCP
// clients skip: its data is filtered when it is JSON, for a client that
// reads it anyway, and goes on empty when it is not (a keep-alive's
// "ping" loses nothing), so that no reading of it toolgate did not make
// reaches a client.
func (s *Server) listEvent(ctx context.Context, name string, data []byte, c *call) ([]byte, bool) {
	out, ok := s.listMessage(ctx, data, c)
	if !ok && !readAsMessage(name) {
		return nil, true
	}
	return out, ok
}

// leniently is data as the most lenient MCP client reads it: the go-sdk's
// trims every line of an event's data of Unicode white space (U+00A0
// too) before it joins them. Where data is JSON as it is, it is the same
// JSON; where it is JSON only so read, toolgate filters that reading and
// writes it, rather than hand on bytes it read as no message at all.
func leniently(data []byte) []byte {
	lines := bytes.Split(data, []byte("\n"))
	for i, l := range lines {
		lines[i] = bytes.TrimSpace(l)
	}
	return bytes.TrimSpace(bytes.Join(lines, []byte("\n")))
}

// readAsMessage reports whether a client may read an event named name as
// a message: the go-sdk's client trims the name, the specification's
// readers take "" for "message".
func readAsMessage(name string) bool {
	n := strings.TrimSpace(name)
	return n == "" || n == "message"
}

// listMessage filters one message of a list answer for the caller
// (filterListMessage), a JSON-RPC batch member by member, as the most
// lenient client reads it (leniently), and returns it written again.
// ok is false for data that is not JSON even so: toolgate would hand it
// on unread, and a client that reads it another way (a body typed JSON
// that holds an event stream) could read a list from it.
func (s *Server) listMessage(ctx context.Context, data []byte, c *call) ([]byte, bool) {
	t := leniently(data)
	if !json.Valid(t) {
		return nil, false
	}
	if t[0] != '[' {
		out, ok := s.filterListMessage(ctx, t, c)
		return escapeLineSeparators(out), ok
	}
	var msgs []json.RawMessage
	if json.Unmarshal(t, &msgs) != nil {
		return nil, false
	}
	// Written back as they came but for what was filtered: json.Marshal
	// would compact every member and escape its "<" and "&".
	out := []byte{'['}
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		f, ok := s.filterListMessage(ctx, m, c)
		if !ok {
			return nil, false
		}
		out = append(out, f...)
	}
	return escapeLineSeparators(append(out, ']')), true
}

// filterListMessage filters the tools, resources and prompts of one
// JSON-RPC response for the caller; anything else is returned unchanged.
// Members are matched by shape, not by the request's method: on the
// server's stream (streamListProxy) there is no request to go by.
func (s *Server) filterListMessage(ctx context.Context, b []byte, c *call) ([]byte, bool) {
	if listMemberFolded(b) {
		return nil, false
	}
	msg, result, ok := rpcResult(b)
	if !ok {
		return b, true
	}
	filtered := false
	lb := c.listBudget()
	if result["tools"] != nil {
		if tools, ok := s.filterTools(ctx, result["tools"], c, lb); ok {
			result["tools"], filtered = tools, true
		}
	}
	for _, li := range listedItems {
		if result[li.member] != nil {
			if items, ok := s.filterItems(ctx, result[li.member], c, li, lb); ok {
				result[li.member], filtered = items, true
			}
		}
	}
	if !filtered {
		return b, true
	}
	if lb.left < 0 && !lb.warned {
		lb.warned = true
		s.log.Warn("MCP list answers longer than toolgate decides for one call: the entries past the bound hidden", "call_id", c.id,
			"upstream", c.up.Name, "decided", maxListDecisions)
	}
	// Filtered for this caller: a cache shared between callers must not
	// hand it to another. Written when the upstream left it out too: an
	// absent cacheScope reads as "public" (2026-07-28), and clients of
	// earlier revisions ignore a member they do not know.
	result["cacheScope"] = json.RawMessage(`"private"`)
	return withResult(msg, result, b), true
}

// listMemberFolded reports a message whose members, or whose result's,
// toolgate reads by their exact names while a client that decodes case-
// insensitively (Go's encoding/json, and SDKs built on it) reads another
// member as one of them: "Result" as result, "Tools" as tools. Such a list
// answer is not one toolgate can filter as every client reads it.
func listMemberFolded(b []byte) bool {
	var msg map[string]json.RawMessage
	if json.Unmarshal(b, &msg) != nil {
		return false
	}
	if caseVariant(msg, "jsonrpc", "id", "method", "result", "error") != "" {
		return true
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(msg["result"], &result) != nil {
		return false
	}
	names := []string{"tools", "cacheScope"}
	for _, li := range listedItems {
		names = append(names, li.member)
	}
	return caseVariant(result, names...) != ""
}

// filterTools is raw, a list answer's tools, without those the caller
// may never call; ok is false when raw is not an array.
func (s *Server) filterTools(ctx context.Context, raw json.RawMessage, c *call, lb *listBudget) (json.RawMessage, bool) {
	var tools []json.RawMessage
	if json.Unmarshal(raw, &tools) != nil {
		return nil, false
	}
	// Kept tools go on as the upstream wrote them: re-encoding would round
	// large numbers in their schemas and reorder their keys. A tool that is
	// not an object with a string name is hidden.
	kept := make([]json.RawMessage, 0, len(tools))
	// The entries of the tools kept that the shared listings are to be
	// told of: changed, or not written for pending.ListingRefresh.
	var due map[string][]byte
	if c.up.shared != nil {
		due = map[string][]byte{}
	}
	for _, raw := range tools {
		// Members by their exact names, as an MCP client reads them (a
		// struct would also take "Name" for "name").
		var m map[string]json.RawMessage
		var t struct {
			Name        string
			Annotations map[string]any
		}
		if json.Unmarshal(raw, &m) != nil || caseVariant(m, "name", "annotations") != "" || json.Unmarshal(m["name"], &t.Name) != nil {
			continue
		}
		if a, ok := m["annotations"]; ok && json.Unmarshal(a, &t.Annotations) != nil {
			continue
		}
		if !lb.take() {
			continue
		}
		if toolName.MatchString(t.Name) {
			lt := newListedTool(t.Annotations, paramHeaders(m["inputSchema"]))
			if kept, write := c.up.rememberTool(t.Name, lt); kept && write && due != nil {
				due[t.Name] = lt.enc
			}
		}
		// An ask in the list phase is marked, approvals or not: a tool
		// whose rows allow some targets and ask for others is listed
		// ask, and its allowed calls run without approvals.
		switch s.listDecision(ctx, c, t.Name, t.Annotations) {
		case policy.Allow:
			kept = append(kept, raw)
		case policy.Ask:
			raw = markMayAsk(raw)
			if s.life != nil && c.mcp != nil && taskEra(c.mcp.version) {
				raw = markTaskSupport(raw)
			}
			kept = append(kept, raw)
		}
	}
	if c.up.shared != nil {
		c.up.share(ctx, due)
	}
	out, err := json.Marshal(kept)
	return out, err == nil
}

// listedItem is a list answer's member whose entries each name the target
// of a call: the entries are decided as that call.
type listedItem struct {
	member string // the result's member: the list
	method string // the call an entry is decided as
	key    string // the entry's member that is the call's target
}

// listedItems are the lists filtered beside tools/list's tools. A resource
// template (resources/templates/list) names no one resource, and is not
// filtered: reading what it expands to is decided call by call.
var listedItems = [...]listedItem{
	{member: "resources", method: "resources/read", key: "uri"},
	{member: "prompts", method: "prompts/get", key: "name"},
}

// filterItems is raw, a list answer's li.member, without the entries
// whose call the caller could not make; ok is false when raw is not an
// array. An entry that is not an object with a string li.key is hidden.
// Kept entries go on as the upstream wrote them.
func (s *Server) filterItems(ctx context.Context, raw json.RawMessage, c *call, li listedItem, lb *listBudget) (json.RawMessage, bool) {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, false
	}
	kept := make([]json.RawMessage, 0, len(items))
	for _, item := range items {
		var m map[string]json.RawMessage
		var target string
		if json.Unmarshal(item, &m) != nil || caseVariant(m, li.key) != "" {
			continue
		}
		// A string, not null (which would read as ""): the target as
		// the client reads it.
		if v := bytes.TrimSpace(m[li.key]); len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &target) != nil {
			continue
		}
		// A call's lists that name one target many times cost one
		// decision.
		key := li.method + "\x00" + target
		action, ok := lb.decided[key]
		if !ok {
			if !lb.take() {
				continue
			}
			action = s.askable(s.itemDecision(ctx, c, li, target))
			lb.decided[key] = action
		}
		switch action {
		case policy.Allow:
			kept = append(kept, item)
		case policy.Ask:
			kept = append(kept, markMayAsk(item))
		}
	}
	out, err := json.Marshal(kept)
	return out, err == nil
}

// maxListDecisions bounds the listed entries toolgate decides for one
// call (distinct targets, for resources and prompts), over all its list
// answers (a stream's events, a batch's members): later ones are hidden.
// A caller's one small request must not cost the policy engine what an
// answer of 8 MiB of tiny entries would; a server that lists more pages
// its lists (nextCursor).
const maxListDecisions = 10_000

// listBudget is what one call's list answers may still cost: the
// decisions left of maxListDecisions, and the targets decided already.
type listBudget struct {
	left    int
	decided map[string]policy.Action // by the entry's call method and target
	warned  bool                     // the bound was logged
	// spent is the time its decisions took; past listDecideTime the
	// entries left are hidden undecided. failed counts the decisions the
	// policy failed (the first is logged).
	spent  time.Duration
	failed int
}

// listDecideTime bounds the time the decisions of one call's list answers
// may take in all. A policy that times out on a listed entry would
// otherwise hold the list for its timeout once per entry (5 s each, by
// default): past the bound, the entries left are hidden, as entries whose
// decision failed are. A variable so that tests can shorten it.
var listDecideTime = 10 * time.Second

// take reports whether a decision is left, and counts it.
func (lb *listBudget) take() bool {
	lb.left--
	return lb.left >= 0
}

// listBudget is c's, made on first use. A call's answer is filtered on
// the goroutine that relays it, one at a time.
func (c *call) listBudget() *listBudget {
	if c.lists == nil {
		c.lists = &listBudget{left: maxListDecisions, decided: map[string]policy.Action{}}
	}
	return c.lists
}

// askable is a listed resource's or prompt's action for the action its
// call would get: an ask where no approvals are configured is a deny, as
// the call would be refused (503) whatever an approver might have said.
func (s *Server) askable(a policy.Action) policy.Action {
	if a == policy.Ask && s.life == nil {
		return policy.Deny
	}
	return a
}

// itemDecision decides a listed entry as the call li.method of target
// would be decided for the caller now, in the call phase; any error, a
// target the call would refuse included, is a deny, which hides it. The
// hooks are not asked: like a listed tool's, the decision is the policy's
// alone, and the call itself is decided again in full.
func (s *Server) itemDecision(ctx context.Context, c *call, li listedItem, target string) policy.Action {
	tool, err := policy.MCPTool(li.method, map[string]any{li.key: target}, c.up.fold)
	if err != nil || tool == nil {
		return policy.Deny
	}
	return s.decideListed(ctx, c, policy.PhaseCall, tool, func(m *policy.MCP) { m.Method, m.Params = li.method, nil })
}

// decideListed decides a listed entry for the caller of c, the list's
// call, as tool in phase, under the list's MCP message as mcp makes it;
// any error is a deny, which hides the entry.
func (s *Server) decideListed(ctx context.Context, c *call, phase string, tool *policy.Tool, mcp func(*policy.MCP)) policy.Action {
	lb := c.listBudget()
	if lb.spent >= listDecideTime {
		return policy.Deny
	}
	in := *c.input
	in.Phase, in.Tool = phase, tool
	var m policy.MCP // a GET's stream (streamListProxy) has none of its own
	if in.MCP != nil {
		m = *in.MCP
	}
	mcp(&m)
	in.MCP = &m
	start := time.Now()
	d, err := s.cfg.Decider.Decide(ctx, &in)
	if lb.spent += time.Since(start); lb.spent >= listDecideTime {
		s.log.Error("deciding an MCP list answer's entries took too long: the entries left are hidden", "call_id", c.id,
			"upstream", c.up.Name, "took", lb.spent.Round(time.Millisecond), "bound", listDecideTime)
	}
	if err != nil {
		// Hidden, as the call would be refused; said once a list, so a
		// failing policy does not write a line per listed entry.
		if lb.failed++; lb.failed == 1 {
			s.log.Error("policy error deciding an MCP list answer's entry: it is hidden", "call_id", c.id,
				"upstream", c.up.Name, "tool", tool.Name, "phase", phase, "error", err)
		}
		return policy.Deny
	}
	return d.Action
}

// listDecision decides one listed tool; any error is a deny, which hides
// it.
func (s *Server) listDecision(ctx context.Context, c *call, name string, ann map[string]any) policy.Action {
	if !toolName.MatchString(name) {
		return policy.Deny
	}
	return s.decideListed(ctx, c, policy.PhaseList, &policy.Tool{Name: name, Annotations: ann}, func(m *policy.MCP) { m.Method = "tools/list" })
}

// mayAskKey marks, in a listed tool's _meta, a tool whose calls the policy
// may park for approval.
const mayAskKey = "toolgate/may_ask"

// markMayAsk returns tool, a JSON object, with mayAskKey true in its
// _meta. Only _meta changes: the rest of the tool stays as the upstream
// wrote it, and so do _meta's other members (re-encoded only when _meta
// already had the key). A tool whose _meta is not an object is returned
// unmarked: its _meta is the upstream's to define.
func markMayAsk(tool json.RawMessage) json.RawMessage {
	start, end, ok := metaSpan(tool)
	if !ok {
		return tool
	}
	var out []byte
	if start < 0 {
		// No _meta: add one before the closing brace (a listed entry
		// has a name or a uri, so the object is not empty).
		out = slices.Concat(tool[:end], []byte(`,"_meta":{"`+mayAskKey+`":true}`), tool[end:])
	} else {
		meta, ok := markedMeta(tool[start:end])
		if !ok {
			return tool
		}
		out = slices.Concat(tool[:start], meta, tool[end:])
	}
	if !json.Valid(out) {
		return tool
	}
	return out
}

// metaSpan finds the value of the member "_meta" in tool, a JSON object:
// tool[start:end] is the value of the last such member (the one a JSON
// decoder keeps), or start is -1 and end the offset of the closing brace
// when there is none. ok is false when tool is not an object.
func metaSpan(tool []byte) (start, end int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(tool))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, false
	}
	start = -1
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0, 0, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, 0, false
		}
		if key != "_meta" {
			continue
		}
		// The decoder stops right after a value that ends in } or ].
		e := int(dec.InputOffset())
		if e < len(v) || !bytes.Equal(tool[e-len(v):e], v) {
			return 0, 0, false
		}
		start, end = e-len(v), e
	}
	if start >= 0 {
		return start, end, true
	}
	end = bytes.LastIndexByte(tool, '}')
	return -1, end, end > 0
}

// markedMeta is meta, a tool's _meta, with mayAskKey true, or false when
// meta is not an object.
func markedMeta(meta []byte) ([]byte, bool) {
	var m map[string]json.RawMessage
	if len(meta) == 0 || meta[0] != '{' || json.Unmarshal(meta, &m) != nil {
		return nil, false
	}
	if _, has := m[mayAskKey]; !has && len(m) > 0 {
		// The upstream's members stay as written, after toolgate's.
		return slices.Concat([]byte(`{"`+mayAskKey+`":true,`), meta[1:]), true
	}
	m[mayAskKey] = json.RawMessage("true")
	b, err := json.Marshal(m)
	return b, err == nil
}

// maxListed bounds the tool names an upstream's listings may make toolgate
// remember: an upstream listing ever new names must not grow toolgate's
// memory without end. The shared listings keep as many.
const maxListed = pending.MaxListedTools

// rememberTool keeps what toolgate needs of a listed tool: updated for a
// name already known (a listing that drops a tool's annotations or headers
// is believed too), added while fewer than maxListed names are known. A
// tool with nothing to keep is kept too, so that a listing that took a
// tool's headers away is told to the other replicas. kept: the tool is
// kept; write: the shared listings are to be told of it (what is kept
// differs from what was, or was written pending.ListingRefresh ago or
// never).
func (up *upstream) rememberTool(name string, lt listedTool) (kept, write bool) {
	var now int64
	if up.shared != nil {
		now = up.shared.now().UnixNano()
		lt.at = now
	}
	// due carries over when the unchanged entry was last written.
	due := func(old listedTool) bool {
		if !bytes.Equal(old.enc, lt.enc) {
			return true
		}
		lt.sharedAt = old.sharedAt
		return now-old.sharedAt >= int64(pending.ListingRefresh)
	}
	if old, known := up.listed.Load(name); known {
		write = due(old.(listedTool))
		up.listed.Store(name, lt)
		return true, write
	}
	if up.listedNames.Add(1) > maxListed {
		up.listedNames.Add(-1)
		return false, false
	}
	if old, loaded := up.listed.LoadOrStore(name, lt); loaded {
		up.listedNames.Add(-1)
		write = due(old.(listedTool))
		up.listed.Store(name, lt)
		return true, write
	}
	return true, true
}

// decideBatch folds the decisions of a batch's members into d, the batch's
// own: each distinct member method is decided as the message would be
// alone, and the batch is allowed only when it and every member are. A
// batch is never parked: an ask (its own or a member's) refuses it like a
// deny.
func (s *Server) decideBatch(ctx context.Context, c *call, d policy.Decision) policy.Decision {
	for _, method := range c.mcp.batch {
		if d.Action != policy.Allow {
			break
		}
		in := *c.input
		mcp := *in.MCP
		mcp.Method = method
		in.MCP = &mcp
		md, err := s.cfg.Decider.Decide(ctx, &in)
		if err != nil {
			s.log.Error("policy error", "call_id", c.id, "batch_method", method, "error", err)
			md = policyFailed(c.id)
		}
		if md.Action != policy.Allow {
			d = md
		}
	}
	if d.Action == policy.Ask {
		d.Action = policy.Deny
		d.Reasons = append(d.Reasons, policy.Reason{ID: "toolgate.batch_ask", Message: "a JSON-RPC batch cannot wait for approval; send its messages one per request"})
	}
	return d
}
