package proxy

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/toolgate/toolgate/hooks"
	"github.com/toolgate/toolgate/policy"
)

// HookRunner asks the configured PreToolUse hooks about a call
// (docs/policy.md, hooks). *hooks.Runner implements it.
type HookRunner interface {
	// rest: the call is a REST tool call, whose name a router may read
	// up to a dot (an MCP tools/call's is looked up as spelt).
	Matches(upstream, tool string, rest bool) bool
	// caller names the call's principal: each has a share of the hooks'
	// requests in flight.
	Run(ctx context.Context, caller, upstream, tool string, rest bool, input []byte) hooks.Verdict
}

// hookRecord is what the hooks did to a call, for its decision record.
type hookRecord struct {
	Decision string // allow | ask | deny | none
	// UpdatedBy names the hook that rewrote the arguments; ArgsDigest and
	// UpdatedArgsDigest are the digests of the arguments as sent and as
	// the hook rewrote them.
	UpdatedBy, ArgsDigest, UpdatedArgsDigest string
}

// runHooks asks the hooks that match c's tool call, before the policy. A
// hook deny is the decision at once (returned); a rewrite replaces the
// arguments the policy evaluates, the approver sees and the upstream
// receives; an ask or allow goes to the policy as c.input.Hook, to be
// weighed against the rules. Only tool calls (REST, MCP tools/call) are
// asked: they are what a hook's tool glob names.
func (s *Server) runHooks(ctx context.Context, c *call) *policy.Decision {
	t := c.input.Tool
	if s.cfg.Hooks == nil || t == nil || (c.mcp != nil && !c.mcp.isToolCall) || !s.cfg.Hooks.Matches(c.up.Name, t.Name, c.mcp == nil) {
		return nil
	}
	doc, err := c.input.AppendJSON(nil, false)
	if err != nil {
		d := policyFailed(c.id)
		return &d
	}
	v := s.cfg.Hooks.Run(ctx, c.subject.Principal, c.up.Name, t.Name, c.mcp == nil, doc)
	c.hooks = &hookRecord{Decision: v.Decision}
	reasons := make([]policy.Reason, 0, len(v.Reasons))
	for _, o := range v.Reasons {
		msg := o.Reason
		if msg == "" {
			msg = "hook " + o.Hook + " answered " + o.Decision
		}
		reasons = append(reasons, policy.Reason{ID: "hook." + o.Hook, Message: msg})
	}
	switch v.Decision {
	case hooks.Deny:
		return &policy.Decision{Action: policy.Deny, Reasons: reasons}
	case hooks.Ask:
		c.input.Hook = &policy.HookOpinion{Action: policy.Ask, Reasons: reasons}
	case hooks.Allow:
		c.input.Hook = &policy.HookOpinion{Action: policy.Allow, Reasons: reasons}
	}
	if v.UpdatedArguments != nil {
		if err := s.rewriteArguments(c, v.UpdatedArguments); err != nil {
			// Log-safe in both: the reason reaches the decision log.
			s.log.Warn("a hook's updated_arguments were refused", "call_id", c.id, "hook", v.UpdatedBy, "error", policy.LogSafe(err))
			return &policy.Decision{Action: policy.Deny, Reasons: []policy.Reason{{
				ID: "hook." + v.UpdatedBy, Message: "hook " + v.UpdatedBy + " rewrote the arguments into something toolgate refuses: " + policy.LogSafe(err),
			}}}
		}
		c.hooks.UpdatedBy = v.UpdatedBy
	}
	return nil
}

var errNoParams = errors.New("the message has no params")

// rewriteArguments makes updated the arguments of c: read as strictly as
// an agent's, decided by the policy, shown to approvers and sent. A REST
// call's body becomes the hook's bytes; an MCP message keeps everything
// but params.arguments (it is encoded again, keys in order).
func (s *Server) rewriteArguments(c *call, updated json.RawMessage) error {
	args, err := s.json.DecodeObject(updated)
	if err != nil {
		return err
	}
	if err := policy.CheckArgNames(args); err != nil {
		return err
	}
	if err := policy.CheckControl(args, c.up.TargetArgs); err != nil {
		return err
	}
	if err := policy.CheckTargetSpelling(args, c.up.TargetArgs, c.up.fold); err != nil {
		return err
	}
	if err := policy.CheckTargets(args, c.up.TargetArgs); err != nil {
		return err
	}
	if a := queryAgrees(c.up, c.input.HTTP.Query, args); a != nil {
		// The agent's query is sent beside the hook's arguments: a name
		// in both would be bound two ways, as in the agent's own call.
		return errors.New(a.title + ": " + a.detail)
	}
	old := c.input.Tool
	body := []byte(updated)
	if c.mcp != nil {
		msg, err := s.json.DecodeObject(c.body)
		if err != nil {
			return err
		}
		params, _ := msg["params"].(map[string]any)
		if params == nil {
			return errNoParams
		}
		params["arguments"] = args
		if body, err = json.Marshal(msg); err != nil {
			return err
		}
	}
	c.hooks.ArgsDigest, c.hooks.UpdatedArgsDigest = digest(canonicalArgs(old.Arguments)), digest(canonicalArgs(args))
	t := policy.NewToolWith(old.Name, args, c.up.TargetArgs, c.up.fold)
	t.Annotations = old.Annotations
	c.input.Tool = t
	c.replaceBody(body)
	return nil
}
