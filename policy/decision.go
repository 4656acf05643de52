// Package policy decides tool calls with OPA Rego. It builds nothing but
// decisions: it knows no HTTP routing, no parked calls and no Redis.
//
// Policies contribute to three rules of package toolgate (and of the shipped
// library, package toolgate.lib): deny, ask and allow. The precedence
// deny > ask > allow is applied here in Go, so no policy can break it, and a
// call for which nothing fired, or whose policy could not be evaluated, is
// denied.
package policy

import (
	"encoding/json"
	"fmt"
)

// Action is the outcome of a decision. The zero value is Deny, so a Decision
// that was never filled in fails closed.
type Action uint8

const (
	Deny Action = iota
	Ask
	Allow
)

// String returns "deny", "ask" or "allow".
func (a Action) String() string {
	switch a {
	case Ask:
		return "ask"
	case Allow:
		return "allow"
	}
	return "deny"
}

// MarshalText writes the action as its name.
func (a Action) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText reads "deny", "ask" or "allow".
func (a *Action) UnmarshalText(b []byte) error {
	switch string(b) {
	case "deny":
		*a = Deny
	case "ask":
		*a = Ask
	case "allow":
		*a = Allow
	default:
		return fmt.Errorf("policy: unknown action %q (want deny, ask or allow)", b)
	}
	return nil
}

// Reason is one reason a rule gave. Rules write either a string (the message)
// or an object {"id", "message"}; an ask reason may also carry
// "must_ask": true, which no permission mode can turn into allow, and
// "approvers", who may approve it and how many must.
type Reason struct {
	ID        string     `json:"id,omitempty"`
	Message   string     `json:"message"`
	MustAsk   bool       `json:"must_ask,omitempty"`
	Approvers *Approvers `json:"approvers,omitempty"`
}

// Decision is what toolgate does with a call, and why.
type Decision struct {
	Action  Action   `json:"action"`
	Reasons []Reason `json:"-"`
	// ReadOnly is true when the policy's read_only rule fired for the call.
	ReadOnly bool `json:"-"`
	// Forced is true for an ask a hook forced: no mode changes it.
	Forced bool `json:"-"`
	// Defaulted is true when no rule fired: the action is the default's.
	// A hook's allow or ask stands in its place (hook.go); it is set here
	// rather than read off the reason's ID, which a rule may also give.
	Defaulted bool `json:"-"`
}

// Messages returns the reasons' messages, in order.
func (d Decision) Messages() []string {
	out := make([]string, 0, len(d.Reasons))
	for _, r := range d.Reasons {
		out = append(out, r.Message)
	}
	return out
}

// RuleIDs returns the IDs of the rules that gave the reasons, without
// duplicates, in order.
func (d Decision) RuleIDs() []string {
	out := make([]string, 0, len(d.Reasons))
	seen := make(map[string]bool, len(d.Reasons))
	for _, r := range d.Reasons {
		if r.ID != "" && !seen[r.ID] {
			seen[r.ID] = true
			out = append(out, r.ID)
		}
	}
	return out
}

// MarshalJSON writes the decision as docs/policy.md (rules and decision) shows it:
// {"action", "reasons": [messages], "rule_ids": [ids]}.
func (d Decision) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Action  Action   `json:"action"`
		Reasons []string `json:"reasons"`
		RuleIDs []string `json:"rule_ids"`
	}{d.Action, d.Messages(), d.RuleIDs()})
}

// NoRuleMatched is the reason given when no rule fired.
const NoRuleMatched = "no rule matched"

// defaultReasonID is the ID of that reason.
const defaultReasonID = "toolgate.default"

// verdict is what one of the three rules produced across all packages.
type verdict struct {
	fired   bool
	reasons []Reason
}

// combine applies the precedence deny > ask > allow. When nothing fired the
// outcome is fallback (Deny unless the configuration says Ask). This is the
// only place in toolgate that orders the three outcomes.
func combine(deny, ask, allow verdict, fallback Action) Decision {
	switch {
	case deny.fired:
		return Decision{Action: Deny, Reasons: deny.reasons}
	case ask.fired:
		return Decision{Action: Ask, Reasons: ask.reasons}
	case allow.fired:
		return Decision{Action: Allow, Reasons: allow.reasons}
	}
	if fallback != Ask {
		fallback = Deny
	}
	return Decision{Action: fallback, Reasons: []Reason{{ID: defaultReasonID, Message: NoRuleMatched}}, Defaulted: true}
}
