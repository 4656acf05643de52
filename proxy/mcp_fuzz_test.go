package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/policy"
)

// fuzzMCPPath is the fuzzed MCP upstream's mcp_path.
const fuzzMCPPath = "/mcp"

// newFuzzMCPProxy is one toolgate in front of one recording MCP upstream
// (docs/http-api.md, MCP upstreams), reused by every fuzz iteration; its decider allows
// everything and remembers what it decided on.
func newFuzzMCPProxy(f *testing.F) *fuzzProxy {
	f.Helper()
	fp := newFuzzRecording(f)
	u, err := url.Parse("http://upstream.test")
	if err != nil {
		f.Fatal(err)
	}
	auth, err := identity.New(identity.Config{Anonymous: true})
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(Config{
		Upstreams: []Upstream{{
			Name: "tools", URL: u, Prefix: "/", Protocol: policy.KindMCP, MCPPath: fuzzMCPPath,
			Transport: fuzzWire{fp.upstream},
		}},
		Decider:      fp.decider,
		Auth:         auth,
		MaxBodyBytes: fuzzMaxBody,
	})
	if err != nil {
		f.Fatal(err)
	}
	fp.handler = s.Handler()
	return fp
}

// fuzzMCPHeader splits a fuzzed header into the values a server would
// deliver: one per line, optional whitespace trimmed as net/textproto does.
// "" is no header at all; " " is one empty value. It reports false when a
// value holds a byte no HTTP server would deliver in a field value.
func fuzzMCPHeader(s string) ([]string, bool) {
	vals, ok := fuzzHeaderValues(s)
	if !ok {
		return nil, false
	}
	for i, v := range vals {
		vals[i] = strings.Trim(v, " \t")
	}
	return vals, true
}

// fuzzStdDecode decodes b as a Go upstream that reads messages into maps
// would: encoding/json with UseNumber.
func fuzzStdDecode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// fuzzRPCStruct is a JSON-RPC request as a Go upstream that decodes into
// structs reads it (mark3labs/mcp-go and hand-written servers do): with
// encoding/json, whose field matching ignores case and Unicode simple case
// folding ("Method", "param\u017f" and "Arguments" fill these fields).
type fuzzRPCStruct struct {
	Method string `json:"method"`
	Params *struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	} `json:"params"`
}

// fuzzStructDecode reads one message into fuzzRPCStruct; ok is false when
// such an upstream would reject it.
func fuzzStructDecode(b []byte) (fuzzRPCStruct, bool) {
	var m fuzzRPCStruct
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return m, dec.Decode(&m) == nil
}

// fuzzHidesToolCall reports whether v, a decoded batch, holds anywhere
// (nested arrays included) an object whose method is "tools/call".
func fuzzHidesToolCall(v []any) bool {
	for _, e := range v {
		switch e := e.(type) {
		case map[string]any:
			if e["method"] == "tools/call" {
				return true
			}
		case []any:
			if fuzzHidesToolCall(e) {
				return true
			}
		}
	}
	return false
}

// fuzzArgs is params.arguments as the upstream reads it: absent and null
// are no arguments, like toolgate's empty map.
func fuzzArgs(v any, has bool) (map[string]any, bool) {
	if !has || v == nil {
		return map[string]any{}, true
	}
	m, ok := v.(map[string]any)
	return m, ok
}

// FuzzMCPMessage POSTs fuzzed JSON-RPC messages, with fuzzed Mcp-Method,
// Mcp-Name and Mcp-Protocol-Version headers (several values: one per line),
// to an MCP upstream's mcp_path, and checks that what reaches the upstream
// is what the policy evaluated (docs/http-api.md, MCP upstreams; SECURITY.md §1 B and E,
// INV-1, INV-2, INV-4).
func FuzzMCPMessage(f *testing.F) {
	const (
		v2025 = "2025-11-25"
		v2026 = "2026-07-28"
	)
	call := func(name, args string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`
	}
	deep := func(n int) string {
		return call("t", `{"a":`+strings.Repeat("[", n)+strings.Repeat("]", n)+`}`)
	}
	toolsCall := call("rm", `{"path":"/"}`)
	seeds := []struct {
		body                   string
		method, name, protocol string
	}{
		// Real messages, both protocol eras.
		{`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"agent","version":"1.0"}}}`, "", "", ""},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", "", v2025},
		{`{"jsonrpc":"2.0","id":"p-1","method":"ping"}`, "", "", v2025},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"abc"}}`, "", "", v2025},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"notes/a.txt","n":1.5e3,"opts":{"deep":[1,null,true,"x"]}},"_meta":{"progressToken":"tok"}}}`, "", "", v2025},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_note"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///notes/a.txt"}}`, "", "", v2025},
		{`{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"summary"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"x"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"}}}`, "tools/call", "read_file", v2026},
		{`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///a"}}`, "resources/read", "file:///a", v2026},
		{`{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"p"}}`, "prompts/get", "p", v2026},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "tools/list", "", v2026},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "notifications/initialized", "", v2026},
		// Batches: a tools/call inside, nested, duplicated, disguised.
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},` + toolsCall + `]`, "", "", "2025-03-26"},
		{`[` + toolsCall + `]`, "", "", ""},
		{`[` + toolsCall + `,` + toolsCall + `]`, "", "", ""},
		{`[[` + toolsCall + `]]`, "", "", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},[{"jsonrpc":"2.0","id":1,"method":"ping"},[` + toolsCall + `]]]`, "", "", ""},
		{`[{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"rm","arguments":{"path":"/"}}}]`, "", "", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"rm"}}]`, "", "", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "", "", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "tools/call", "rm", v2026},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "", "", v2026},
		{`[]`, "", "", ""},
		{`[1,"tools/call",null]`, "", "", ""},
		// Duplicate and case-variant keys.
		{`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping","params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","m\u0065thod":"tools/call","params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"rm","arguments":{"path":"/"}}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file"},"params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file"},"Params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","param\u017f":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","Name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"rm"}}`, "", "", ""},
		{call("w", `{"path":"a","path":"b"}`), "", "", ""},
		{call("w", `{"path":"a","Path":"/etc/passwd"}`), "", "", ""},
		{call("w", `{"k":1,"\u212a":2}`), "", "", ""},
		{call("w", `{"o":{"x":1,"x":2}}`), "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","arguments":{"path":"a"},"arguments":{"path":"b"}}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","arguments":{"path":"a"},"Arguments":{"path":"b"}}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","Arguments":{"path":"/etc/passwd"}}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","argument\u017f":{"path":"/etc/passwd"}}}`, "", "", ""},
		// Names: invalid UTF-8, escapes, slashes and dots, length.
		{call("re\xffad", `{}`), "", "", ""},
		{call("re\xc0\xafad", `{}`), "", "", ""},
		{call(`re\ud800ad`, `{}`), "", "", ""},
		{call(`read\u0000`, `{}`), "", "", ""},
		{call(`r\u0065ad`, `{}`), "", "", ""},
		{call("r\u0435ad", `{}`), "", "", ""},
		{call("../rm", `{}`), "", "", ""},
		{call("a/b", `{}`), "", "", ""},
		{call(`a\/b`, `{}`), "", "", ""},
		{call(".hidden", `{}`), "", "", ""},
		{call("..", `{}`), "", "", ""},
		{call("fs.write", `{}`), "", "", ""},
		{call("mcp:search-v2", `{}`), "", "", ""},
		{call("a b", `{}`), "", "", ""},
		{call("", `{}`), "", "", ""},
		{call(strings.Repeat("a", 128), `{}`), "", "", ""},
		{call(strings.Repeat("a", 129), `{}`), "", "", ""},
		// Mcp-Method / Mcp-Name disagreeing with the body.
		{call("read_file", `{}`), "ping", "read_file", v2026},
		{call("read_file", `{}`), "tools/call", "rm", v2026},
		{call("read_file", `{}`), "tools/call", "rm", v2025},
		{call("read_file", `{}`), "Tools/Call", "read_file", ""},
		{call("read_file", `{}`), "tools/call\ntools/call", "read_file", v2026},
		{call("read_file", `{}`), "tools/call", "read_file\nrm", v2026},
		{call("read_file", `{}`), " ", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "tools/call", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "", "rm", ""},
		{`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"rm"}}`, "tools/call", "rm", v2026},
		{`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"rm"}}`, " ", " ", ""},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, "tools/call", "rm", v2026},
		// A batch: no header can agree with it, and no session opens in it.
		{`[{"jsonrpc":"2.0","method":"notifications/initialized"}]`, "", "rm", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}]`, "", "", ""},
		// Mcp-Name in the Base64 sentinel: decoded before it is compared.
		{call("read_file", `{}`), "tools/call", "=?base64?cmVhZF9maWxl?=", v2026},
		{call("read_file", `{}`), "tools/call", "=?base64?cm0=?=", v2026},
		{call("read_file", `{}`), "tools/call", "=?base64?cmVhZF9maWxl", v2026},
		{call("read_file", `{}`), "tools/call", "=?base64?!!?=", v2026},
		{`{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"résumé"}}`, "prompts/get", "=?base64?csOpc3Vtw6k=?=", v2026},
		// 2026-07-28 without headers; odd versions.
		{call("read_file", `{}`), "", "", v2026},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "", "", v2026},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", "", v2026},
		{`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///a"}}`, "resources/read", "", v2026},
		{call("read_file", `{}`), "", "", "2025-06-18\n" + v2026},
		{call("read_file", `{}`), "", "", "9999"},
		{call("read_file", `{}`), "", "", "2026-7-28"},
		// ids.
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":[1,2],"method":"tools/call","params":{"name":"t"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"name":"t"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":-0.0,"method":"ping"}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"ID":2,"method":"ping"}`, "", "", ""},
		// Methods that are not strings, or nearly tools/call.
		{`{"jsonrpc":"2.0","id":1,"method":1}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":null,"params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":["tools/call"],"params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":{"name":"tools/call"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":true}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":""}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call ","params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"TOOLS/CALL","params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call\u0000","params":{"name":"rm"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[{"name":"rm"}]}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm","arguments":null}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm","arguments":["/"]}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":1}}`, "", "", ""},
		// JSON-RPC responses (no method).
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"result":{},"params":{"name":"rm","arguments":{}}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"result":{},"method":"tools/call","params":{"name":"rm"}}`, "", "", ""},
		// Framing and JSON oddities.
		{``, "", "", ""},
		{`{}`, "", "", ""},
		{`null`, "", "", ""},
		{`"tools/call"`, "", "", ""},
		{"\xef\xbb\xbf" + call("t", `{}`), "", "", ""},
		{call("t", `{}`) + `{}`, "", "", ""},
		{call("t", `{"a":1e400,"b":-0.0e-0,"c":123456789012345678901234567890}`), "", "", ""},
		{call("t", `{"s":"\ud83d\ude00","z":"a\u0000b"}`), "", "", ""},
		{call("t", `{"s":"\udc00"}`), "", "", ""},
		{deep(60), "", "", ""},
		{deep(65), "", "", ""},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.method, s.name, s.protocol)
	}

	fp := newFuzzMCPProxy(f)
	f.Fuzz(func(t *testing.T, body []byte, mcpMethodHeader, mcpNameHeader, protocolVersion string) {
		methods, ok := fuzzMCPHeader(mcpMethodHeader)
		if !ok {
			return
		}
		names, ok := fuzzMCPHeader(mcpNameHeader)
		if !ok {
			return
		}
		versions, ok := fuzzMCPHeader(protocolVersion)
		if !ok {
			return
		}
		req := httptest.NewRequest(http.MethodPost, fuzzMCPPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for _, v := range methods {
			req.Header.Add("Mcp-Method", v)
		}
		for _, v := range names {
			req.Header.Add("Mcp-Name", v)
		}
		for _, v := range versions {
			req.Header.Add("Mcp-Protocol-Version", v)
		}

		in, up, ok := fp.serve(t, req)
		if !ok {
			return
		}
		if up.Method != http.MethodPost || up.Path != fuzzMCPPath {
			t.Fatalf("upstream got %s %q, want POST %s", up.Method, up.Path, fuzzMCPPath)
		}
		// (a) INV-2: the upstream gets the very bytes toolgate evaluated.
		if !bytes.Equal(up.Body, body) {
			t.Fatalf("upstream body %q, want the request body %q", up.Body, body)
		}
		if in.Kind != policy.KindMCP || in.MCP == nil {
			t.Fatalf("a message to mcp_path was decided with kind %q, mcp %+v; want kind mcp", in.Kind, in.MCP)
		}
		msg, err := fuzzStdDecode(body)
		if err != nil {
			t.Fatalf("toolgate forwarded a message encoding/json cannot decode: %v", err)
		}

		switch msg := msg.(type) {
		case []any:
			// (c) A batch holding a tools/call, however deeply, is refused
			// whole.
			if fuzzHidesToolCall(msg) {
				t.Fatalf("a batch holding a tools/call reached the upstream: %s", body)
			}
			// The same for an upstream that reads each message into a
			// struct (case-insensitive field names).
			var raws []json.RawMessage
			if json.Unmarshal(body, &raws) == nil {
				for _, raw := range raws {
					if m, ok := fuzzStructDecode(raw); ok && m.Method == "tools/call" {
						t.Fatalf("a batch holding a message a Go struct reads as tools/call %q reached the upstream: %s", raw, body)
					}
				}
			}
			// (d) A batch has no method or name: an Mcp-Method or
			// Mcp-Name header cannot match it.
			if len(methods) > 0 || len(names) > 0 {
				t.Fatalf("a batch with Mcp-Method %q, Mcp-Name %q reached the upstream: %s", methods, names, body)
			}
			// Nor does it open a session uncounted (initialize).
			for _, m := range msg {
				if o, ok := m.(map[string]any); ok && (o["method"] == "initialize" || o["method"] == "server/discover") {
					t.Fatalf("a batch holding %v reached the upstream: %s", o["method"], body)
				}
			}
			if in.Tool != nil {
				t.Fatalf("a batch was decided as tool call %q", in.Tool.Name)
			}
			// (e) Each distinct member method was decided as it would be
			// alone.
			var members []string // distinct, in order
			for _, m := range msg {
				if method, ok := m.(map[string]any)["method"].(string); ok && !slices.Contains(members, method) {
					members = append(members, method)
				}
			}
			ins := fp.decided()
			if len(ins) != 1+len(members) {
				t.Fatalf("a batch of %d methods was decided %d times: %s", len(members), len(ins), body)
			}
			for i, method := range members {
				if got := ins[1+i]; got.MCP == nil || got.MCP.Method != method || got.Tool != nil {
					t.Fatalf("batch member %d (%s) decided as %+v", i, method, got.MCP)
				}
			}
			return
		case map[string]any:
			// Handled below.
		default:
			t.Fatalf("toolgate forwarded a message that is neither an object nor a batch: %s", body)
		}
		obj := msg.(map[string]any)
		method, isString := obj["method"].(string)
		_, hasMethod := obj["method"]
		if hasMethod && (!isString || method == "") {
			t.Fatalf("a message with method %#v reached the upstream", obj["method"])
		}
		// (d) Mcp-Method agrees with the body, or nothing is forwarded.
		if len(methods) > 0 && (len(methods) != 1 || methods[0] != method) {
			t.Fatalf("Mcp-Method %q reached the upstream with body method %q", methods, method)
		}
		// Mcp-Name agrees with the body's name (tools/call, prompts/get) or
		// uri (resources/read), and other methods carry none.
		if len(names) > 0 {
			params, _ := obj["params"].(map[string]any)
			want, named := "", false
			switch method {
			case "tools/call", "prompts/get":
				want, _ = params["name"].(string)
				named = true
			case "resources/read":
				want, _ = params["uri"].(string)
				named = true
			}
			if !named || len(names) != 1 || unsentinel(names[0]) != want {
				t.Fatalf("Mcp-Name %q reached the upstream with body method %q, name %q", names, method, want)
			}
		}
		// MCP 2026-07-28 requires the headers.
		if len(versions) > 0 && versions[0] == "2026-07-28" && method != "" {
			if len(methods) == 0 {
				t.Fatalf("a 2026-07-28 %s without Mcp-Method reached the upstream", method)
			}
			if (method == "tools/call" || method == "prompts/get" || method == "resources/read") && len(names) == 0 {
				t.Fatalf("a 2026-07-28 %s without Mcp-Name reached the upstream", method)
			}
		}
		if in.MCP.Method != method {
			t.Fatalf("the policy saw mcp.method %q, the body's method is %q", in.MCP.Method, method)
		}

		// The struct reading: a Go upstream decoding into structs must not
		// find a tools/call the policy did not evaluate as this one.
		if m, ok := fuzzStructDecode(body); ok && m.Method == "tools/call" {
			if in.Tool == nil {
				t.Fatalf("a Go struct reads this message as a tools/call, but the policy saw mcp.method %q and no tool: %s", in.MCP.Method, body)
			}
			if m.Params == nil || m.Params.Name != in.Tool.Name {
				t.Fatalf("a Go struct reads a different tools/call than the policy saw (tool %q): %s", in.Tool.Name, body)
			}
			args := m.Params.Arguments
			if args == nil {
				args = map[string]any{}
			}
			if !reflect.DeepEqual(in.Tool.Arguments, args) {
				t.Fatalf("tool %q: arguments the policy saw (-) and a Go struct reads (+) differ:\n%s", in.Tool.Name, cmp.Diff(in.Tool.Arguments, args))
			}
		}

		if method != "tools/call" {
			// resources/read and prompts/get are calls of pseudo-tools;
			// every other method is decided without a tool.
			want := map[string]string{"resources/read": policy.ToolResourcesRead, "prompts/get": policy.ToolPromptsGet}[method]
			if (in.Tool == nil) != (want == "") || (in.Tool != nil && in.Tool.Name != want) {
				t.Fatalf("method %q was decided with tool %+v, want %q", method, in.Tool, want)
			}
			return
		}
		// (b) INV-1, INV-2: a tools/call is decided as the tool and the
		// arguments a Go upstream reads.
		if in.Tool == nil {
			t.Fatalf("a tools/call reached the upstream, but the policy saw no tool: %s", body)
		}
		params, ok := obj["params"].(map[string]any)
		if !ok {
			t.Fatalf("a tools/call with params %#v reached the upstream", obj["params"])
		}
		name, ok := params["name"].(string)
		if !ok || name != in.Tool.Name {
			t.Fatalf("the policy saw tool %q, the upstream reads params.name %#v", in.Tool.Name, params["name"])
		}
		if !fuzzToolName.MatchString(name) {
			t.Fatalf("tool name %q does not match the grammar", name)
		}
		a, has := params["arguments"]
		args, ok := fuzzArgs(a, has)
		if !ok {
			t.Fatalf("a tools/call with arguments %#v reached the upstream", a)
		}
		// reflect.DeepEqual decides: cmp.Diff is exponential in the depth
		// of nested arrays.
		if !reflect.DeepEqual(in.Tool.Arguments, args) {
			t.Fatalf("arguments the policy saw (-) and the upstream decodes (+) differ:\n%s", cmp.Diff(in.Tool.Arguments, args))
		}
	})
}

// unsentinel is a mirrored header's value as MCP 2026-07-28 says to read
// it: a value in the Base64 sentinel =?base64?…?= decoded, anything else as
// it is; for a sentinel that is not Base64, invalid UTF-8, which no body
// toolgate accepts holds.
func unsentinel(v string) string {
	if len(v) < len("=?base64??=") || !strings.HasPrefix(v, "=?base64?") || !strings.HasSuffix(v, "?=") {
		return v
	}
	b, err := base64.StdEncoding.DecodeString(v[len("=?base64?") : len(v)-len("?=")])
	if err != nil {
		return "\xff"
	}
	return string(b)
}
