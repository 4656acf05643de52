package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/toolgate/toolgate/identity"
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
	subject  identity.Subject
	decision policy.Decision
	mcp      *mcpMessage // set for messages to an MCP upstream's mcp_path
	sse      *sseStream  // set once a held MCP call's answer became an SSE stream
}

// serveCall handles every request on the proxy listener: route, identify,
// read, decide, then forward or refuse.
func (s *Server) serveCall(w http.ResponseWriter, r *http.Request) {
	c := &call{id: s.cfg.NewCallID()}
	if s.draining.Load() {
		s.refuse(w, r, c, &callError{
			Status: http.StatusServiceUnavailable, Outcome: outcomeUnavailable,
			Title: "Shutting down", Detail: "toolgate is shutting down; retry on another replica",
		})
		return
	}
	if cerr := checkPath(r); cerr != nil {
		s.refuse(w, r, c, cerr)
		return
	}
	c.up, c.rel = s.route(r.URL.Path)
	if c.up == nil {
		s.refuse(w, r, c, invalid(http.StatusNotFound, "No upstream", "no upstream is configured for this path"))
		return
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
		s.refuse(w, r, c, &callError{Status: http.StatusUnauthorized, Outcome: outcomeUnauthenticated, Title: "Unauthenticated", Detail: detail})
		return
	}
	c.subject = subj
	sanitizeHeaders(r.Header)
	if cerr := s.readCall(r, c); cerr != nil {
		s.refuse(w, r, c, cerr)
		return
	}
	s.decide(w, r, c)
}

// readCall reads the body and builds the policy input: a REST tool call for
// POST {prefix}tools/{tool}, a plain HTTP call for anything else.
func (s *Server) readCall(r *http.Request, c *call) *callError {
	in := &policy.Input{
		CallID:   c.id,
		Kind:     policy.KindHTTP,
		Time:     s.cfg.Now(),
		Mode:     s.cfg.Mode,
		Phase:    policy.PhaseCall,
		Upstream: policy.Upstream{Name: c.up.Name, Protocol: c.up.Protocol},
		Subject:  policySubject(c.subject),
		HTTP:     httpInput(r, c.rel),
	}
	c.input = in
	if c.up.Protocol == policy.KindMCP {
		return s.readMCP(r, c)
	}
	name, isTool := strings.CutPrefix(c.rawRel, "/tools/")
	if !isTool || r.Method != http.MethodPost {
		body, cerr := readBody(r, s.cfg.MaxBodyBytes)
		c.body = body
		return cerr
	}
	if !toolName.MatchString(name) {
		return invalid(http.StatusBadRequest, "Bad tool name", "a tool name is 1 to 128 of A-Z a-z 0-9 _ . : - and starts with a letter, digit or _")
	}
	if cerr := checkJSONContentType(r.Header); cerr != nil {
		return cerr
	}
	body, cerr := readBody(r, s.cfg.MaxBodyBytes)
	if cerr != nil {
		return cerr
	}
	args, cerr := parseArguments(body)
	if cerr != nil {
		return cerr
	}
	c.body = body
	in.Kind = policy.KindREST
	in.Tool = policy.NewTool(name, args, c.up.TargetArgs)
	return nil
}

// decide asks the Decider and acts on its answer.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, c *call) {
	start := s.cfg.Now()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.DecisionTimeout)
	ctx, span := s.tracing.startDecide(ctx)
	d, err := s.cfg.Decider.Decide(ctx, c.input)
	cancel()
	elapsed := s.cfg.Now().Sub(start)
	if err != nil {
		// Fail closed: whatever the Decider returned, an error is a deny.
		// The agent learns only that the policy failed; the log has why.
		s.log.Error("policy error", "call_id", c.id, "error", err)
		d = policy.Decision{Action: policy.Deny, Reasons: []policy.Reason{{ID: "toolgate.policy_error", Message: "policy error (see toolgate's log for call " + c.id + ")"}}}
	}
	c.decision = d
	s.tracing.endDecide(span, r, c, err)
	s.metrics.observeDecision(c, elapsed)
	s.logDecision(ctx, r, c, elapsed, err)
	switch d.Action {
	case policy.Allow:
		s.forward(w, r, c)
	case policy.Ask:
		s.park(w, r, c)
	default:
		if c.mcp != nil {
			s.mcpDenied(w, c)
			return
		}
		writeProblem(w, problem{
			Status: http.StatusForbidden, Title: "Denied by policy",
			Detail: strings.Join(d.Messages(), "; "),
			CallID: c.id, Decision: outcomeDeny, Reasons: d.Messages(), RuleIDs: d.RuleIDs(),
		})
	}
}

// refuse answers a request toolgate will not decide on.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, c *call, e *callError) {
	s.metrics.refused.WithLabelValues(e.Outcome).Inc()
	s.tracing.refused(r, c, e.Outcome)
	s.log.Info("request refused", "call_id", c.id, "status", e.Status, "outcome", e.Outcome, "reason", e.Detail,
		"method", r.Method, "path", r.URL.EscapedPath())
	if e.RPCCode != 0 || (c.mcp != nil && e.Outcome == outcomeInvalid) {
		code := e.RPCCode
		if code == 0 {
			code = rpcInvalidRequest
		}
		writeRPCError(w, e.Status, c, code, e.Outcome, e.Title+": "+e.Detail)
		return
	}
	writeProblem(w, problem{Status: e.Status, Title: e.Title, Detail: e.Detail, CallID: c.id, Decision: e.Outcome})
}
