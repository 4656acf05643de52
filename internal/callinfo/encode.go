package callinfo

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/toolgate/toolgate/internal/strictjson"
)

// Encode returns info's JSON form: what MarshalNoEscape(info) writes, byte
// for byte (TestEncodeMatchesMarshal), without its reflection and without
// checking PolicyInput again. PolicyInput must be compact JSON, as
// policy.Input.AppendJSON writes it; the arguments are compacted. Every
// parked call is encoded once, and a policy input is most of an Info.
func (info Info) Encode() []byte {
	var b bytes.Buffer
	b.Grow(256 + len(info.Arguments) + len(info.PolicyInput))
	str := func(key, s string) {
		b.WriteString(key)
		b.Write(strictjson.AppendString(b.AvailableBuffer(), s))
	}
	str(`{"kind":`, info.Kind)
	str(`,"tool":`, info.Tool)
	str(`,"upstream":`, info.Upstream)
	str(`,"subject":`, info.Subject)
	if info.Target != "" {
		str(`,"target":`, info.Target)
	}
	b.WriteString(`,"arguments":`)
	if info.Arguments == nil {
		b.WriteString("null")
	} else if err := json.Compact(&b, info.Arguments); err != nil {
		return nil // as MarshalNoEscape: arguments are JSON the proxy checked
	}
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
	if len(info.PolicyInput) > 0 {
		b.WriteString(`,"policy_input":`)
		b.Write(info.PolicyInput)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// strs writes key and ss as a JSON array, null when ss is nil, and
// nothing when omitEmpty and ss is empty; it reports whether it wrote.
func strs(b *bytes.Buffer, key string, ss []string, omitEmpty bool) bool {
	if omitEmpty && len(ss) == 0 {
		return false
	}
	b.WriteString(key)
	if ss == nil {
		b.WriteString("null")
		return true
	}
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(strictjson.AppendString(b.AvailableBuffer(), s))
	}
	b.WriteByte(']')
	return true
}
