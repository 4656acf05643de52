package decisionlog

import (
	"github.com/toolgate/toolgate/internal/strictjson"
)

// A decision event's result, written as JSON for the direct console path
// (the input is policy.Input.AppendJSON). TestDirectMatchesPlugin holds
// both to what the plugin writes.

// appendResult appends the event's result: the decision, and the policy
// error if there was one.
func appendResult(b []byte, ev *Decision) []byte {
	d, evalErr := ev.Result, ev.Err
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
	if ev.DryRun {
		b = append(b, `,"dry_run":true`...)
	}
	if ev.Hook != "" {
		b = append(b, `,"hooks":{"decision":`...)
		b = appendString(b, ev.Hook)
		if ev.UpdatedBy != "" {
			b = appendKey(b, "updated_by")
			b = appendString(b, ev.UpdatedBy)
			b = appendKey(b, "arguments_digest")
			b = appendString(b, ev.ArgsDigest)
			b = appendKey(b, "updated_arguments_digest")
			b = appendString(b, ev.UpdatedArgsDigest)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendKey(b []byte, k string) []byte {
	b = append(b, ',')
	b = appendString(b, k)
	return append(b, ':')
}

func appendString(b []byte, s string) []byte { return strictjson.AppendString(b, s) }
