package policy

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/internal/strictjson"
)

// AppendJSON appends the document's JSON: the document MarshalJSON writes,
// in one pass from the struct rather than through its OPA value. With
// redact, tool.arguments, mcp.params and http.query, the free-form part the
// caller chose, are left out: a log that must not carry them. The targets
// are written as in holds them: such a log cuts them first
// (Tool.Redacted), as it lets go of the arguments before it queues.
func (in *Input) AppendJSON(b []byte, redact bool) ([]byte, error) {
	args := !redact
	var err error
	b = append(b, `{"version":`...)
	b = strictjson.AppendString(b, InputVersion)
	b = appendKey(b, "call_id")
	b = strictjson.AppendString(b, in.CallID)
	b = appendKey(b, "kind")
	b = strictjson.AppendString(b, in.Kind)
	b = appendKey(b, "time")
	b = strictjson.AppendString(b, in.Time.UTC().Format(time.RFC3339Nano))
	b = appendKey(b, "mode")
	b = strictjson.AppendString(b, orDefault(in.Mode, ModeDefault))
	b = appendKey(b, "phase")
	b = strictjson.AppendString(b, orDefault(in.Phase, PhaseCall))
	b = append(b, `,"upstream":{"name":`...)
	b = strictjson.AppendString(b, in.Upstream.Name)
	b = appendKey(b, "protocol")
	b = strictjson.AppendString(b, in.Upstream.Protocol)
	b = append(b, `},"subject":{"id":`...)
	b = strictjson.AppendString(b, in.Subject.ID)
	b = append(b, `,"groups":`...)
	b = strictjson.AppendStrings(b, in.Subject.Groups)
	b = append(b, `,"claims":`...)
	if b, err = appendObject(b, in.Subject.Claims); err != nil {
		return nil, err
	}
	b = append(b, `,"authenticated":`...)
	b = strconv.AppendBool(b, in.Subject.Authenticated)
	b = append(b, '}')
	if t := in.Tool; t != nil {
		b = append(b, `,"tool":{"name":`...)
		b = strictjson.AppendString(b, t.Name)
		if args && !in.listing() {
			b = append(b, `,"arguments":`...)
			if b, err = appendObject(b, t.Arguments); err != nil {
				return nil, err
			}
		}
		if t.HasTarget {
			b = appendTarget(b, [3]string{"target", "target_raw", "target_escapes"}, t.Target, t.TargetRaw, t.TargetEscapes)
		}
		if t.hasTargets() {
			b = appendTargets(append(b, `,"targets":`...), t.AllTargets())
		}
		b = append(b, `,"annotations":`...)
		if b, err = appendObject(b, t.Annotations); err != nil {
			return nil, err
		}
		b = append(b, '}')
	}
	if m := in.MCP; m != nil {
		b = append(b, `,"mcp":{"method":`...)
		b = strictjson.AppendString(b, m.Method)
		if m.ID != nil {
			if b, err = appendValue(append(b, `,"id":`...), m.ID); err != nil {
				return nil, err
			}
		}
		if m.ProtocolVersion != "" {
			b = appendKey(b, "protocol_version")
			b = strictjson.AppendString(b, m.ProtocolVersion)
		}
		if args && len(m.Params) > 0 {
			b = append(b, `,"params":`...)
			if b, err = appendObject(b, m.Params); err != nil {
				return nil, err
			}
		}
		b = append(b, '}')
	}
	b = append(b, `,"http":{"method":`...)
	b = strictjson.AppendString(b, in.HTTP.Method)
	b = appendKey(b, "path")
	b = strictjson.AppendString(b, in.HTTP.Path)
	if args {
		b = append(b, `,"query":`...)
		b = appendMulti(b, in.HTTP.Query)
	}
	b = append(b, `,"headers":`...)
	b = appendMulti(b, in.HTTP.Headers)
	return append(b, "}}"...), nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// appendTarget writes a target's three fields under keys, each after a
// comma: tool.target and its siblings, or an entry of tool.targets.
func appendTarget(b []byte, keys [3]string, target, raw string, escapes bool) []byte {
	b = appendKey(b, keys[0])
	b = strictjson.AppendString(b, target)
	b = appendKey(b, keys[1])
	b = strictjson.AppendString(b, raw)
	b = appendKey(b, keys[2])
	return strconv.AppendBool(b, escapes)
}

// appendTargets writes tool.targets as targetsTerm builds it.
func appendTargets(b []byte, all []TargetArg) []byte {
	b = append(b, '[')
	for i, a := range all {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"arg":`...)
		b = strictjson.AppendString(b, a.Arg)
		if a.Opaque {
			b = append(b, `,"opaque":true`...)
			if a.Escapes {
				b = appendKey(b, "raw")
				b = strictjson.AppendString(b, a.Raw)
				b = append(b, `,"escapes":true`...)
			}
			b = append(b, '}')
			continue
		}
		b = appendTarget(b, [3]string{"target", "raw", "escapes"}, a.Target, a.Raw, a.Escapes)
		if a.Relative != "" {
			b = appendKey(b, "relative")
			b = strictjson.AppendString(b, a.Relative)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendKey(b []byte, k string) []byte {
	b = append(b, ',')
	b = strictjson.AppendString(b, k)
	return append(b, ':')
}

// appendObject appends m, or {} when it is empty. Arguments, claims and
// annotations are free-form; encoding/json writes them (without escaping
// <, > and &: the document is shown as it was).
func appendObject(b []byte, m map[string]any) ([]byte, error) {
	if len(m) == 0 {
		return append(b, "{}"...), nil
	}
	return appendValue(b, m)
}

func appendValue(b []byte, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), nil
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
		b = strictjson.AppendString(b, k)
		b = append(b, ':')
		b = strictjson.AppendStrings(b, m[k])
	}
	return append(b, '}')
}
