package policy

import (
	"fmt"
)

// Permission modes (docs/policy.md, modes). A mode is applied after the rules; none
// ever overrides a deny.
const (
	ModeDefault = "default"  // ask stays ask
	ModeDontAsk = "dont_ask" // a remaining ask becomes deny: nobody is there to answer
	ModePlan    = "plan"     // only calls the read_only rule marks may run
	ModeBypass  = "bypass"   // a remaining ask becomes allow, unless a reason is must_ask
)

// Modes returns the names of the permission modes, the default first.
func Modes() []string { return []string{ModeDefault, ModeDontAsk, ModePlan, ModeBypass} }

// ConfiguredMode is the mode configuration gives a call of subject to an
// upstream whose own mode is upstreamMode: the subject's (subjectModes),
// else the upstream's, else fallback (policy.mode). A trusted mode header
// comes before all three; the proxy reads it, as only it sees headers.
func ConfiguredMode(subjectModes map[string]string, subject, upstreamMode, fallback string) string {
	if m, ok := subjectModes[subject]; ok {
		return m
	}
	if upstreamMode != "" {
		return upstreamMode
	}
	return fallback
}

// applyMode turns d into what mode makes of it.
func applyMode(d Decision, mode string) (Decision, error) {
	if d.Action == Deny || d.Forced {
		return d, nil // no mode overrides a deny, or an ask a hook forced
	}
	switch mode {
	case "", ModeDefault:
		return d, nil
	case ModeDontAsk:
		if d.Action == Ask {
			return prefixed(Deny, Reason{ID: "toolgate.mode.dont_ask", Message: "mode dont_ask: an ask is refused, nobody is there to approve"}, d.Reasons), nil
		}
		return d, nil
	case ModePlan:
		if !d.ReadOnly {
			return prefixed(Deny, Reason{ID: "toolgate.mode.plan", Message: "mode plan: only read-only calls may run"}, d.Reasons), nil
		}
		return d, nil
	case ModeBypass:
		if d.Action != Ask {
			return d, nil
		}
		for _, r := range d.Reasons {
			if r.MustAsk {
				return d, nil
			}
		}
		return prefixed(Allow, Reason{ID: "toolgate.mode.bypass", Message: "mode bypass: ask turned into allow"}, d.Reasons), nil
	}
	return Decision{}, fmt.Errorf("policy: unknown mode %q", mode)
}

func prefixed(a Action, first Reason, rest []Reason) Decision {
	rs := make([]Reason, 0, len(rest)+1)
	rs = append(rs, first)
	rs = append(rs, rest...)
	return Decision{Action: a, Reasons: rs}
}
