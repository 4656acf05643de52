// Package callinfo is the display document of a parked call: what its
// approvers, its caller's status answers and notifications show of it. The
// proxy writes it when it parks a call and stores it, as JSON, in
// pending.Call.Info; everyone else only reads it. It imports nothing of
// toolgate but its JSON string writer, so every side can share it without
// knowing the others.
package callinfo

import (
	"bytes"
	"encoding/json"
)

// Info is what a parked call shows.
type Info struct {
	Kind      string          `json:"kind"` // rest | mcp | http
	Tool      string          `json:"tool"`
	Upstream  string          `json:"upstream"`
	Subject   string          `json:"subject"`
	Target    string          `json:"target,omitempty"`
	Arguments json.RawMessage `json:"arguments"` // exact JSON arguments
	Reasons   []string        `json:"reasons"`
	RuleIDs   []string        `json:"rule_ids"`
	Method    string          `json:"method"` // the HTTP method
	Path      string          `json:"path"`
	// MCPMethod is the JSON-RPC method of an MCP call (kind mcp), e.g.
	// tools/call; Method and Path are then the HTTP request's.
	MCPMethod string `json:"mcp_method,omitempty"`
	// Approvers are the approvers that ask reasons named: entry i is
	// requirement i of the parked call's quorum (pending.Call.Quorum).
	// Empty: any approver may decide, and one approval does.
	Approvers []Approvers `json:"approvers,omitempty"`
	// HookAsked is true when a PreToolUse hook forced the ask: the
	// re-check of the approved call weighs that ask again (the approval
	// answered it), since the input document does not carry it.
	HookAsked bool `json:"hook_asked,omitempty"`
	// MustAsk is true when an ask reason said must_ask: nothing automatic
	// may answer the ask, so the approval cannot be remembered.
	MustAsk bool `json:"must_ask,omitempty"`
	// OpenAsk is true when an ask reason named no approvers beside those
	// that did: that reason is for any approver to answer, so the
	// requester's own confirmation does not approve the call
	// (RequesterConfirms), even where every named requirement is the
	// requester's.
	OpenAsk bool `json:"open_ask,omitempty"`
	// TargetsBeyond is true when the call names targets other than
	// Target (another argument in target_args, an array, a value toolgate
	// cannot read as a path): pages say so, as Target alone would mislead,
	// and no grant is remembered for Target, which would not cover it.
	TargetsBeyond bool `json:"targets_beyond,omitempty"`
	// Headers are the request headers the call will send upstream once
	// approved, but for those toolgate writes itself, with credentials'
	// values hidden (HeadersOf). Nil for a call parked before toolgate
	// listed them: pages then say nothing of its headers.
	Headers *Headers `json:"headers,omitempty"`
	// OtherParams are, for an MCP call of a tool (tools/call, and the
	// pseudo-tools of resources/read and prompts/get), the members of the
	// message's params that Tool and Arguments do not show and that the
	// approved call sends all the same (ParamsOf): a tools/call's _meta,
	// inputResponses, requestState, task, ... A progressToken in _meta is
	// left out (the proxy's plumbing for progress notifications). Nil for
	// other calls and for a call parked before toolgate listed them.
	OtherParams *Params `json:"other_params,omitempty"`
	// GrantExtras binds a grant remembered from this call to what the
	// call sends beyond its tool, target and arguments: the proxy's
	// digest of its headers but the usual ones (UsualHeader) and of its
	// other params (docs/policy.md, remembered grants). The grant keeps
	// it, and covers only later calls with the same. "" when the call
	// sends none of them, or was parked before toolgate bound grants:
	// its grant then covers only calls that send none.
	GrantExtras string `json:"grant_extras,omitempty"`
	// HeadersDigest is the proxy's keyed digest of the headers the call
	// sends but the usual ones, naming its key: a retry that finds the
	// call once it has ended, and its stored request is gone, is compared
	// by it. "" for a call parked before toolgate kept it, whose retries
	// are then refused, as are those a digest of another key cannot judge.
	HeadersDigest string `json:"headers_digest,omitempty"`
	// PolicyInput is the policy input document the call was decided on;
	// the proxy decides it again before an approved call runs, so a
	// policy that has come to deny it meanwhile still wins.
	PolicyInput json.RawMessage `json:"policy_input,omitempty"`
}

// Approvers is who may approve a call for one ask reason, and how many
// must: an approver who is one of Subjects or in one of Groups counts.
type Approvers struct {
	Reason    string   `json:"reason,omitempty"` // the rule ID that named them
	Groups    []string `json:"groups,omitempty"`
	Subjects  []string `json:"subjects,omitempty"`
	Min       int      `json:"min"` // at least 1
	Requester bool     `json:"requester,omitempty"`
}

// Open reports whether a names no group or subject: any approver's
// approval counts towards it.
func (a Approvers) Open() bool { return len(a.Groups) == 0 && len(a.Subjects) == 0 }

// RequesterOnly reports whether a names nobody but the requester: the
// caller's own human may confirm the call (its confirmation page), and so
// may any approver who could decide a call that names no approvers. An
// ask that names groups or subjects is never satisfied by the requester.
func (a Approvers) RequesterOnly() bool { return a.Requester && a.Open() }

// RequesterConfirms reports whether the requester's confirmation alone
// approves the call: it names approvers, all of them are RequesterOnly,
// and no other ask (a reason naming nobody, a hook's) is left for an
// approver to answer. Such a call is offered to the requester (MCP URL
// elicitation, task input requests).
func (info Info) RequesterConfirms() bool {
	if len(info.Approvers) == 0 || info.OpenAsk || info.HookAsked {
		return false
	}
	for _, a := range info.Approvers {
		if !a.RequesterOnly() {
			return false
		}
	}
	return true
}

// NamesApprovers reports whether some requirement names groups or
// subjects: only eligible known approvers decide such a call.
func (info Info) NamesApprovers() bool {
	for _, a := range info.Approvers {
		if !a.Open() {
			return true
		}
	}
	return false
}

// Decode reads a stored Info. An unreadable one reads as empty: a display
// document never stops a call from being shown or decided. The Infos it
// decoded last are kept (memo.go), so reading the same call again costs a
// lookup, not a decoding.
//
// What Decode returns is read only: every reader of the same encoding gets
// the same slices and pointers (Arguments, Reasons, RuleIDs, Approvers and
// their lists, Headers, OtherParams, PolicyInput), and a write to any of
// them would change what the others read, without a lock. A caller that
// wants to change a part copies it first (slices.Clone, bytes.Clone);
// assigning the Info's own fields (info.Tool = …) changes only the
// caller's copy of the struct. CheckKept finds a reader that wrote.
func Decode(b []byte) Info {
	h := decoded.hash(b)
	if info, ok := decoded.get(h, b); ok {
		return info
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return info // as far as it could be read, and not kept
	}
	decoded.put(h, bytes.Clone(b), info) // info is this decoding's own
	return info
}

// MarshalNoEscape encodes v without escaping <, > and &, so approvers see
// the agent's arguments byte for byte (pages escape them for HTML).
func MarshalNoEscape(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // only strings, string slices and raw JSON
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
