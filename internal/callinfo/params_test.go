package callinfo

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParamsOf(t *testing.T) {
	m := map[string]any{
		"_meta":          map[string]any{"acme/overwrite_path": "/etc/passwd", "a": json.Number("1.50")},
		"inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}},
		"requestState":   "<opaque & state>",
		"bad\xffname":    nil,
	}
	got := ParamsOf(m)
	want := &Params{List: []Param{
		{Name: "_meta", Value: json.RawMessage(`{"a":1.50,"acme/overwrite_path":"/etc/passwd"}`)},
		{Name: "bad\uFFFDname", Value: json.RawMessage(`null`)},
		{Name: "inputResponses", Value: json.RawMessage(`{"confirm":{"action":"accept","content":{"ok":true}}}`)},
		{Name: "requestState", Value: json.RawMessage(`"<opaque & state>"`)},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParamsOf (-want +got):\n%s", diff)
	}
	if got.Count() != 4 {
		t.Errorf("Count %d, want 4", got.Count())
	}
	// And the Info that lists them reads back as it was, and is kept so.
	info := Info{Kind: "mcp", OtherParams: got}
	enc := info.Encode()
	var back Info
	if err := json.Unmarshal(enc, &back); err != nil || !cmp.Equal(info.OtherParams, back.OtherParams) {
		t.Errorf("%s read back %v (%v)", enc, back.OtherParams, err)
	}
	if !strings.Contains(string(enc), `"other_params":{"list":[{"name":"_meta","value":{"a":1.50,"acme/overwrite_path":"/etc/passwd"}}`) {
		t.Errorf("encoded as %s", enc)
	}
	if kept := Decode(enc); !cmp.Equal(kept.OtherParams, got) {
		t.Errorf("Decode gives %v", kept.OtherParams)
	}

	// None: an empty list, never nil (nil is a call parked before other
	// parameters were listed, or not an MCP tool call).
	if got := ParamsOf(nil); got == nil || got.List == nil || got.Count() != 0 {
		t.Errorf("ParamsOf(nil) = %#v, want an empty list", got)
	}
	if enc := (Info{OtherParams: ParamsOf(nil)}).Encode(); !strings.Contains(string(enc), `"other_params":{"list":[]}`) {
		t.Errorf("no other parameters encode as %s", enc)
	}
	if enc := (Info{}).Encode(); strings.Contains(string(enc), "other_params") {
		t.Errorf("an Info without other parameters encodes as %s", enc)
	}
}

func TestParamsOfBounds(t *testing.T) {
	// A value past MaxParamsBytes is listed by name and size; later ones
	// that fit are shown.
	big := strings.Repeat("x", MaxParamsBytes)
	got := ParamsOf(map[string]any{"a": "small", "b": big, "c": 1.5, strings.Repeat("N", 2*MaxParamName): true})
	if len(got.List) != 4 {
		t.Fatalf("listed %d members, want 4", len(got.List))
	}
	if long := got.List[0]; len(long.Name) > MaxParamName || !strings.HasSuffix(long.Name, "…") || string(long.Value) != "true" {
		t.Errorf("long name listed as %q = %s", long.Name, long.Value)
	}
	if b := got.List[2]; b.Name != "b" || b.Value != nil || b.Size != len(big)+2 {
		t.Errorf("b listed as %q %q size %d, want no value and size %d", b.Name, b.Value, b.Size, len(big)+2)
	}
	if c := got.List[3]; string(c.Value) != "1.5" {
		t.Errorf("c listed as %s", c.Value)
	}

	// Past MaxParams: the first by name are listed, the rest counted.
	many := map[string]any{}
	for i := range MaxParams + 5 {
		many[fmt.Sprintf("p%03d", i)] = i
	}
	got = ParamsOf(many)
	if len(got.List) != MaxParams || got.Omitted != 5 || got.Count() != MaxParams+5 || got.List[MaxParams-1].Name != fmt.Sprintf("p%03d", MaxParams-1) {
		t.Errorf("%d listed, %d omitted; want %d, 5, the first by name", len(got.List), got.Omitted, MaxParams)
	}
	size := 0
	for _, p := range ParamsOf(map[string]any{"a": big[:MaxParamsBytes/2], "b": big[:MaxParamsBytes/2], "c": "x"}).List {
		size += len(p.Name) + len(p.Value)
	}
	if size > MaxParamsBytes {
		t.Errorf("%d bytes listed, want at most %d", size, MaxParamsBytes)
	}
}
