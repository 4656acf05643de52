package proxy

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/identity"
	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/policy"
)

// call is one request on its way through the proxy.
type call struct {
	id       string
	up       *upstream
	rel      string // path relative to the upstream, decoded
	rawRel   string // the same, as sent
	input    *policy.Input
	body     []byte // exactly what the policy saw and the upstream gets
	bodyHeld int64  // what the call holds of the body budget until decided, or forwarded
	subject  identity.Subject
	decision policy.Decision
	mode     string      // the permission mode the call is decided under
	lists    *listBudget // what filtering its list answers may still cost (mcplist.go)
	// filtered is true for a call whose answer toolgate filters for its
	// caller (wholeAnswers): the upstream's 1xx answers are not passed on.
	filtered bool
	// granted: a remembered grant turned the call's ask into allow
	// (applyGrant); it is sent as its approval showed it (outboundHeader).
	granted bool
	// sentHeader is the header the call sends (as stored), once it is
	// parked or a grant covers it: a retry that finds a parked call must
	// send it alike (matchHeaders, which weighs it then, and only then).
	sentHeader http.Header
	// storeStalled: the store did not answer the grant lookup in time,
	// so an ask is refused at once rather than parked (applyGrant).
	storeStalled bool
	hooks        *hookRecord // what the hooks did, when any was asked
	mcp          *mcpMessage // set for messages to an MCP upstream's mcp_path
	// out renders the call's answer; the call's protocol picks it when
	// the call is read.
	out responder
	// upstreamErr is what the reverse proxy met, if anything, instead of
	// an upstream's answer.
	upstreamErr error
	// forwarding is the budget the call holds a share of once decided:
	// as the upstream's answer arrives, before its body is passed on,
	// screenAnswer has the call keep only its body's bytes of it
	// (keepOnlyBody); nil: nothing to do.
	forwarding *bodyBudget
	// aw is the agent's answer as the reverse proxy writes it (forwardWith):
	// part of the call, so a forward allocates no writer of its own.
	aw answerWriter
}

// serveCall handles every request on the proxy listener.
func (s *Server) serveCall(w http.ResponseWriter, r *http.Request) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	c := &call{id: s.cfg.NewCallID(), out: restResponder{}}
	s.respond(w, c, s.handle(w, r, c))
}

// handle takes a call from request to answer: admit, decide, then
// forward, ask or deny.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, c *call) answer {
	// On every way out. A call that is forwarded holds its share of the
	// body budget while its body and parsed input live: a slow upstream
	// would otherwise let one caller keep any number of them (up to
	// max_forwards_per_subject). Once the upstream answers, the parsed
	// input is dropped and the call holds only its body's bytes (the
	// outbound request keeps them) until the answer is passed on
	// (keepOnlyBody). An ask or a deny gives it all back once decided,
	// below.
	defer s.releaseBody(c)
	if a := s.admit(r, c); a != nil {
		s.refused(r, c, *a)
		return *a
	}
	if c.mcp != nil && c.mcp.ownResponse {
		// The client's answer to toolgate's own elicitation: it decides
		// nothing (confirm.go), and no upstream asked for it.
		w.WriteHeader(http.StatusAccepted)
		return answer{kind: written}
	}
	d := s.decide(r, c)
	c.forwarding = s.bodies
	if c.up.DryRun {
		// Dry run: the decision is computed, logged and counted, and the
		// call goes through whatever it is (docs/policy.md, dry run).
		s.metrics.dryRun.WithLabelValues(d.Action.String(), c.up.Name).Inc()
		return s.forward(w, r, c)
	}
	switch d.Action {
	case policy.Allow:
		if a, ok := s.taskAnswer(w, r, c); ok {
			return a // a task of toolgate's own: the upstream never knew it
		}
		if a, ok := s.cancelHeld(w, r, c); ok {
			return a // a request held here: the upstream never got it
		}
		return s.forward(w, r, c)
	case policy.Ask:
		s.releaseBody(c) // a held ask keeps its stored request, not these
		return s.ask(w, r, c)
	}
	s.releaseBody(c)
	return denied(c.decision)
}

// admit routes, identifies and reads the call; a non-nil answer refuses
// it before any decision.
func (s *Server) admit(r *http.Request, c *call) *answer {
	if s.draining.Load() {
		a := unavailable("Shutting down", "toolgate is shutting down; retry on another replica")
		a.retryAfter = "1" // a load balancer drops this replica within seconds
		return &a
	}
	if r.Method == http.MethodConnect {
		// A tunnel would carry bytes no policy sees.
		a := invalid(http.StatusMethodNotAllowed, "Method not allowed", "toolgate does not tunnel (CONNECT)")
		a.allow = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
		return a
	}
	if a := checkFields(r); a != nil {
		return a
	}
	query, a := checkPath(r)
	if a != nil {
		return a
	}
	c.up, c.rel = s.route(r.URL.Path)
	if c.up == nil {
		return invalid(http.StatusNotFound, "No upstream", "no upstream is configured for this path")
	}
	c.rawRel = r.URL.EscapedPath()
	if p := c.up.Prefix; p != "/" {
		// The prefix holds only unreserved characters, so it is spelled
		// the same in the raw and the decoded path.
		if strings.HasPrefix(c.rawRel, p) {
			c.rawRel = "/" + c.rawRel[len(p):]
		} else {
			c.rawRel = "/" // the path was the prefix without its slash
		}
	}
	subj, err := s.cfg.Auth.Authenticate(r)
	if err != nil {
		detail := "missing or bad credentials"
		if errors.Is(err, identity.ErrUnauthenticated) {
			detail = err.Error()
		}
		a := unauthenticated(detail)
		return &a
	}
	c.subject = subj
	if s.placeID != nil {
		// Before anything reads the ID (the policy input, the decision log).
		c.id = s.placeID(c.id, subj.Principal)
	}
	if c.mode, a = s.modeOf(r, c); a != nil {
		return a
	}
	sanitizeHeaders(r.Header, c.up.StripHeaders)
	if a := s.readCall(r, c, query); a != nil {
		return a
	}
	bodyHeaders(c.input.HTTP.Headers, len(c.body))
	if a := s.checkSession(r, c); a != nil {
		return a
	}
	return checkRepeated(r.Header)
}

// readCall reads the body and builds the policy input: a REST tool call for
// POST {prefix}tools/{tool}, a plain HTTP call for anything else.
func (s *Server) readCall(r *http.Request, c *call, query url.Values) *answer {
	in := &policy.Input{
		CallID:   c.id,
		Kind:     policy.KindHTTP,
		Time:     s.cfg.Now(),
		Mode:     c.mode,
		Phase:    policy.PhaseCall,
		Upstream: policy.Upstream{Name: c.up.Name, Protocol: c.up.Protocol},
		Subject:  policySubject(c.subject),
		HTTP:     httpInput(r, c.rel, query),
	}
	c.input = in
	if c.up.Protocol == policy.KindMCP {
		return s.readMCP(r, c, query)
	}
	name, isTool := strings.CutPrefix(c.rawRel, "/tools/")
	if !isTool && (toolsInAnotherCase(c.rawRel) || toolsInAnotherCase(c.rel)) {
		// A router that matches paths without regard to case (Express's
		// and ASP.NET Core's default) runs /Tools/x as the tool x, which
		// read as plain HTTP would reach it undecided as a tool call.
		return invalid(http.StatusBadRequest, "Not the tools prefix", "tool calls are POST /tools/{name}, the prefix spelt exactly so")
	}
	if isTool && r.Method != http.MethodPost {
		// A router may run /tools/{name} for any method (a Go pattern
		// without one, Flask's for HEAD): read as a plain HTTP call, the
		// tool would run with no tool, target or arguments judged.
		a := invalid(http.StatusMethodNotAllowed, "Method not allowed", "a tool call is POST /tools/{name}")
		a.allow = http.MethodPost
		return a
	}
	if a := checkOverrideQuery(query); a != nil {
		return a
	}
	if !isTool {
		return s.readPlain(r, c)
	}
	if !toolName.MatchString(name) {
		return invalid(http.StatusBadRequest, "Bad tool name", "a tool name is 1 to 128 of A-Z a-z 0-9 _ . : - and starts with a letter, digit or _")
	}
	if a := checkJSONContentType(r.Header); a != nil {
		return a
	}
	body, a := s.readBody(r, c)
	if a != nil {
		return a
	}
	args, a := s.parseArguments(body)
	if a != nil {
		return a
	}
	if a := checkToolQuery(c.up, r.URL.RawQuery, in.HTTP.Query, args); a != nil {
		return a
	}
	if err := policy.CheckArgNames(args); err != nil {
		return badArgument("Ambiguous argument", err)
	}
	if a := checkOverrideArgs(args); a != nil {
		return a
	}
	if err := policy.CheckControl(args, c.up.TargetArgs); err != nil {
		return badArgument("Control character", err)
	}
	if err := policy.CheckTargetSpelling(args, c.up.TargetArgs, c.up.fold); err != nil {
		return badArgument("Ambiguous target", err)
	}
	if err := policy.CheckTargets(args, c.up.TargetArgs); err != nil {
		return invalid(http.StatusBadRequest, "Too many targets", err.Error())
	}
	c.body = body
	in.Kind = policy.KindREST
	in.Tool = policy.NewToolWith(name, args, c.up.TargetArgs, c.up.fold)
	return nil
}

// decide asks the Decider, records its answer in c and returns it.
func (s *Server) decide(r *http.Request, c *call) policy.Decision {
	start := s.cfg.Now()
	// Hooks first, each bounded by its own timeout (the Decider bounds the
	// policy's).
	hd := s.runHooks(r.Context(), c)
	ctx, span := s.tracing.startDecide(r.Context())
	var (
		d   policy.Decision
		err error
	)
	if hd != nil {
		d = *hd // a hook's deny ends the call: no policy can allow it
	} else {
		d, err = s.cfg.Decider.Decide(ctx, c.input)
	}
	elapsed := s.cfg.Now().Sub(start)
	if err != nil {
		// Fail closed: whatever the Decider returned, an error is a deny.
		// The agent learns only that the policy failed; the log has why.
		s.log.Error("policy error", "call_id", c.id, "error", err)
		d = policyFailed(c.id)
	}
	if c.mcp != nil && len(c.mcp.batch) > 0 {
		d = s.decideBatch(r.Context(), c, d)
	}
	if c.mcp != nil && d.Action == policy.Ask && (filteredList(c.mcp.method) || r.Method == http.MethodGet) {
		// A list's answer, and the server's stream (a GET, which may
		// replay one), are filtered for their caller as they are
		// relayed; a parked one would run, and be answered, the way any
		// approved call is, unfiltered.
		what := c.mcp.method
		if r.Method == http.MethodGet {
			what = "the MCP stream (GET)"
		}
		d.Action = policy.Deny
		d.Reasons = append(d.Reasons, policy.Reason{ID: "toolgate.list_ask", Message: what + " cannot wait for approval: its answer is filtered for its caller"})
	}
	d = s.applyGrant(r, c, d)
	c.decision = d
	s.tracing.endDecide(span, r, c, err)
	s.metrics.observeDecision(c, elapsed)
	s.logDecision(ctx, r, c, elapsed, err)
	return d
}

// refused records a request toolgate answers before any decision.
func (s *Server) refused(r *http.Request, c *call, a answer) {
	s.metrics.refused.WithLabelValues(a.outcome).Inc()
	s.tracing.refused(r, c, a.outcome)
	s.log.Info("request refused", "call_id", c.id, "status", a.status, "outcome", a.outcome, "reason", logCut(cmp.Or(a.logDetail, a.detail), 1024),
		"method", logCut(r.Method, 64), "path", logCut(r.URL.EscapedPath(), 512))
}

// logCut is s for a log line: at most max bytes, at a rune boundary, and
// when cut, with how long it was. A refused request is logged whoever sent
// it, credentials or not: its path (up to the header limit) would otherwise
// make each line as long as the request.
func logCut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return callinfo.CutTo(s, max) + " (" + strconv.Itoa(len(s)) + " bytes)"
}

// toolsInAnotherCase reports whether rel's first segment is "tools" in
// another case, or with a character that folds to one of its letters
// (checked as sent and decoded: "/toolſ" arrives as "/tool%C5%BF").
func toolsInAnotherCase(rel string) bool {
	first, _, _ := strings.Cut(strings.TrimPrefix(rel, "/"), "/")
	return first != "tools" && strings.EqualFold(first, "tools")
}

// readPlain reads the body of a plain HTTP call (not a tool call, not an
// MCP endpoint's message), of a REST or an MCP upstream alike: the policy
// does not read it, so what an upstream could read in it beyond its
// bytes is refused. The query's override is checkOverrideQuery's.
func (s *Server) readPlain(r *http.Request, c *call) *answer {
	body, a := s.readBody(r, c)
	if a == nil && len(body) > 0 && bodyless(r.Method) {
		// Content has no defined meaning on these methods (RFC 9110),
		// and an upstream that does not read it would take it for the
		// next request on the connection: one no policy decided.
		a = invalid(http.StatusBadRequest, "Body not allowed", "a "+r.Method+" request carries no body")
	}
	if a == nil {
		a = checkOverrideBody(r.Header, body)
	}
	c.body = body
	return a
}

// bodyless reports whether a plain HTTP call of method may not carry a
// body.
func bodyless(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}
