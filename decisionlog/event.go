package decisionlog

import (
	"context"
	"fmt"
	"maps"
	stdstrings "strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/server"

	"github.com/toolgate/toolgate/policy"
)

// Event paths: OPA's "path" field, the decision the event records.
const (
	PathDecision = "toolgate/decision"
	PathApproval = "toolgate/approval"
)

// bundleName names toolgate's policy in an event's bundles field.
const bundleName = "toolgate"

// Decision is one decided call.
type Decision struct {
	// ID is the call ID, the event's decision_id.
	ID string
	// Time is when the call was decided.
	Time time.Time
	// Input is the policy input document the call was decided on. The
	// Logger keeps it: the caller must not change it afterwards (copy it).
	Input policy.Input
	// Result is the decision, Err the policy error if the policy failed.
	Result policy.Decision
	Err    error
	// Revision is the policy revision that decided the call.
	Revision string
	// Elapsed is how long the decision took.
	Elapsed time.Duration
	// RequestedBy is the client's address; TraceID and SpanID the span of
	// the request, if it had one.
	RequestedBy     string
	TraceID, SpanID string
	// DryRun is true when the call was forwarded whatever the decision
	// (policy.enforce false): the result says what would have happened.
	DryRun bool
	// Hook is what the PreToolUse hooks said ("" when none was asked);
	// UpdatedBy the hook that rewrote the arguments, with the digests of
	// the arguments before and after.
	Hook, UpdatedBy, ArgsDigest, UpdatedArgsDigest string
	// HeaderBytes and ArgumentBytes are what Input holds in memory beyond
	// its fixed part: its headers, and its arguments as parsed (0 when
	// not known). A queued event counts them against MaxQueueBytes, the
	// arguments only when they are logged (Options.Arguments).
	HeaderBytes, ArgumentBytes int64
	// redacted: Input is already without what Options.Arguments off
	// keeps out of events (LogDecision did it; withoutArguments).
	redacted bool
}

// LogDecision queues the event of one decided call. It never blocks.
// Arguments that are not logged are let go of here, not when the event is
// built: a queue of events waiting behind a slow sink would otherwise hold
// every call's parsed arguments.
func (l *Logger) LogDecision(_ context.Context, d Decision) {
	if !l.opts.Arguments {
		d.Input, d.redacted = withoutArguments(d.Input), true
	}
	l.enqueue(&d)
}

func (d *Decision) queuedBytes(opts *Options) int64 {
	n := eventBytes + d.HeaderBytes
	if opts.Arguments {
		n += d.ArgumentBytes
	} else if t := d.Input.Tool; t != nil {
		n += t.TargetBytes() // what the arguments leave in the event
	}
	return n
}

// withoutArguments is in without what log.arguments keeps out of events:
// the tool's arguments, a plain HTTP call's query string (its arguments),
// and an MCP call's other params (_meta, inputResponses, anything else the
// agent sent beside the arguments), as the direct path
// (policy.Input.AppendJSON) leaves them out, and the targets cut to what
// they name (policy.Tool.Redacted). in's own values are not changed.
func withoutArguments(in policy.Input) policy.Input {
	if in.Tool != nil {
		in.Tool = in.Tool.Redacted() // its targets are argument values
	}
	in.HTTP.Query = nil
	in.HTTP.Headers = withoutParamValues(in.HTTP.Headers)
	if in.MCP != nil && in.MCP.Params != nil {
		m := *in.MCP
		m.Params = nil
		in.MCP = &m
	}
	return in
}

// paramHeader starts the names of the headers that carry an MCP call's
// arguments (Mcp-Param-{Name}, which must equal the argument's value).
const paramHeader = "mcp-param-"

// withoutParamValues is h with the values of its Mcp-Param headers hidden
// (policy.Hidden, as a credential's), or h itself when it has none.
func withoutParamValues(h map[string][]string) map[string][]string {
	out, cloned := h, false
	for k, vs := range h {
		if !stdstrings.HasPrefix(k, paramHeader) {
			continue
		}
		if !cloned {
			out, cloned = maps.Clone(h), true
		}
		out[k] = policy.HiddenValues(len(vs))
	}
	return out
}

func (d *Decision) decisionID() string { return d.ID }

func (d *Decision) info(opts *Options) (*server.Info, error) {
	in := d.Input
	if !opts.Arguments && !d.redacted {
		// The safe default: arguments can hold anything, secrets included,
		// so they are never even converted (LogDecision lets go of them).
		in = withoutArguments(in)
	}
	v, err := in.Value()
	if err != nil {
		return nil, err
	}
	doc, err := ast.JSON(v)
	if err != nil {
		return nil, fmt.Errorf("decision log input: %w", err)
	}
	if !opts.Arguments {
		// The input document always has tool.arguments and http.query ({}
		// here); the event has neither rather than an empty object that
		// would read as "called without arguments". Mask and drop rules
		// see the {}.
		top := doc.(map[string]any)
		if tool, ok := top["tool"].(map[string]any); ok {
			delete(tool, "arguments")
		}
		if h, ok := top["http"].(map[string]any); ok {
			delete(h, "query")
		}
	}
	result := map[string]any{
		"action":   d.Result.Action.String(),
		"reasons":  strings(d.Result.Messages()),
		"rule_ids": strings(d.Result.RuleIDs()),
	}
	if d.Result.ReadOnly {
		result["read_only"] = true
	}
	if d.DryRun {
		result["dry_run"] = true
	}
	if d.Hook != "" {
		h := map[string]any{"decision": d.Hook}
		if d.UpdatedBy != "" {
			h["updated_by"], h["arguments_digest"], h["updated_arguments_digest"] = d.UpdatedBy, d.ArgsDigest, d.UpdatedArgsDigest
		}
		result["hooks"] = h
	}
	if d.Err != nil {
		result["error"] = d.Err.Error()
	}
	return &server.Info{
		DecisionID: d.ID,
		TraceID:    d.TraceID,
		SpanID:     d.SpanID,
		RemoteAddr: d.RequestedBy,
		Path:       PathDecision,
		Timestamp:  d.Time,
		Bundles:    bundles(d.Revision),
		Input:      &doc,
		// The same input as a value: the plugin then gives it to the mask
		// and drop rules without a JSON round trip.
		InputAST: v,
		Results:  anyOf(result),
		Metrics:  evalTimer(d.Elapsed),
	}, nil
}

// Audit is one approval decision on a parked call.
type Audit struct {
	// CallID is the parked call's ID: the decision_id of its decision event.
	CallID string
	// Outcome is "approved" or "rejected"; DecidedBy who decided (an
	// approver's name, or "link" for a link without identity); Via how
	// (link, api, header, oidc, slack, requester).
	Outcome, DecidedBy, Comment, Via string
	At                               time.Time
	// Groups are the approver's groups, when known. Progress and Partial
	// describe a call that takes several approvals: how far it is after
	// this decision, and whether it still waits for more.
	Groups                  []string
	Progress                string
	Partial                 bool
	Tool, Upstream, Subject string
	// RequestedBy is the approver's client address.
	RequestedBy string
}

// LogAudit queues the audit event of one approval decision. It never blocks.
func (l *Logger) LogAudit(_ context.Context, a Audit) { l.enqueue(&a) }

func (a *Audit) decisionID() string { return a.CallID }

func (a *Audit) queuedBytes(*Options) int64 { return eventBytes }

func (a *Audit) info(*Options) (*server.Info, error) {
	var input any = map[string]any{
		"call_id":  a.CallID,
		"tool":     a.Tool,
		"upstream": a.Upstream,
		"subject":  a.Subject,
	}
	return &server.Info{
		DecisionID: a.CallID,
		RemoteAddr: a.RequestedBy,
		Path:       PathApproval,
		Timestamp:  a.At,
		Input:      &input,
		Results: anyOf(map[string]any{
			"outcome":    a.Outcome,
			"decided_by": a.DecidedBy,
			"comment":    a.Comment,
			"via":        a.Via,
			"groups":     strings(a.Groups),
			"progress":   a.Progress,
			"partial":    a.Partial,
		}),
	}, nil
}

// strings is ss as JSON values, the form OPA's mask rules walk.
func strings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func anyOf(m map[string]any) *any {
	var v any = m
	return &v
}

func bundles(revision string) map[string]server.BundleInfo {
	if revision == "" {
		return nil
	}
	return map[string]server.BundleInfo{bundleName: {Revision: revision}}
}

// evalTimer reports the decision's duration as OPA reports a query's
// evaluation time. toolgate times the whole Decide call (input conversion,
// evaluation, precedence), which is what the metric measures here.
func evalTimer(d time.Duration) metrics.Metrics {
	return timer{Metrics: metrics.NoOp(), ns: d.Nanoseconds()}
}

type timer struct {
	metrics.Metrics
	ns int64
}

func (t timer) All() map[string]any { return map[string]any{"timer_rego_query_eval_ns": t.ns} }
