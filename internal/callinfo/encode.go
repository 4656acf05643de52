package callinfo

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/strictjson"
)

// Encode returns info's JSON form: what MarshalNoEscape(info) writes, byte
// for byte (TestEncodeMatchesMarshal), without its reflection and without
// checking PolicyInput again. PolicyInput must be a compact JSON object,
// as policy.Input.AppendJSON writes it (one that does not start and end
// as one gives nil); the arguments are compacted. Every
// parked call is encoded once, and a policy input is most of an Info. What
// Decode will give for the encoding is kept (memo.go), with the encoding
// itself: it is read only, as a stored call's bytes are (pending.Store).
func (info Info) Encode() []byte {
	var b bytes.Buffer
	b.Grow(info.sizeHint())
	str := func(key, s string) {
		b.WriteString(key)
		b.Write(strictjson.AppendString(b.AvailableBuffer(), s))
	}
	// num writes key and n, unless n is 0 (omitempty).
	num := func(key string, n int) {
		if n != 0 {
			b.WriteString(key)
			b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(n), 10))
		}
	}
	// list writes key and {"list":[…],"omitted":n} (a nil list as null),
	// each entry by item, which reports false on a value it cannot write;
	// list then reports false.
	list := func(key string, isNil bool, n, omitted int, item func(i int) bool) bool {
		b.WriteString(key)
		b.WriteString(`{"list":`)
		if isNil {
			b.WriteString("null")
		} else {
			b.WriteByte('[')
			for i := range n {
				if i > 0 {
					b.WriteByte(',')
				}
				if !item(i) {
					return false
				}
			}
			b.WriteByte(']')
		}
		num(`,"omitted":`, omitted)
		b.WriteByte('}')
		return true
	}
	str(`{"kind":`, info.Kind)
	str(`,"tool":`, info.Tool)
	str(`,"upstream":`, info.Upstream)
	str(`,"subject":`, info.Subject)
	if info.Target != "" {
		str(`,"target":`, info.Target)
	}
	b.WriteString(`,"arguments":`)
	argsAt := b.Len()
	if info.Arguments == nil {
		b.WriteString("null")
	} else if err := json.Compact(&b, info.Arguments); err != nil {
		return nil // as MarshalNoEscape: arguments are JSON the proxy checked
	}
	argsEnd := b.Len()
	strs(&b, `,"reasons":`, info.Reasons, false)
	strs(&b, `,"rule_ids":`, info.RuleIDs, false)
	str(`,"method":`, info.Method)
	str(`,"path":`, info.Path)
	if info.MCPMethod != "" {
		str(`,"mcp_method":`, info.MCPMethod)
	}
	if len(info.Approvers) > 0 {
		b.WriteString(`,"approvers":[`)
		for i, a := range info.Approvers {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('{')
			sep := ""
			if a.Reason != "" {
				str(`"reason":`, a.Reason)
				sep = ","
			}
			if strs(&b, sep+`"groups":`, a.Groups, true) {
				sep = ","
			}
			if strs(&b, sep+`"subjects":`, a.Subjects, true) {
				sep = ","
			}
			b.WriteString(sep + `"min":`)
			b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(a.Min), 10))
			if a.Requester {
				b.WriteString(`,"requester":true`)
			}
			b.WriteByte('}')
		}
		b.WriteByte(']')
	}
	if info.HookAsked {
		b.WriteString(`,"hook_asked":true`)
	}
	if info.MustAsk {
		b.WriteString(`,"must_ask":true`)
	}
	if info.OpenAsk {
		b.WriteString(`,"open_ask":true`)
	}
	if info.TargetsBeyond {
		b.WriteString(`,"targets_beyond":true`)
	}
	if h := info.Headers; h != nil {
		list(`,"headers":`, h.List == nil, len(h.List), h.Omitted, func(i int) bool {
			hd := h.List[i]
			str(`{"name":`, hd.Name)
			if hd.Value != "" {
				str(`,"value":`, hd.Value)
			}
			if hd.Hidden {
				b.WriteString(`,"hidden":true`)
			}
			num(`,"size":`, hd.Size)
			if hd.NotUTF8 {
				b.WriteString(`,"not_utf8":true`)
			}
			b.WriteByte('}')
			return true
		})
	}
	if p := info.OtherParams; p != nil {
		ok := list(`,"other_params":`, p.List == nil, len(p.List), p.Omitted, func(i int) bool {
			m := p.List[i]
			str(`{"name":`, m.Name)
			if len(m.Value) > 0 {
				b.WriteString(`,"value":`)
				if err := json.Compact(&b, m.Value); err != nil {
					return false // as MarshalNoEscape: values are JSON ParamsOf wrote
				}
			}
			num(`,"size":`, m.Size)
			b.WriteByte('}')
			return true
		})
		if !ok {
			return nil
		}
	}
	if info.GrantExtras != "" {
		str(`,"grant_extras":`, info.GrantExtras)
	}
	if info.HeadersDigest != "" {
		str(`,"headers_digest":`, info.HeadersDigest)
	}
	if len(info.PolicyInput) > 0 {
		if p := info.PolicyInput; p[0] != '{' || p[len(p)-1] != '}' {
			return nil // no compact JSON object: not the proxy's
		}
		b.WriteString(`,"policy_input":`)
		b.Write(info.PolicyInput)
	}
	b.WriteByte('}')
	enc := b.Bytes()
	if as, ok := info.asDecoded(enc[argsAt:argsEnd:argsEnd]); ok {
		// The replica that parks a call reads it again at once (its
		// announcement): what Decode would give is known already. The
		// memo keeps enc itself, and reads the arguments and the policy
		// input (written last, before the closing brace) from it.
		as = as.withOwnLists()
		if n := len(as.PolicyInput); n > 0 {
			end := len(enc) - 1
			as.PolicyInput = enc[end-n : end : end]
		}
		decoded.put(decoded.hash(enc), enc, as)
	}
	return enc
}

// sizeHint is about the length of info's encoding, so that Encode grows
// its buffer once: the policy input, the arguments and the headers are most
// of it.
func (info Info) sizeHint() int {
	n := 256 + len(info.Arguments) + len(info.PolicyInput) + len(info.Target)
	if h := info.Headers; h != nil {
		for _, hd := range h.List {
			n += 48 + len(hd.Name) + len(hd.Value)
		}
	}
	if p := info.OtherParams; p != nil {
		for _, m := range p.List {
			n += 32 + len(m.Name) + len(m.Value)
		}
	}
	return n
}

// asDecoded returns what decoding info's encoding gives, args being its
// arguments as encoded, when that is info itself but for the forms JSON
// does not keep: an empty list of approvers, groups or subjects is
// omitted, so it reads back as none, and arguments absent read back as
// null. A string that is not UTF-8, or another parameter's value that is
// not compact JSON, would read back changed: then ok is false. TestEncodeKeepsWhatDecodeGives holds it to encoding/json.
func (info Info) asDecoded(args []byte) (Info, bool) {
	for _, s := range [...]string{info.Kind, info.Tool, info.Upstream, info.Subject, info.Target, info.Method, info.Path, info.MCPMethod, info.GrantExtras, info.HeadersDigest} {
		if !utf8.ValidString(s) {
			return Info{}, false
		}
	}
	if !allUTF8(info.Reasons) || !allUTF8(info.RuleIDs) || !info.Headers.validUTF8() || !info.OtherParams.asDecoded() {
		return Info{}, false
	}
	as := info
	as.Arguments = json.RawMessage(args)
	if len(info.PolicyInput) == 0 {
		as.PolicyInput = nil
	}
	as.Approvers = nil
	for _, a := range info.Approvers {
		if !utf8.ValidString(a.Reason) || !allUTF8(a.Groups) || !allUTF8(a.Subjects) {
			return Info{}, false
		}
		if len(a.Groups) == 0 {
			a.Groups = nil
		}
		if len(a.Subjects) == 0 {
			a.Subjects = nil
		}
		as.Approvers = append(as.Approvers, a)
	}
	return as, true
}

func allUTF8(ss []string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// strs writes key and ss as a JSON array, null when ss is nil, and
// nothing when omitEmpty and ss is empty; it reports whether it wrote.
func strs(b *bytes.Buffer, key string, ss []string, omitEmpty bool) bool {
	if omitEmpty && len(ss) == 0 {
		return false
	}
	b.WriteString(key)
	b.Write(strictjson.AppendStringsOrNull(b.AvailableBuffer(), ss))
	return true
}
