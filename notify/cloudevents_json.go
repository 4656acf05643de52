package notify

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/toolgate/toolgate/internal/strictjson"
)

// appendJSON appends the event as encodeJSON writes it (encoding/json
// without HTML escaping, no trailing newline), field by field: a
// CloudEvents target renders two events for every ask, and encoding/json
// spent most of a render finding its way through the structs by
// reflection. TestCloudEventEncodesAsJSON holds both to the same bytes.
func (e *ceEvent) appendJSON(b []byte) ([]byte, error) {
	b = appendFields(b, []stringField{
		{`{"specversion":`, e.SpecVersion},
		{`,"type":`, e.Type},
		{`,"source":`, e.Source},
		{`,"id":`, e.ID},
		{`,"time":`, e.Time},
		{`,"datacontenttype":`, e.DataContentType},
		{`,"subject":`, e.Subject},
	})
	b = append(b, `,"data":`...)
	b, err := e.Data.appendJSON(b)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// stringField is a key, with what comes before it, and a string value.
type stringField struct{ key, v string }

func appendFields(b []byte, fs []stringField) []byte {
	for _, f := range fs {
		b = append(b, f.key...)
		b = strictjson.AppendString(b, f.v)
	}
	return b
}

// appendJSON appends d as encoding/json would, omitempty included, once
// cloudEvent has checked the arguments.
func (d *ceData) appendJSON(b []byte) ([]byte, error) {
	b = appendFields(b, []stringField{{`{"call_id":`, d.CallID}, {`,"tool":`, d.Tool}, {`,"upstream":`, d.Upstream}, {`,"subject":`, d.Subject}, {`,"method":`, d.Method}, {`,"path":`, d.Path}})
	if d.MCPMethod != "" {
		b = append(b, `,"mcp_method":`...)
		b = strictjson.AppendString(b, d.MCPMethod)
	}
	if d.Target != "" {
		b = append(b, `,"target":`...)
		b = strictjson.AppendString(b, d.Target)
	}
	if d.TargetsBeyond {
		b = append(b, `,"targets_beyond":true`...)
	}
	b = append(b, `,"arguments":`...)
	if d.Arguments == nil {
		b = append(b, "null"...)
	} else {
		// What encoding/json does with a RawMessage: compacted, not
		// escaped. Compact checks them too, so arguments that are not
		// JSON (which cloudEvent alone would have made a string) are
		// written as cloudEvent writes them.
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, d.Arguments); err != nil {
			buf.Write(argumentsString(d.Arguments))
		}
		b = buf.Bytes()
	}
	b = append(b, `,"reasons":`...)
	b = strictjson.AppendStringsOrNull(b, d.Reasons)
	b = append(b, `,"rule_ids":`...)
	b = strictjson.AppendStringsOrNull(b, d.RuleIDs)
	if len(d.HeaderNames) > 0 {
		b = append(b, `,"header_names":`...)
		b = strictjson.AppendStringsOrNull(b, d.HeaderNames)
	}
	if len(d.ParamNames) > 0 {
		b = append(b, `,"param_names":`...)
		b = strictjson.AppendStringsOrNull(b, d.ParamNames)
	}
	if d.ApprovalURL != nil {
		b = append(b, `,"approval_url":`...)
		b = strictjson.AppendString(b, *d.ApprovalURL)
	}
	b = append(b, `,"status_url":`...)
	b = strictjson.AppendString(b, d.StatusURL)
	b = append(b, `,"expires_at":`...)
	var err error
	if d.ExpiresAt == nil {
		b = append(b, "null"...)
	} else if b, err = appendTime(b, *d.ExpiresAt); err != nil {
		return nil, err
	}
	for _, f := range [...]struct {
		name string
		v    *string
	}{{`,"outcome":`, d.Outcome}, {`,"decided_by":`, d.DecidedBy}, {`,"comment":`, d.Comment}} {
		if f.v != nil {
			b = append(b, f.name...)
			b = strictjson.AppendString(b, *f.v)
		}
	}
	if len(d.Approvals) > 0 {
		b = append(b, `,"approvals":[`...)
		for i, a := range d.Approvals {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendFields(b, []stringField{{`{"by":`, a.By}})
			b = append(b, `,"at":`...)
			if b, err = appendTime(b, a.At); err != nil {
				return nil, err
			}
			b = append(appendFields(b, []stringField{{`,"comment":`, a.Comment}}), '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendTime is t as its MarshalJSON writes it (which refuses a year
// outside 0–9999, as AppendText does).
func appendTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}
