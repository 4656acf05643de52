package policy_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/toolgate/toolgate/policy"
)

// inputs are documents of every kind, with the optional parts filled in.
func inputs() map[string]*policy.Input {
	rest := call("read_file", "docs/../README.md")
	rest.Time = time.Date(2026, 11, 30, 1, 2, 3, 4, time.UTC)
	rest.Subject.Groups = []string{"agents", "ops"}
	rest.Subject.Claims = map[string]any{"iss": "https://id.example", "n": json.Number("7")}
	rest.Tool.Arguments["content"] = map[string]any{"nested": []any{"a", true, nil}}
	rest.HTTP.Headers = map[string][]string{"content-type": {"application/json"}, "x-custom": {"1", "2"}}
	rest.HTTP.Query = map[string][]string{"q": {"x"}}
	mcp := &policy.Input{
		CallID: "m1", Kind: policy.KindMCP, Mode: policy.ModePlan, Phase: policy.PhaseList,
		Upstream: policy.Upstream{Name: "notes-mcp", Protocol: "mcp"},
		Tool:     &policy.Tool{Name: "write_note", Annotations: map[string]any{"readOnlyHint": false}},
		MCP: &policy.MCP{
			Method: "tools/call", ID: json.Number("9"), ProtocolVersion: "2025-06-18",
			Params: map[string]any{"_meta": map[string]any{"progressToken": "p1", "acme/path": "/etc"}, "requestState": "s", "n": json.Number("1.50")},
		},
		HTTP: policy.HTTP{Method: "POST", Path: "/mcp", Headers: map[string][]string{"mcp-session-id": {"s"}}},
	}
	plain := &policy.Input{CallID: "h1", Kind: policy.KindHTTP, HTTP: policy.HTTP{Method: "GET", Path: "/health"}}
	return map[string]*policy.Input{"rest": rest, "mcp": mcp, "http": plain}
}

// wantInputs are the documents of inputs(), written out by hand.
var wantInputs = map[string]string{
	"rest": `{"version": "toolgate/v1", "call_id": "test", "kind": "rest", "time": "2026-11-30T01:02:03.000000004Z",
		"mode": "default", "phase": "call", "upstream": {"name": "files", "protocol": "rest"},
		"subject": {"id": "agent-42", "groups": ["agents", "ops"], "claims": {"iss": "https://id.example", "n": 7}, "authenticated": true},
		"tool": {"name": "read_file", "arguments": {"path": "docs/../README.md", "content": {"nested": ["a", true, null]}},
			"target": "README.md", "target_raw": "docs/../README.md", "target_escapes": false,
			"targets": [{"arg": "path", "target": "README.md", "raw": "docs/../README.md", "escapes": false}],
			"annotations": {}},
		"http": {"method": "POST", "path": "/tools/read_file", "query": {"q": ["x"]},
			"headers": {"content-type": ["application/json"], "x-custom": ["1", "2"]}}}`,
	"mcp": `{"version": "toolgate/v1", "call_id": "m1", "kind": "mcp", "time": "0001-01-01T00:00:00Z",
		"mode": "plan", "phase": "list", "upstream": {"name": "notes-mcp", "protocol": "mcp"},
		"subject": {"id": "", "groups": [], "claims": {}, "authenticated": false},
		"tool": {"name": "write_note", "annotations": {"readOnlyHint": false}},
		"mcp": {"method": "tools/call", "id": 9, "protocol_version": "2025-06-18",
			"params": {"_meta": {"progressToken": "p1", "acme/path": "/etc"}, "requestState": "s", "n": 1.50}},
		"http": {"method": "POST", "path": "/mcp", "query": {}, "headers": {"mcp-session-id": ["s"]}}}`,
	"http": `{"version": "toolgate/v1", "call_id": "h1", "kind": "http", "time": "0001-01-01T00:00:00Z",
		"mode": "default", "phase": "call", "upstream": {"name": "", "protocol": ""},
		"subject": {"id": "", "groups": [], "claims": {}, "authenticated": false},
		"http": {"method": "GET", "path": "/health", "query": {}, "headers": {}}}`,
}

// TestInputValue: the OPA value toolgate builds directly (with shared
// terms) is the documented document; its JSON form is the same document,
// and reading that JSON back (as a parked call's re-check does) gives it
// again.
func TestInputValue(t *testing.T) {
	for name, in := range inputs() {
		t.Run(name, func(t *testing.T) {
			want, err := ast.ValueFromReader(strings.NewReader(wantInputs[name]))
			if err != nil {
				t.Fatal(err)
			}
			got, err := in.Value()
			if err != nil {
				t.Fatal(err)
			}
			if got.Compare(want) != 0 {
				t.Errorf("Value() =\n%v\nwant\n%v", got, want)
			}
			doc, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			// A parked call stores AppendJSON's form as it is: it must be
			// compact, as encoding/json would write it.
			var compact bytes.Buffer
			if raw, err := in.AppendJSON(nil, false); err != nil || json.Compact(&compact, raw) != nil || !bytes.Equal(compact.Bytes(), raw) {
				t.Errorf("AppendJSON = %s (%v): want compact JSON", raw, err)
			}
			if fromJSON, err := ast.ValueFromReader(bytes.NewReader(doc)); err != nil || fromJSON.Compare(want) != 0 {
				t.Errorf("JSON form =\n%s (%v)\nwant\n%v", doc, err, want)
			}
			dec := json.NewDecoder(bytes.NewReader(doc))
			dec.UseNumber()
			var back policy.Input
			if err := dec.Decode(&back); err != nil {
				t.Fatal(err)
			}
			if in.Tool != nil {
				back.Tool = policy.NewTool(back.Tool.Name, back.Tool.Arguments, policy.DefaultTargetArgs)
				back.Tool.Annotations = in.Tool.Annotations
			}
			if again, err := back.Value(); err != nil || again.Compare(want) != 0 {
				t.Errorf("read back from JSON =\n%v (%v)\nwant\n%v", again, err, want)
			}
		})
	}
}

func BenchmarkInputValue(b *testing.B) {
	in := inputs()["rest"]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := in.Value(); err != nil {
			b.Fatal(err)
		}
	}
}
