package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// stillAllowed decides a claimed call again, on the input it was parked
// with, under the policy in force now: an approval lets an ask through, but
// never a deny that the policy has come to. Any error
// counts as a deny.
func (s *Server) stillAllowed(ctx context.Context, pc pending.Call) (bool, string) {
	info := infoOf(pc)
	in := heldInput(ctx, pc.ID)
	var err error
	if in == nil {
		if in, err = decodeInput(info.PolicyInput); err != nil {
			s.log.Error("a parked call's policy input cannot be read", "call_id", pc.ID, "error", err)
			return false, "the parked call's policy input cannot be read"
		}
	}
	if in.Tool != nil && len(info.Arguments) > 0 && string(info.Arguments) != "null" {
		// Parked inputs keep the arguments once, as the display's.
		if in.Tool.Arguments, err = s.json.DecodeObject(info.Arguments); err != nil {
			s.log.Error("a parked call's arguments cannot be read", "call_id", pc.ID, "error", err)
			return false, "the parked call's arguments cannot be read"
		}
		// A call parked by an earlier release was not asked this.
		if err := policy.CheckArgNames(in.Tool.Arguments); err != nil {
			return false, err.Error()
		}
	}
	if up := s.upstreamNamed(pc.Upstream); up != nil && in.Tool != nil {
		// The target is derived again, as NewTool promises; the tool's
		// annotations (an MCP server's hints) are kept: a policy may
		// have come to deny on them.
		ann := in.Tool.Annotations
		in.Tool = policy.NewToolWith(in.Tool.Name, in.Tool.Arguments, up.TargetArgs, up.fold)
		in.Tool.Annotations = ann
	}
	if info.HookAsked {
		// A hook forced the ask and an approver answered it: the rules
		// and the mode are weighed again as they were then, beside it.
		in.Hook = &policy.HookOpinion{Action: policy.Ask}
	}
	d, err := s.cfg.Decider.Decide(ctx, in)
	if err != nil {
		return false, "policy error"
	}
	if d.Action == policy.Deny {
		return false, reasonsText(d.Messages())
	}
	return true, ""
}

// heldKey carries, on the context of a held agent's request, the input
// its call was parked with (withHeld).
type heldKey struct{}

type held struct {
	id string
	in *policy.Input
}

// withHeld marks ctx as the request that parked call id with input in,
// which it holds while it waits (without the arguments: the call keeps
// them). When the approved call runs on that request, its re-check takes
// the input from there instead of decoding the one stored with the call:
// the same document (the call's ID names what this request parked; an
// identical call it attached to has another ID and is decoded), minus a
// JSON decoding of the whole input per call.
func withHeld(ctx context.Context, id string, in *policy.Input) context.Context {
	return context.WithValue(ctx, heldKey{}, held{id: id, in: in})
}

// heldInput is a copy of the input call id was parked with, when ctx is
// the request that parked it, else nil.
func heldInput(ctx context.Context, id string) *policy.Input {
	h, ok := ctx.Value(heldKey{}).(held)
	if !ok || h.id != id || h.in == nil {
		return nil
	}
	in := *h.in
	if in.Tool != nil {
		t := *in.Tool
		t.Arguments = nil // the stored call's, set by the caller
		in.Tool = &t
	}
	in.Hook = nil // as decodeInput gives it: the re-check sets its own
	return &in
}

func decodeInput(b []byte) (*policy.Input, error) {
	if len(b) == 0 {
		return nil, errors.New("none was stored")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // arguments keep their exact numbers
	var in policy.Input
	if err := dec.Decode(&in); err != nil {
		return nil, err
	}
	return &in, nil
}
