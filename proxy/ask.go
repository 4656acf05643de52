package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/lifecycle"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// ask hands a call the policy asks about to the lifecycle of parked calls:
// parked (or attached to an identical one already parked), the agent held
// until it is decided, up to the hold.
func (s *Server) ask(w http.ResponseWriter, r *http.Request, c *call) answer {
	if s.life == nil {
		return askUnavailable(c.decision)
	}
	if c.storeStalled {
		return outcomeAnswer(lifecycle.Outcome{Kind: lifecycle.NotParked}, c.decision)
	}
	pc, a := s.newParked(r, c)
	if a != nil {
		s.refused(r, c, *a)
		return *a
	}
	// The parked call has the body and the arguments now; the held
	// request keeps no copy of them while it waits.
	cancelOnLeave := c.mcp != nil && c.mcp.version >= statelessEra
	c.body = nil
	if t := c.input.Tool; t != nil {
		t.Arguments = nil // the decision log has its own copy of the tool
	}
	s.metrics.held.Inc()
	defer s.metrics.held.Dec()
	if c.mcp != nil && c.mcp.task {
		// The client asked for a task: it is answered at once, and
		// follows the call with the task methods (tasks.go).
		o := s.life.Ask(r.Context(), pc, lifecycle.Hold{Same: s.sameHeaders(c)})
		var a answer
		var ok bool
		if c.mcp.version >= statelessEra {
			a, ok = extTaskCreated(c, o, s.cfg.ConfirmURL != nil && c.mcp.urlElicit && infoOf(pc).RequesterConfirms())
		} else {
			a, ok = taskCreated(c, o)
		}
		if ok {
			return a
		}
		return outcomeAnswer(o, c.decision)
	}
	if a, ok := s.askRequester(r, c, pc); ok {
		return a
	}
	ctx := withHeld(c.withRelay(r.Context(), w, r), pc.ID, c.input)
	hold, release := s.holdPlace(c.subject.Principal, s.holdFor(r))
	defer release()
	held, unheld := s.holding(r, c, s.offerConfirmation(w, r, c))
	defer unheld()
	o := s.life.Ask(ctx, pc, lifecycle.Hold{
		Same:          s.sameHeaders(c),
		For:           hold,
		Progress:      c.progressReporter(w, r),
		ProgressEvery: progressEvery,
		Held:          held,
		// In the stateless MCP revision (2026-07-28) closing the stream
		// cancels the request; elsewhere a call whose agent went away
		// stays parked for its status URL or a retry that attaches.
		CancelOnLeave: cancelOnLeave,
	})
	if rl := relayOf(ctx); rl != nil && rl.final != nil && o.Kind == lifecycle.Delivered {
		// The upstream's events went to the agent as they came; its
		// response goes once the result is recorded as delivered, so no
		// identical call sent the moment the agent has it can attach to
		// the call again.
		rl.m.sse.send(rl.final)
		return answered
	}
	return outcomeAnswer(o, c.decision)
}

// setApprovers records in info who must approve a call decided d, and
// returns the call's quorum: one requirement for each ask reason that names
// approvers. A reason naming nobody is an open ask (any approver answers
// it), as is a hook's ask.
func setApprovers(info *callinfo.Info, d policy.Decision) (quorum []int) {
	info.HookAsked = d.Forced
	for _, rs := range d.Reasons {
		info.MustAsk = info.MustAsk || rs.MustAsk
		a := rs.Approvers
		if a == nil {
			info.OpenAsk = true // any approver answers it; the requester alone does not
			continue
		}
		info.Approvers = append(info.Approvers, callinfo.Approvers{
			Reason: rs.ID, Groups: a.Groups, Subjects: a.Subjects, Min: a.Need(), Requester: a.Requester,
		})
		quorum = append(quorum, a.Need())
	}
	if info.OpenAsk || info.HookAsked {
		// The requester may not confirm such a call: its requirements are
		// stored as any approver's (callinfo.Approvers.Open). A replica of
		// an earlier release, which does not read OpenAsk and HookAsked,
		// then neither offers nor takes the requester's confirmation.
		for i := range info.Approvers {
			info.Approvers[i].Requester = false
		}
	}
	return quorum
}

// newParked builds the record of a parked call.
func (s *Server) newParked(r *http.Request, c *call) (pending.Call, *answer) {
	c.dropTaskRequest() // toolgate holds the task (tasks_forward.go)
	sr := c.stored(r, s.fwdHost)
	req := sr.encode()
	info := callinfo.Info{
		Kind: c.input.Kind, Upstream: c.up.Name, Subject: c.subject.ID,
		Reasons: c.decision.Messages(), RuleIDs: c.decision.RuleIDs(), Method: r.Method,
		// The path as approving sends it: without the upstream's prefix,
		// escapes kept (decoded, an escaped "?", "#" or line break would
		// read as a query, a fragment or a space the upstream never gets).
		Path: c.rawRel,
		// The headers approving sends, as approvers see them: without
		// toolgate's own, credentials' values hidden.
		Headers: callinfo.HeadersOf(sr.Header, forwardedHeader, hiddenHeader),
	}
	if q := r.URL.RawQuery; q != "" {
		info.Path += "?" + q // the approver sees everything that will be sent
	}
	params := c.otherParamsForm() // once: the attach key and (but for a confirmation's answer) the grant digest weigh it
	if c.mcp != nil {
		info.MCPMethod = c.mcp.method
	}
	quorum := setApprovers(&info, c.decision)
	if t := c.input.Tool; t != nil {
		info.Tool = t.Name
		info.Target = t.Target
		info.TargetsBeyond = len(t.AllTargets()) > 0 && !t.SoleTarget(t.Target)
		if c.mcp != nil {
			// The body is the whole JSON-RPC message; show the arguments,
			// and the other members of params, which approving sends too.
			info.Arguments = callinfo.MarshalNoEscape(t.Arguments)
			var other map[string]any
			if c.input.MCP != nil {
				other = c.input.MCP.Params
			}
			info.OtherParams = callinfo.ParamsOf(shownParams(other))
		} else {
			info.Arguments = json.RawMessage(c.body)
		}
	} else {
		if len(c.body) > 0 {
			// A plain HTTP call's body: shown as JSON when it is, else as text.
			if json.Valid(c.body) {
				info.Arguments = json.RawMessage(c.body)
			} else {
				info.Arguments = callinfo.MarshalNoEscape(callinfo.ShowBody(c.body))
			}
		}
	}
	// The input is kept without the arguments, which Info.Arguments holds
	// already: the re-check of an approved call takes them from there.
	in := *c.input
	if in.Tool != nil {
		t := *in.Tool
		t.Arguments = nil
		in.Tool = &t
	}
	// Compact JSON, as Info.Encode wants it. An input that cannot be
	// written is stored as none: the re-check then refuses the call. The
	// buffer starts at the size of a typical input (a few headers, no
	// arguments) rather than growing to it through ten copies.
	info.PolicyInput, _ = in.AppendJSON(make([]byte, 0, 1024), false)
	// What a grant remembered from this call is bound to, beside its
	// scope: the same headers and params as it sends (grantExtras).
	grantParams := params
	if c.mcp != nil && c.mcp.confirmAnswered {
		grantParams = c.shownParamsForm()
	}
	info.GrantExtras = grantExtras(s.cfg.GrantKey, sr.Header, grantParams, sr.Query)
	// Kept for a retry that finds the call once it has ended, and its
	// stored request is gone (matchHeaders).
	info.HeadersDigest = s.headersDigest(sr.Header)
	c.sentHeader = sr.Header // weighed only if a retry finds a parked call (matchHeaders)
	// The Brief is what lists of calls (the approver's inbox) read
	// instead of Info, which holds the arguments and the policy input.
	pc := pending.Call{
		ID: c.id, Subject: c.subject.ID, Principal: c.subject.Principal, Upstream: c.up.Name, Tool: info.Tool,
		Request: req, Info: info.Encode(), Brief: callinfo.BriefOf(info),
		ArgsDigest: digest(c.argsForm(r, params)), Quorum: quorum,
	}
	pc.RequestDigest = s.seals.seal(&pc)
	var a *answer
	if pc.AttachKey, pc.ArgsKey, a = attachKeys(r, c, pc.ArgsDigest); a != nil {
		return pending.Call{}, a
	}
	return pc, nil
}

// argsForm is what an Idempotency-Key is bound to, and what makes a call
// identical to another: the request line and the arguments (canonical for
// a tool call, the raw body otherwise), with an MCP tool call's other
// params (params: otherParamsForm). Headers are not in it: a digest of
// them would be keyed with the approvals secret, which rotates, and a
// retry must find its call across the rotation. A retry that finds a call
// whose headers (but the usual ones) differ from its own is refused then
// (sameHeaders).
func (c *call) argsForm(r *http.Request, params string) string {
	f := c.input.HTTP.Method + " " + c.rawRel + "?" + r.URL.RawQuery + "\x00"
	switch t := c.input.Tool; {
	case t == nil:
		return f + string(c.body)
	case c.mcp != nil && params != "":
		// An identical retry carries the same other params; a call
		// without any keeps the form it always had.
		return f + canonicalArgs(t.Arguments) + "\x00params\x00" + params
	default:
		return f + canonicalArgs(t.Arguments)
	}
}

// headersForm is what of the headers h (as stored) a retry must send
// alike to be the parked call's: those a grant is bound to (grantExtras),
// keyed alike, but for the usual ones, which clients send anew with every
// attempt (callinfo.UsualHeader).
func (s *Server) headersForm(h http.Header) string {
	return grantExtras(s.cfg.GrantKey, h, "", "")
}

// headersDigest is headersForm as a parked call's Info keeps it
// (HeadersDigest), after the form's version and the ID of its key: a
// digest made under another key, or by a release that made it otherwise,
// is never read as one that differs.
func (s *Server) headersDigest(h http.Header) string {
	return s.headersKeyID + s.headersForm(h)
}

// headersKeyID is the prefix of the headers' digests (headersDigest): the
// form's version and an ID of the key that weighs them.
func headersKeyID(key []byte) string {
	if key == nil {
		return "v1.none."
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("toolgate headers digest key id"))
	return "v1." + hex.EncodeToString(m.Sum(nil))[:8] + "."
}

// headersMatch is how the headers of a call compare with those of the
// parked call it found.
type headersMatch int

const (
	headersDiffer  headersMatch = iota
	headersSame                 // but the usual ones
	headersUnknown              // an ended call's digest of another key or release
)

// matchHeaders compares the headers c sends with those of stored, the
// parked call a retry of c found: as it stores them, or once it has ended
// and its request is gone, by the digest its Info keeps.
func (s *Server) matchHeaders(c *call, stored pending.Call) headersMatch {
	if sr, err := decodeStored(stored.Request); err == nil {
		if s.headersForm(sr.Header) == s.headersForm(c.sentHeader) {
			return headersSame
		}
		return headersDiffer
	}
	switch d := infoOf(stored).HeadersDigest; {
	case !strings.HasPrefix(d, s.headersKeyID):
		return headersUnknown
	case d == s.headersDigest(c.sentHeader):
		return headersSame
	}
	return headersDiffer
}

// sameHeaders is matchHeaders as a Hold's Same wants it: a call whose
// headers cannot be compared is not the same, and its retry is refused
// (409), never handed another call's outcome.
func (s *Server) sameHeaders(c *call) func(pending.Call) bool {
	return func(stored pending.Call) bool { return s.matchHeaders(c, stored) == headersSame }
}

// attachKeys are the keys a retry finds the call by (pending.Call's
// AttachKey and ArgsKey), from the digest of its argsForm.
func attachKeys(r *http.Request, c *call, argsDigest string) (attachKey, argsKey string, a *answer) {
	// A retry finds the call by its AttachKey: the Idempotency-Key when
	// there is one, else what makes calls identical. The call is recorded
	// under both, so that an identical retry without the key finds a call
	// parked with one; a key, when given, is looked up alone (another key
	// is another call, whatever the arguments).
	var tool string
	if t := c.input.Tool; t != nil {
		tool = t.Name
	}
	argsKey = digest("call", c.subject.Principal, c.up.Name, tool, argsDigest)
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return argsKey, argsKey, nil
	}
	// The stored request keeps one key (call.stored): two would be one
	// call to the policy and another to the upstream.
	if len(r.Header.Values("Idempotency-Key")) > 1 {
		return "", "", invalid(http.StatusBadRequest, "Bad Idempotency-Key", "a call carries one Idempotency-Key")
	}
	if len(key) > 255 {
		return "", "", invalid(http.StatusBadRequest, "Bad Idempotency-Key", "an Idempotency-Key is at most 255 characters")
	}
	return digest("idem", c.subject.Principal, c.up.Name, key), argsKey, nil
}

// shownParams is what approvers are shown of a tool call's other params
// (policy.MCP.Params): all of them but a progressToken in _meta, the
// plumbing of the progress notifications toolgate relays (a _meta it
// leaves empty goes too). m is never changed.
func shownParams(m map[string]any) map[string]any {
	meta, ok := m["_meta"].(map[string]any)
	if !ok {
		return m
	}
	if _, has := meta["progressToken"]; !has {
		return m
	}
	out, meta := maps.Clone(m), maps.Clone(meta)
	delete(meta, "progressToken")
	if len(meta) == 0 {
		delete(out, "_meta")
	} else {
		out["_meta"] = meta
	}
	return out
}

// attachParams is what of a tool call's other params an identical retry
// must carry alike: those shown (shownParams) but for toolgate's own. A
// requester's retry that answers toolgate's confirmation input request
// (confirm.go) carries inputResponses["toolgate.confirm"] and the
// requestState toolgate handed out with it: both are addressed to
// toolgate, and the retry attaches to the call it answers. m is never
// changed.
func attachParams(m map[string]any, confirmAnswered bool) map[string]any {
	m = shownParams(m)
	if !confirmAnswered {
		return m
	}
	out := maps.Clone(m)
	delete(out, "requestState")
	if answers, ok := out["inputResponses"].(map[string]any); ok {
		answers = maps.Clone(answers)
		delete(answers, confirmKey)
		if len(answers) == 0 {
			delete(out, "inputResponses")
		} else {
			out["inputResponses"] = answers
		}
	}
	return out
}

// holdFor is how long to hold the agent: pending.hold, shortened by
// "Prefer: wait=N", zero with "Prefer: respond-async" (RFC 7240:
// preferences are comma-separated, may carry ";" parameters, and values
// may be quoted or spaced around "=").
func (s *Server) holdFor(r *http.Request) time.Duration {
	hold := s.cfg.Hold
	for _, v := range r.Header.Values("Prefer") {
		for pref := range strings.SplitSeq(v, ",") {
			pref, _, _ = strings.Cut(pref, ";")
			name, val, _ := strings.Cut(pref, "=")
			name = strings.ToLower(strings.TrimSpace(name))
			val = strings.Trim(strings.TrimSpace(val), `"`)
			switch name {
			case "respond-async":
				return 0
			case "wait":
				if secs, err := strconv.Atoi(val); err == nil && secs >= 0 && time.Duration(secs)*time.Second < hold {
					hold = time.Duration(secs) * time.Second
				}
			}
		}
	}
	return hold
}

func infoOf(pc pending.Call) callinfo.Info { return callinfo.Decode(pc.Info) }
