package decisionlog

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/policy"
)

// A decision event's input and result, written straight from toolgate's
// types as JSON for the direct console path. Going through the input's OPA
// value, a JSON tree of maps and slog's reflection cost most of an event;
// this writes the same documents in one pass. TestDirectMatchesPlugin holds
// them to what the plugin writes from the OPA value.

// appendInput appends the JSON of in as policies see it (policy.Input's
// Value), without tool.arguments and http.query unless args.
func appendInput(b []byte, in *policy.Input, args bool) ([]byte, error) {
	var err error
	b = append(b, `{"version":`...)
	b = appendString(b, policy.InputVersion)
	b = appendKey(b, "call_id")
	b = appendString(b, in.CallID)
	b = appendKey(b, "kind")
	b = appendString(b, in.Kind)
	b = appendKey(b, "time")
	b = appendString(b, in.Time.UTC().Format(time.RFC3339Nano))
	b = appendKey(b, "mode")
	b = appendString(b, orDefault(in.Mode, policy.ModeDefault))
	b = appendKey(b, "phase")
	b = appendString(b, orDefault(in.Phase, policy.PhaseCall))
	b = append(b, `,"upstream":{"name":`...)
	b = appendString(b, in.Upstream.Name)
	b = appendKey(b, "protocol")
	b = appendString(b, in.Upstream.Protocol)
	b = append(b, `},"subject":{"id":`...)
	b = appendString(b, in.Subject.ID)
	b = append(b, `,"groups":[`...)
	for i, g := range in.Subject.Groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, g)
	}
	b = append(b, `],"claims":`...)
	if b, err = appendObject(b, in.Subject.Claims); err != nil {
		return nil, err
	}
	b = append(b, `,"authenticated":`...)
	b = strconv.AppendBool(b, in.Subject.Authenticated)
	b = append(b, '}')
	if t := in.Tool; t != nil {
		b = append(b, `,"tool":{"name":`...)
		b = appendString(b, t.Name)
		if args {
			b = append(b, `,"arguments":`...)
			if b, err = appendObject(b, t.Arguments); err != nil {
				return nil, err
			}
		}
		if t.HasTarget {
			b = appendKey(b, "target")
			b = appendString(b, t.Target)
			b = appendKey(b, "target_raw")
			b = appendString(b, t.TargetRaw)
			b = append(b, `,"target_escapes":`...)
			b = strconv.AppendBool(b, t.TargetEscapes)
		}
		b = append(b, `,"annotations":`...)
		if b, err = appendObject(b, t.Annotations); err != nil {
			return nil, err
		}
		b = append(b, '}')
	}
	if m := in.MCP; m != nil {
		b = append(b, `,"mcp":{"method":`...)
		b = appendString(b, m.Method)
		if m.ID != nil {
			id, err := json.Marshal(m.ID)
			if err != nil {
				return nil, err
			}
			b = append(append(b, `,"id":`...), id...)
		}
		if m.ProtocolVersion != "" {
			b = appendKey(b, "protocol_version")
			b = appendString(b, m.ProtocolVersion)
		}
		b = append(b, '}')
	}
	b = append(b, `,"http":{"method":`...)
	b = appendString(b, in.HTTP.Method)
	b = appendKey(b, "path")
	b = appendString(b, in.HTTP.Path)
	if args {
		b = append(b, `,"query":`...)
		b = appendMulti(b, in.HTTP.Query)
	}
	b = append(b, `,"headers":`...)
	b = appendMulti(b, in.HTTP.Headers)
	return append(b, "}}"...), nil
}

// appendResult appends the event's result: the decision, and the policy
// error if there was one.
func appendResult(b []byte, d policy.Decision, evalErr error) []byte {
	b = append(b, `{"action":`...)
	b = appendString(b, d.Action.String())
	b = append(b, `,"reasons":[`...)
	for i, r := range d.Reasons {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, r.Message)
	}
	b = append(b, `],"rule_ids":[`...)
	for i, id := range d.RuleIDs() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, id)
	}
	b = append(b, ']')
	if d.ReadOnly {
		b = append(b, `,"read_only":true`...)
	}
	if evalErr != nil {
		b = appendKey(b, "error")
		b = appendString(b, evalErr.Error())
	}
	return append(b, '}')
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func appendKey(b []byte, k string) []byte {
	b = append(b, ',')
	b = appendString(b, k)
	return append(b, ':')
}

// appendObject appends m, or {} when it is empty. Arguments, claims and
// annotations are free-form; encoding/json writes them.
func appendObject(b []byte, m map[string]any) ([]byte, error) {
	if len(m) == 0 {
		return append(b, "{}"...), nil
	}
	j, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// appendMulti appends a header or query map with its keys in order.
func appendMulti[M ~map[string][]string](b []byte, m M) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ":["...)
		for j, v := range m[k] {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string, as encoding/json writes it
// without HTML escaping: invalid UTF-8 becomes U+FFFD, control characters
// and U+2028/U+2029 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
