package policy

// HookOpinion is what the PreToolUse hooks said of a call, combined
// (docs/policy.md, hooks): Ask or Allow (a hook deny ends the call before
// any policy runs, and "none" is no opinion: a nil *HookOpinion). It is
// not part of the input document; Decide weighs it against the rules.
type HookOpinion struct {
	Action  Action
	Reasons []Reason
}

// withHook weighs a hook's opinion against the rules' decision d (before
// the mode):
//   - a hook ask is forced: the rules' deny still wins, anything else
//     becomes an ask that no mode turns into allow or deny;
//   - a hook allow is a candidate: the rules' deny or ask wins, their
//     allow stands, and when no rule fired the hook's allow stands in
//     place of the default.
func withHook(d Decision, h *HookOpinion) Decision {
	if h == nil || d.Action == Deny && !defaulted(d) {
		return d
	}
	switch h.Action {
	case Ask:
		rs := append(append([]Reason(nil), h.Reasons...), nonDefault(d)...)
		return Decision{Action: Ask, Reasons: rs, ReadOnly: d.ReadOnly, Forced: true}
	case Allow:
		if defaulted(d) {
			return Decision{Action: Allow, Reasons: h.Reasons, ReadOnly: d.ReadOnly}
		}
	}
	return d
}

// defaulted reports whether d is the default of a call no rule fired for.
func defaulted(d Decision) bool { return d.Defaulted }

func nonDefault(d Decision) []Reason {
	if defaulted(d) || d.Action != Ask {
		return nil
	}
	return d.Reasons
}
