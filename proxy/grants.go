package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/callinfo"
	"github.com/toolgate/toolgate/internal/keys"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// grantLookupTimeout bounds the store's answer to a grant lookup, one
// round trip. A store that does not answer it in time would not park the
// call either: the ask is then refused at once (call.storeStalled), not
// after a park's own time bound too.
const grantLookupTimeout = time.Second

// applyGrant turns an ask into allow when an approver remembered an
// approval for this caller, tool and target (docs/policy.md, remembered
// grants). It never touches a deny, an ask a hook forced, an ask whose
// reasons name approvers (a grant cannot stand in for them or their
// quorum), or one a reason says must_ask (nothing automatic answers it,
// a grant no more than bypass mode). The grant's ID and approver become the reason, so the decision
// log records every use. A store that cannot answer leaves the ask, and
// so does a grant whose call sent other headers or params than this one
// (grantExtras): its approver was not shown what this call sends.
func (s *Server) applyGrant(r *http.Request, c *call, d policy.Decision) policy.Decision {
	t := c.input.Tool
	if s.cfg.Grants == nil || d.Action != policy.Ask || d.Forced || t == nil || (c.mcp != nil && len(c.mcp.batch) > 0) {
		return d
	}
	if slices.ContainsFunc(d.Reasons, func(r policy.Reason) bool { return r.Approvers != nil || r.MustAsk }) {
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
	ctx, cancel := context.WithTimeout(r.Context(), grantLookupTimeout)
	defer cancel()
	g, err := s.cfg.Grants.FindGrant(ctx, q)
	if err != nil {
		if !errors.Is(err, pending.ErrNotFound) {
			s.log.Warn("could not look up remembered grants; the call asks", "call_id", c.id, "error", err)
			c.storeStalled = timedOut(err)
		}
		return d
	}
	if g.Subject != q.Subject || g.Upstream != q.Upstream || g.Tool != q.Tool || (!g.AnyTarget && !t.SoleTarget(g.Target)) {
		// Never from a store that keeps its contract: checked anyway, a
		// grant covers its own caller, upstream and tool, and a grant for
		// one target no call on another.
		return d
	}
	// Only now, with a grant found: an ask without one costs nothing more.
	sent := c.stored(r, s.fwdHost).Header
	if g.Extras != grantExtras(s.cfg.GrantKey, sent, c.shownParamsForm(), r.URL.RawQuery) {
		d.Reasons = append(slices.Clip(d.Reasons), policy.Reason{
			Message: "grant " + g.ID + " not used: the call sends headers or params its approval did not show",
		})
		return d
	}
	if why := s.retryOfParked(r, c, sent); why != "" {
		// The grant may cover a call already parked (approved with it,
		// or waiting still): its retry attaches to it rather than run
		// beside it, so that the call runs once.
		d.Reasons = append(slices.Clip(d.Reasons), policy.Reason{Message: "grant " + g.ID + " not used: " + why})
		return d
	}
	c.granted = true
	return policy.Decision{Action: policy.Allow, ReadOnly: d.ReadOnly, Reasons: append([]policy.Reason{{
		ID:      "grant:" + g.ID,
		Message: "remembered grant " + g.ID + " by " + g.Approver + " (approved call " + g.CallID + ")",
	}}, d.Reasons...)}
}

// retryOfParked says why c, which sends the headers sent (as stored),
// must ask although a grant covers it, or "": c would attach to a parked
// call, as ask would find it (by its Idempotency-Key, or else as an
// identical call) and send alike (sameHeaders), or that cannot be told
// (the store did not answer, or the key is bad). The ask path then
// attaches, parks or refuses it.
func (s *Server) retryOfParked(r *http.Request, c *call, sent http.Header) string {
	if s.life == nil {
		return ""
	}
	attachKey, _, bad := attachKeys(r, c, digest(c.argsForm(r, c.otherParamsForm())))
	if bad != nil {
		return "its Idempotency-Key is refused"
	}
	ctx, cancel := context.WithTimeout(r.Context(), grantLookupTimeout)
	defer cancel()
	pc, err := s.life.Parked(ctx, pending.Call{ID: c.id, AttachKey: attachKey})
	switch {
	case errors.Is(err, pending.ErrNotFound):
		return ""
	case err != nil:
		s.log.Warn("could not tell whether a granted call is a retry of a parked one; the call asks", "call_id", c.id, "error", err)
		c.storeStalled = timedOut(err)
		return "the store could not tell whether the call is a retry of a parked call"
	}
	c.sentHeader = sent
	switch s.matchHeaders(c, pc) {
	case headersSame:
		return "the call is a retry of parked call " + pc.ID + ", which it attaches to"
	case headersUnknown:
		// It may be that call's retry: asked, it is refused (409) rather
		// than run a second time.
		return "parked call " + pc.ID + ", which the call would be a retry of, ended under another key or release and cannot be compared with it"
	}
	if r.Header.Get("Idempotency-Key") != "" {
		// Found by its key: a key names one call, and ask refuses this
		// one (409) whatever a grant would allow.
		return "its Idempotency-Key names parked call " + pc.ID + ", which sends other headers"
	}
	// Found as identical, but another call, whose headers differ: its own
	// grant covers it.
	return ""
}

// GrantKey is the key of grants' digests (Config.GrantKey) from the
// approvals secret: derived, as the seals' keys are, so that no digest an
// approver can read (grant_extras in the approvals API) is keyed with the
// secret that signs approval links. Nil for no secret.
func GrantKey(secret []byte) []byte {
	if len(secret) == 0 {
		return nil
	}
	return keys.Derive(secret, "toolgate grant extras v1")
}

// grantExtras is what a grant is bound to beyond its scope
// (callinfo.Info.GrantExtras): a digest of the headers the call sends
// upstream (h, as stored) but the usual ones (callinfo.UsualHeader,
// which differ from call to call) and toolgate's own, of an MCP tool
// call's other params as approvers are shown them (shownParamsForm), and
// of its query string (sent beside the arguments
// with tool_query, and shown in the request line). An approver sees
// exactly these on the approval page; a later call that sends one more,
// one fewer or another value is not the call approved. That holds for a header named like a credential too,
// whose value the approver saw only the size of: an agent may give any
// header such a name, and what it carries is not the approver's to
// guess. So the digest is keyed (an HMAC with key): a grant's store never
// holds what a guess of such a value could be checked against. A rotated
// token, or a new key, asks again. Without a key (no approvals secret, so
// no grants), such headers count by name and number of values. "" when
// the call sends none of them, so that a grant made before grants were
// bound (no extras) covers only such calls.
func grantExtras(key []byte, h http.Header, params, query string) string {
	names := make([]string, 0, len(h))
	var baggage []string
	for k := range h {
		if k == "Baggage" {
			// Bound but for a tracer's own members, new with every trace.
			if baggage = boundBaggage(h[k]); len(baggage) == 0 {
				continue
			}
		}
		if !forwardedHeader(k) && !callinfo.UsualHeader(k) {
			names = append(names, k)
		}
	}
	if len(names) == 0 && len(params) == 0 && len(query) == 0 {
		return ""
	}
	sort.Strings(names)
	// Length-prefixed, as the stored request (appendField): no value,
	// whatever its bytes, reads as another header or the params.
	b := binary.AppendUvarint(nil, uint64(len(names)))
	for _, k := range names {
		vs := h[k]
		if k == "Baggage" {
			vs = baggage
		}
		b = appendField(b, k)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		if key != nil || !hiddenHeader(k) {
			for _, v := range vs {
				b = appendField(b, v)
			}
		}
	}
	if params != "" {
		b = appendField(b, params)
	}
	if query != "" {
		// Tagged, so a query is never read as params: a grant made
		// before queries were bound (none) covers only calls without.
		b = appendField(b, "?")
		b = appendField(b, query)
	}
	if key == nil {
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))
}

// boundBaggage is what of a W3C Baggage header (its values, as sent) a
// grant and a retry are bound to: its members but the few Sentry's SDKs
// add new with every trace (sentryPerTrace), each at most once, in its own
// shape and without padding; the application's (a tenant, a mesh's
// routing key) stay. Only a header of one line, within the strictest
// propagator's limits (OpenTelemetry Go's: 64 members, 8192 bytes), is
// read so: one sent in several lines (an upstream may read the first
// alone) or past the limits (a propagator throws it away whole) is bound
// whole, as sent, so that such members cannot take the bound ones out of
// what the upstream reads. nil for none left.
func boundBaggage(vs []string) []string {
	if len(vs) != 1 || strings.Count(vs[0], ",") >= maxBaggageMembers || len(vs[0]) > maxBaggageBytes {
		return vs
	}
	var kept []string
	seen := map[string]bool{}
	for m := range strings.SplitSeq(vs[0], ",") {
		trimmed := strings.TrimSpace(m)
		if trimmed == "" {
			continue
		}
		// As Sentry writes it: after ", " at most.
		k, val, ok := strings.Cut(trimmed, "=")
		if ok && len(m)-len(trimmed) <= 1 && !seen[k] && sentryPerTrace[k] != nil && sentryPerTrace[k].MatchString(val) {
			seen[k] = true
			continue
		}
		kept = append(kept, trimmed)
	}
	if len(kept) == 0 {
		return nil
	}
	return []string{strings.Join(kept, ",")}
}

// The strictest Baggage limits among propagators (OpenTelemetry Go's),
// past which a header is dropped whole.
const (
	maxBaggageMembers = 64
	maxBaggageBytes   = 8192
)

// sentryPerTrace are the Baggage members Sentry's SDKs write anew for
// every trace, each with the shape of its value: a trace ID, a sampling
// decision and its rate and random number. Keys are case-sensitive, as in
// W3C Baggage; any other sentry- member (environment, release, public
// key: the same from call to call) stays bound.
var sentryPerTrace = map[string]*regexp.Regexp{
	"sentry-trace_id":    regexp.MustCompile(`^[0-9a-f]{32}$`),
	"sentry-sampled":     regexp.MustCompile(`^(true|false)$`),
	"sentry-sample_rate": regexp.MustCompile(`^[0-9](\.[0-9]{1,20})?$`),
	"sentry-sample_rand": regexp.MustCompile(`^[0-9](\.[0-9]{1,20})?$`),
}

// otherParamsForm is an MCP tool call's other params as an identical
// retry must carry them alike (attachParams), in canonical form; "" for
// none, and for any other call.
func (c *call) otherParamsForm() string {
	if c.mcp == nil || c.input.MCP == nil {
		return ""
	}
	if key := attachParams(c.input.MCP.Params, c.mcp.confirmAnswered); len(key) > 0 {
		return canonicalArgs(key)
	}
	return ""
}

// shownParamsForm is an MCP tool call's other params as approvers are
// shown them (shownParams), in canonical form: what a grant binds. Unlike
// the attach key it keeps a confirmation's answer and requestState, which
// a call that a grant lets through sends to the upstream.
func (c *call) shownParamsForm() string {
	if c.mcp == nil || c.input.MCP == nil {
		return ""
	}
	if !c.mcp.confirmAnswered {
		return c.otherParamsForm()
	}
	if shown := shownParams(c.input.MCP.Params); len(shown) > 0 {
		return canonicalArgs(shown)
	}
	return ""
}
