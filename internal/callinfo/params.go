package callinfo

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Bounds of the other parameters a parked MCP call lists: what its
// approvers are shown, whatever the agent sent.
const (
	// MaxParams is how many members are listed; the rest are counted.
	MaxParams = 32
	// MaxParamsBytes bounds the names and values listed. A member whose
	// value does not fit is listed by name and size, its value not shown.
	MaxParamsBytes = 16 << 10
	// MaxParamName is the longest name listed; a longer one is cut and
	// ends with "…".
	MaxParamName = 256
)

// Params are the members of an MCP request's params, other than those
// the tool call is shown by (a tools/call's name and arguments), that an
// approved call sends its upstream all the same: _meta, inputResponses,
// requestState, task, and whatever else the agent put there. Approving
// sends them: approvers are shown them (ParamsOf).
type Params struct {
	List []Param `json:"list"`
	// Omitted counts the members sent past MaxParams.
	Omitted int `json:"omitted,omitempty"`
}

// Param is one member of params.
type Param struct {
	Name string `json:"name"`
	// Value is the member's value as canonical compact JSON (keys sorted,
	// numbers as written, <, > and & unescaped); absent when it did not
	// fit in MaxParamsBytes, and then Size is its length.
	Value json.RawMessage `json:"value,omitempty"`
	Size  int             `json:"size,omitempty"`
}

// ParamsOf lists the members of m by name, each value as canonical
// compact JSON, within the bounds above. m holds JSON values as a decoder
// gives them (maps, slices, strings, json.Number, float64, bool, nil). It
// never returns nil: a call with no other parameters lists none.
func ParamsOf(m map[string]any) *Params {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := &Params{List: []Param{}}
	size := 0
	for _, k := range names {
		if len(out.List) >= MaxParams {
			out.Omitted++
			continue
		}
		p := Param{Name: CutTo(strings.ToValidUTF8(k, "\uFFFD"), MaxParamName)}
		v := MarshalNoEscape(m[k])
		if len(v) == 0 {
			v = []byte("null") // not a JSON value: never from a decoder
		}
		if size+len(p.Name)+len(v) > MaxParamsBytes {
			p.Size = len(v)
		} else {
			p.Value = v
		}
		size += len(p.Name) + len(p.Value)
		out.List = append(out.List, p)
	}
	return out
}

// Count is how many members are sent: those listed and those not.
func (p *Params) Count() int {
	if p == nil {
		return 0
	}
	return len(p.List) + p.Omitted
}

// clone returns a deep copy of p.
func (p *Params) clone() *Params {
	if p == nil {
		return nil
	}
	c := *p
	if p.List != nil {
		c.List = make([]Param, len(p.List))
		for i, m := range p.List {
			m.Value = bytes.Clone(m.Value)
			c.List[i] = m
		}
	}
	return &c
}

// asDecoded reports whether p reads back from its encoding as it is:
// every name is UTF-8 (encoding/json would read any other back changed)
// and every value compact JSON (Encode compacts it; encoding/json reads a
// RawMessage back as written).
func (p *Params) asDecoded() bool {
	if p == nil {
		return true
	}
	var b bytes.Buffer
	return !slices.ContainsFunc(p.List, func(m Param) bool {
		if !utf8.ValidString(m.Name) {
			return true
		}
		if len(m.Value) == 0 {
			return false
		}
		b.Reset()
		return json.Compact(&b, m.Value) != nil || !bytes.Equal(b.Bytes(), m.Value)
	})
}
