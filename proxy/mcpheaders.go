package proxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// The request metadata headers of MCP 2026-07-28 (Streamable HTTP, "Request
// Metadata"): Mcp-Method, Mcp-Name and Mcp-Param-{Name} mirror parts of the
// body so that load balancers, gateways and servers can route on them
// without reading it. toolgate decides on the body; a header that says
// something else would let whatever routes on it act on a value no policy
// saw. So every one of them must agree with the body, else 400 with
// JSON-RPC error -32020 (HeaderMismatch), before any decision.

// paramPrefix starts the name of every Mcp-Param-{Name} header, lower-cased.
const paramPrefix = "mcp-param-"

// maxParamDepth bounds how deep in an inputSchema's properties toolgate
// looks for x-mcp-header: tool arguments are shallow, and a listing is an
// upstream's to write. A header mirroring a deeper argument is refused.
const maxParamDepth = 32

// listedTool is what toolgate keeps of a tool an upstream listed.
type listedTool struct {
	// annotations are the tool's annotations, offered to the policy as
	// hints (tool.annotations).
	annotations map[string]any
	// params maps the name of each Mcp-Param-{Name} header the tool's
	// inputSchema declares (x-mcp-header), lower-cased, to the argument
	// it mirrors: its chain of properties keys. nil when it declares none.
	params map[string][]string
	// enc is the tool's entry in the shared listings (listings.go):
	// two listings told the same of the tool when their encs are equal.
	enc []byte
	// at is when this replica last learned the entry, from a listing it
	// relayed or from the shared listings (Unix ns; kept only with them):
	// past freshFor, the shared entry is read again before it is used.
	at int64
	// sharedAt is when this replica last wrote enc to the shared listings
	// (Unix ns), 0 if it never did: a listing writes a tool again once
	// that is pending.ListingRefresh old, so that its entry never lapses.
	sharedAt int64
}

// checkMCPHeaders enforces MCP 2026-07-28: Mcp-Method, Mcp-Name and
// Mcp-Param-{Name}, which intermediaries may route on, must agree with the
// body; from that revision on, Mcp-Method is required, and Mcp-Name where
// the method names something.
func (c *call) checkMCPHeaders(ctx context.Context, h http.Header, version, method string, params map[string]any) *answer {
	hm, hasMethod := h["Mcp-Method"]
	if !hasMethod && version >= "2026-07-28" && method != "" {
		return rpcInvalid(http.StatusBadRequest, rpcHeaderMismatch, "Header mismatch", "MCP 2026-07-28 requests need an Mcp-Method header")
	}
	if hasMethod && (len(hm) != 1 || hm[0] != method) {
		return rpcInvalid(http.StatusBadRequest, rpcHeaderMismatch, "Header mismatch", "the Mcp-Method header does not match the message's method")
	}
	hn, hasName := h["Mcp-Name"]
	want, named := "", false
	switch method {
	case "tools/call", "prompts/get":
		want, named = stringOf(params["name"]), true
	case "resources/read":
		want, named = stringOf(params["uri"]), true
	case "tasks/get", "tasks/update", "tasks/cancel":
		// The Tasks extension routes its methods by task ID.
		want, named = stringOf(params["taskId"]), version >= statelessEra
	}
	if hasName && (len(hn) != 1 || !named || !sameValue(hn[0], want)) {
		return rpcInvalid(http.StatusBadRequest, rpcHeaderMismatch, "Header mismatch", "the Mcp-Name header does not match the message's name")
	}
	if !hasName && named && version >= "2026-07-28" {
		return rpcInvalid(http.StatusBadRequest, rpcHeaderMismatch, "Header mismatch", "MCP 2026-07-28 requests need an Mcp-Name header for "+method)
	}
	return c.checkParamHeaders(ctx, h, method, params)
}

// noRoutingHeaders refuses Mcp-Method and Mcp-Name on a request that holds
// no single message for them to agree with (a GET, a DELETE, a batch):
// an intermediary routing on them would act on a method or a tool no
// policy decided. why says why none can agree.
func noRoutingHeaders(h http.Header, why string) *answer {
	for _, name := range [...]string{"Mcp-Method", "Mcp-Name"} {
		if _, has := h[name]; has {
			return rpcInvalid(http.StatusBadRequest, rpcHeaderMismatch, "Header mismatch", "an "+name+" header is refused here: "+why)
		}
	}
	return nil
}

// checkParamHeaders holds every Mcp-Param-{Name} header to the tools/call
// argument it mirrors. Which argument that is, the tool's inputSchema says
// (x-mcp-header); toolgate knows it from the upstream's tools/list answers
// it or another replica relayed (listings.go). A header toolgate cannot
// tie to an argument is refused like one that disagrees: a conforming
// client sends only the headers the schema declares, so it is a schema
// that changed (the client lists the tools again and retries, as MCP asks
// it to after -32020) or a value meant for an intermediary that no policy
// would see. Before refusing, a replica reads the shared listing again,
// once: another replica may have relayed a newer one. Headers are checked
// on any revision; their absence is the upstream's to judge.
func (c *call) checkParamHeaders(ctx context.Context, h http.Header, method string, params map[string]any) *answer {
	k := firstParamHeader(h)
	if k == "" {
		return nil
	}
	if method != "tools/call" {
		return rpcInvalid(http.StatusBadRequest, rpcHeaderMismatch, "Header mismatch", "an "+k+" header mirrors a tools/call argument; this message is no tools/call")
	}
	name := stringOf(params["name"])
	lt, from, err := c.up.listing(ctx, name)
	if err != nil {
		return c.listingsUnavailable(err)
	}
	a := paramHeadersAgree(h, name, lt, params)
	if a == nil || from != fromMemory {
		return a
	}
	newer, ok, err := c.up.relisting(ctx, name, lt)
	if err != nil {
		return c.listingsUnavailable(err)
	}
	if !ok {
		return a
	}
	return paramHeadersAgree(h, name, newer, params)
}

// firstParamHeader is the name of an Mcp-Param-{Name} header of h, or "".
func firstParamHeader(h http.Header) string {
	for k := range h {
		// Compared without lowering every name first: most calls carry
		// no such header, and ToLower would copy each one.
		if len(k) >= len(paramPrefix) && strings.EqualFold(k[:len(paramPrefix)], paramPrefix) {
			return k
		}
	}
	return ""
}

// paramHeadersAgree checks every Mcp-Param-{Name} header of h against
// the tools/call of the tool name, whose listing is lt. It runs before the
// call is decided, so a header that mirrors no argument toolgate knows of
// and one whose value differs get the same answer: otherwise a caller
// could tell a tool the tools/list filter hides from one that does not
// exist, and learn the names of its mirrored arguments.
func paramHeadersAgree(h http.Header, name string, lt listedTool, params map[string]any) *answer {
	for k, vs := range h {
		if len(k) < len(paramPrefix) || !strings.EqualFold(k[:len(paramPrefix)], paramPrefix) {
			continue
		}
		if len(vs) == 1 && !printableASCII(vs[0]) {
			// The caller's own bytes: the same answer for every tool.
			return rpcInvalid(http.StatusBadRequest, rpcHeaderMismatch, "Header mismatch",
				"the "+k+" header holds bytes outside printable ASCII: send such a value Base64-encoded (=?base64?…?=)")
		}
		path := lt.params[strings.ToLower(k)[len(paramPrefix):]]
		var arg any
		ok := path != nil
		if ok {
			arg, ok = argumentAt(params["arguments"], path)
		}
		if len(vs) != 1 || !ok || !sameValue(vs[0], arg) {
			return rpcInvalid(http.StatusBadRequest, rpcHeaderMismatch, "Header mismatch",
				"the "+k+" header does not match an argument of "+name+" that the tool's listing marks for it: send Mcp-Param headers only for such arguments, each once, with the argument's value (list the tools through toolgate first: tools/list)")
		}
	}
	return nil
}

// listingsUnavailable refuses a call that needs the shared listings when
// the store cannot be read: its headers cannot be checked, nor can it be
// decided as other replicas would.
func (c *call) listingsUnavailable(err error) *answer {
	c.up.shared.log.Error("listing store unavailable; MCP request refused", "call_id", c.id, "upstream", c.up.Name, "error", err)
	a := storeUnavailable("Listing store unavailable", "the store that shares the upstream's tool listings could not be reached; retry later")
	return &a
}

// argumentAt is the value at path in a tool call's arguments.
func argumentAt(args any, path []string) (any, bool) {
	v := args
	for _, key := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// sentinelOpen starts MCP's Base64 form of a header value.
const sentinelOpen = "=?base64?"

// sameValue reports whether a mirrored header's value h stands for v, the
// body's value, as MCP 2026-07-28 encodes it: a string as is, a boolean as
// true or false, an integer in decimal; any value in the Base64 sentinel
// =?base64?…?= (the form for what is not plain ASCII), decoded first.
// Nothing else stands for anything: null, an object, an array, a fraction.
//
// A value that starts like the sentinel in any case (=?BASE64?…, or with
// no closing ?=) stands for nothing: a router that reads encoded words
// as RFC 2047 does, without regard to case, or leniently, would decode
// it where toolgate compared it as text. So does a value with a byte
// outside printable ASCII (0x20 to 0x7E): MCP sends such values in the
// sentinel, and a router would read raw bytes past ASCII in a charset of
// its own (ISO-8859-1 by HTTP's history), not as the body's UTF-8.
func sameValue(h string, v any) bool {
	if !printableASCII(h) {
		return false
	}
	if len(h) >= len(sentinelOpen) && strings.EqualFold(h[:len(sentinelOpen)], sentinelOpen) {
		inner, ok := strings.CutPrefix(h, sentinelOpen)
		if ok {
			inner, ok = strings.CutSuffix(inner, "?=")
		}
		if !ok {
			return false
		}
		b, err := base64.StdEncoding.Strict().DecodeString(inner)
		if err != nil {
			return false
		}
		h = string(b)
	}
	switch v := v.(type) {
	case string:
		return h == v
	case bool:
		return h == strconv.FormatBool(v)
	case json.Number:
		// An integer's decimal form, as clients write it (the body may
		// write 3 as 3.0): a router reading "+3" or "03" as text would
		// not see what the body says. Beyond 2^53 float64 readers
		// confuse integers, and MCP allows none there.
		f, err := v.Float64()
		const maxSafe = 1<<53 - 1
		return err == nil && f == math.Trunc(f) && math.Abs(f) <= maxSafe && h == strconv.FormatInt(int64(f), 10)
	}
	return false
}

// paramHeaders reads the x-mcp-header declarations of a tool's inputSchema:
// header name (lower-cased) -> the argument it mirrors. Only properties
// reachable from the root through "properties" alone count, as MCP allows.
// Two names that differ only in case make MCP clients drop the tool, and
// toolgate honour none of its headers (an empty map). nil: none declared.
func paramHeaders(schema json.RawMessage) map[string][]string {
	var root any
	if len(schema) == 0 || json.Unmarshal(schema, &root) != nil {
		return nil
	}
	out := map[string][]string{}
	if !collectParamHeaders(root, nil, out) {
		return map[string][]string{}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// collectParamHeaders adds the declarations under schema, at path, to out;
// false on a duplicate name.
func collectParamHeaders(schema any, path []string, out map[string][]string) bool {
	node, _ := schema.(map[string]any)
	props, _ := node["properties"].(map[string]any)
	if len(path) >= maxParamDepth {
		return true
	}
	for key, sub := range props {
		p := append(path[:len(path):len(path)], key)
		prop, _ := sub.(map[string]any)
		if name, _ := prop["x-mcp-header"].(string); name != "" {
			lname := strings.ToLower(name)
			if _, dup := out[lname]; dup {
				return false
			}
			out[lname] = p
		}
		if !collectParamHeaders(prop, p, out) {
			return false
		}
	}
	return true
}

// printableASCII reports whether every byte of s is printable ASCII, 0x20
// to 0x7E: what MCP 2026-07-28 sends in a header as it is.
func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7E {
			return false
		}
	}
	return true
}
