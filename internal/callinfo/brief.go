package callinfo

import (
	"encoding/json"
)

// Limits of a Brief: a list of calls reads one per call, so none of its
// parts may be large, whatever the agent sent.
const (
	// MaxBrief is the largest encoded Brief.
	MaxBrief = 8 << 10
	// MaxBriefText is the longest string a Brief keeps (target, path,
	// each reason, ...); a longer one is cut and ends with "…".
	MaxBriefText = 256
	// MaxBriefReasons is how many reasons and rule IDs a Brief keeps.
	MaxBriefReasons = 8
)

// Brief is the small summary of a parked call that lists of calls (the
// approver's inbox) read instead of Info: what a list shows and who may
// decide, without the arguments or the policy input. The proxy stores it,
// as JSON, in pending.Call.Brief when it parks a call.
type Brief struct {
	Kind      string `json:"kind"`
	Tool      string `json:"tool,omitempty"`
	MCPMethod string `json:"mcp_method,omitempty"`
	Upstream  string `json:"upstream,omitempty"`
	Subject   string `json:"subject,omitempty"`
	Target    string `json:"target,omitempty"`
	// TargetsBeyond is Info.TargetsBeyond.
	TargetsBeyond bool     `json:"targets_beyond,omitempty"`
	Reasons       []string `json:"reasons,omitempty"`
	RuleIDs       []string `json:"rule_ids,omitempty"`
	// Approvers are Info.Approvers, whole: they decide who may see and
	// decide the call, so they are never cut.
	Approvers []Approvers `json:"approvers,omitempty"`
	Method    string      `json:"method,omitempty"`
	Path      string      `json:"path,omitempty"`
}

// BriefOf returns the encoded Brief of info: its strings cut to
// MaxBriefText, at most MaxBriefReasons reasons and rule IDs, and reasons
// dropped from the end until it fits in MaxBrief. It returns nil when even
// the approvers alone do not fit: a call without a Brief is listed from
// its Info, and a cut list of approvers would change who may decide it.
func BriefOf(info Info) []byte {
	b := Brief{
		Kind: cut(info.Kind), Tool: cut(info.Tool), MCPMethod: cut(info.MCPMethod), Upstream: cut(info.Upstream),
		Subject: cut(info.Subject), Target: cut(info.Target), TargetsBeyond: info.TargetsBeyond,
		Reasons: cutAll(info.Reasons), RuleIDs: cutAll(info.RuleIDs),
		Approvers: info.Approvers, Method: cut(info.Method), Path: cut(info.Path),
	}
	for {
		enc := MarshalNoEscape(b)
		if len(enc) <= MaxBrief {
			return enc
		}
		switch {
		case len(b.Reasons) > 0:
			b.Reasons = b.Reasons[:len(b.Reasons)-1]
		case len(b.RuleIDs) > 0:
			b.RuleIDs = b.RuleIDs[:len(b.RuleIDs)-1]
		case b.Target != "" || b.Path != "":
			b.Target, b.Path = "", ""
		default:
			return nil
		}
	}
}

// DecodeBrief reads a stored Brief. ok is false when there is none or it
// is unreadable: the caller then reads the call's Info.
func DecodeBrief(b []byte) (brief Brief, ok bool) {
	if len(b) == 0 {
		return Brief{}, false
	}
	if err := json.Unmarshal(b, &brief); err != nil {
		return Brief{}, false
	}
	return brief, true
}

// Info returns the Brief as an Info without arguments or policy input, for
// code that shows or checks either.
func (b Brief) Info() Info {
	return Info{
		Kind: b.Kind, Tool: b.Tool, MCPMethod: b.MCPMethod, Upstream: b.Upstream, Subject: b.Subject,
		Target: b.Target, TargetsBeyond: b.TargetsBeyond, Reasons: b.Reasons, RuleIDs: b.RuleIDs, Approvers: b.Approvers, Method: b.Method, Path: b.Path,
	}
}

// cut returns s cut to MaxBriefText bytes, at a rune boundary, ending with
// "…" when it was cut.
func cut(s string) string { return CutTo(s, MaxBriefText) }

func cutAll(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(ss), MaxBriefReasons))
	for _, s := range ss[:min(len(ss), MaxBriefReasons)] {
		out = append(out, cut(s))
	}
	return out
}
