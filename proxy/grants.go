package proxy

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// grantLookupTimeout bounds the store's answer to a grant lookup, as
// policy.Options.Timeout bounds a decision: past it the call asks.
const grantLookupTimeout = 5 * time.Second

// applyGrant turns an ask into allow when an approver remembered an
// approval for this caller, tool and target (docs/policy.md, remembered
// grants). It never touches a deny, an ask a hook forced, or an ask whose
// reasons name approvers (a grant cannot stand in for them or their
// quorum). The grant's ID and approver become the reason, so the decision
// log records every use. A store that cannot answer leaves the ask.
func (s *Server) applyGrant(ctx context.Context, c *call, d policy.Decision) policy.Decision {
	t := c.input.Tool
	if s.cfg.Grants == nil || d.Action != policy.Ask || d.Forced || t == nil || (c.mcp != nil && len(c.mcp.batch) > 0) {
		return d
	}
	if slices.ContainsFunc(d.Reasons, func(r policy.Reason) bool { return r.Approvers != nil }) {
		return d
	}
	q := pending.GrantQuery{Subject: c.subject.Principal, Upstream: c.up.Name, Tool: t.Name}
	if t.HasTarget {
		q.Target = t.Target
	}
	// A grant for one target covers a call only when it acts on nothing
	// else (no second argument named in target_args, no array, no opaque
	// value): otherwise only a grant for any target may, and the store
	// looks for that one alone, so an exact grant for the first target
	// does not hide it.
	q.SoleTarget = t.SoleTarget(q.Target)
	ctx, cancel := context.WithTimeout(ctx, grantLookupTimeout)
	defer cancel()
	g, err := s.cfg.Grants.FindGrant(ctx, q)
	if err != nil {
		if !errors.Is(err, pending.ErrNotFound) {
			s.log.Warn("could not look up remembered grants; the call asks", "call_id", c.id, "error", err)
		}
		return d
	}
	if !g.AnyTarget && !t.SoleTarget(g.Target) {
		// Never from a store that keeps its contract: checked anyway, a
		// grant for one target must not cover a call on another.
		return d
	}
	return policy.Decision{Action: policy.Allow, ReadOnly: d.ReadOnly, Reasons: append([]policy.Reason{{
		ID:      "grant:" + g.ID,
		Message: "remembered grant " + g.ID + " by " + g.Approver + " (approved call " + g.CallID + ")",
	}}, d.Reasons...)}
}
