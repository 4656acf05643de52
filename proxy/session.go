package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// MCP sessions belong to the principal that opened them. When an MCP
// upstream's answer on mcp_path carries an Mcp-Session-Id (the answer to
// initialize), toolgate binds that ID to the caller's principal in the
// store; every later request to mcp_path that carries an Mcp-Session-Id
// must be the binding's owner's, else it is answered 404 as for an unknown
// session, before any decision, and nothing reaches the upstream. Every
// session is created through toolgate, so a session the store does not
// know is refused too (fail closed), as is any session when the store
// cannot be reached (503).
//
// A toolgate without a store (Config.Pending nil) binds nothing: its
// sessions are the upstream's alone, and whoever holds a session ID can
// use it. Callers without credentials all share the principal "anonymous",
// and so each other's sessions.

// sessionTTL is how long a binding lasts after its owner last used it.
const sessionTTL = 24 * time.Hour

const headerSessionID = "Mcp-Session-Id"

// sessionGuard binds and checks the sessions of one MCP upstream.
type sessionGuard struct {
	store pending.Store
	log   *slog.Logger
}

// sessionGuard returns u's guard, or nil when u's sessions are not bound:
// it is not an MCP upstream, or there is no store.
func (s *Server) sessionGuard(u Upstream) *sessionGuard {
	if u.Protocol != policy.KindMCP || s.cfg.Pending == nil {
		return nil
	}
	return &sessionGuard{store: s.cfg.Pending, log: s.log}
}

// checkSession refuses a request to mcp_path whose Mcp-Session-Id is not
// the caller's (404, as for an unknown session) and prolongs the binding
// of one that is. Several session headers, or an ID toolgate would never
// have bound, are unknown sessions too.
func (s *Server) checkSession(r *http.Request, c *call) *answer {
	g := c.up.sessions
	ids, has := r.Header[headerSessionID]
	if g == nil || c.mcp == nil {
		return nil
	}
	if !has {
		return g.roomForSession(r, c)
	}
	if len(ids) != 1 || !validSessionID(ids[0]) {
		return unknownSession()
	}
	principal := c.subject.Principal
	if !validPrincipal(principal) {
		return unknownSession()
	}
	owner, err := g.store.TouchSession(r.Context(), ids[0], principal, sessionTTL)
	bound, note := pending.SplitOwner(owner)
	switch {
	case errors.Is(err, pending.ErrNotFound):
		return unknownSession()
	case err != nil:
		g.log.Error("session store unavailable; MCP request refused", "call_id", c.id, "error", err)
		a := storeUnavailable("Session store unavailable", "the store that keeps MCP sessions could not be reached; retry later")
		return &a
	case bound != principal:
		g.log.Warn("MCP session of another principal refused", "call_id", c.id, "principal", principal, "owner", bound)
		return unknownSession()
	}
	if c.mcp.version < statelessEra {
		// What the client declared when it opened the session.
		c.mcp.urlElicit = note == noteURLElicitation
	}
	return nil
}

// roomForSession refuses an initialize without a session from a caller
// that holds as many sessions as it may: the upstream would open one
// more for it, which toolgate could not bind, and so which nobody could
// use or end (a caller opening sessions in a loop would fill the
// upstream's memory). Concurrent initializes may each pass; binding the
// sessions they open still counts them.
func (g *sessionGuard) roomForSession(r *http.Request, c *call) *answer {
	if c.mcp.method != "initialize" || !validPrincipal(c.subject.Principal) {
		return nil
	}
	room, err := g.store.SessionRoom(r.Context(), c.subject.Principal)
	switch {
	case err != nil:
		g.log.Error("session store unavailable; MCP request refused", "call_id", c.id, "error", err)
		a := storeUnavailable("Session store unavailable", "the store that keeps MCP sessions could not be reached; retry later")
		return &a
	case !room:
		g.log.Info("MCP initialize refused: its principal holds too many sessions", "call_id", c.id, "principal", c.subject.Principal)
		a := tooManySessions()
		return &a
	}
	return nil
}

// tooManySessions refuses a session to a caller at its cap.
func tooManySessions() answer {
	return answer{
		kind: refusal, status: http.StatusTooManyRequests, outcome: outcomeUnavailable, retryAfter: "60",
		title:  "Too many MCP sessions",
		detail: "you hold too many MCP sessions; reuse one you hold, or end those you are done with (DELETE); each lasts until 24 h after its last use",
	}
}

// noteURLElicitation is the note of a session whose client declared
// URL-mode elicitation in initialize (confirm.go).
const noteURLElicitation = "elicit-url"

// validPrincipal reports whether principal can own a session: a NUL
// would end it early in the store (pending.SplitOwner), and so make it
// another principal's prefix.
func validPrincipal(principal string) bool { return !strings.Contains(principal, "\x00") }

func unknownSession() *answer {
	return invalid(http.StatusNotFound, "Unknown session", "no MCP session with this Mcp-Session-Id is yours")
}

// validSessionID reports whether id is an Mcp-Session-Id as the protocol
// spells them (visible ASCII) and the store keeps them.
func validSessionID(id string) bool {
	if id == "" || len(id) > pending.MaxSessionIDBytes {
		return false
	}
	for i := range len(id) {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// errSessionTaken: the upstream handed out a session ID bound to another
// principal (or one toolgate cannot bind); the answer is not passed on.
var errSessionTaken = errors.New("the upstream handed out an Mcp-Session-Id that cannot be the caller's")

// sessionStoreError is a store failure met while binding a session.
type sessionStoreError struct{ err error }

func (e *sessionStoreError) Error() string { return "binding an MCP session: " + e.err.Error() }
func (e *sessionStoreError) Unwrap() error { return e.err }

// bindSession binds the Mcp-Session-Id of an MCP upstream's answer on
// mcp_path to the caller's principal (screenAnswer calls it), and forgets
// the session a DELETE ended. The ID the request carried was checked, and
// its binding prolonged, before the request was forwarded. An answer handing out a session that is another
// principal's, or that cannot be bound, is not passed on.
func bindSession(res *http.Response) error {
	if res.Request == nil {
		return nil
	}
	c, ok := res.Request.Context().Value(callKey{}).(*call)
	if !ok || c.mcp == nil || c.up.sessions == nil {
		return nil
	}
	asked := res.Request.Header.Get(headerSessionID)
	principal := c.subject.Principal
	if res.Request.Method == http.MethodDelete && asked != "" && res.StatusCode/100 == 2 {
		// The upstream ended the caller's session (checked as the
		// caller's before it was forwarded): its binding goes, and no
		// longer counts against the caller's cap. A store that cannot
		// forget it keeps it until it would have expired.
		if err := c.up.sessions.store.EndSession(res.Request.Context(), asked, principal); err != nil {
			c.up.sessions.log.Warn("could not forget an ended MCP session; it counts until it expires", "call_id", c.id, "error", err)
		}
		return nil
	}
	if !validPrincipal(principal) {
		return fmt.Errorf("%w: the caller's principal holds a NUL", errSessionTaken)
	}
	owner := principal
	if c.mcp.method == "initialize" && c.mcp.urlElicit {
		owner += "\x00" + noteURLElicitation
	}
	for _, id := range res.Header.Values(headerSessionID) {
		if id == asked && id != "" {
			continue
		}
		if !validSessionID(id) {
			return fmt.Errorf("%w: %d bytes, not visible ASCII", errSessionTaken, len(id))
		}
		bound, err := c.up.sessions.store.BindSession(res.Request.Context(), id, owner, sessionTTL)
		if err != nil {
			return &sessionStoreError{err}
		}
		if p, _ := pending.SplitOwner(bound); p != principal {
			return fmt.Errorf("%w: it is bound to %s", errSessionTaken, p)
		}
	}
	return nil
}

// tooManyStreams refuses an MCP GET stream of a principal that already
// holds limits.max_held_per_subject requests open on this replica.
func tooManyStreams() answer {
	return answer{
		kind: refusal, status: http.StatusTooManyRequests, outcome: outcomeUnavailable, retryAfter: "5",
		title:  "Too many requests held open",
		detail: "you hold as many requests open on this replica as you may (asks, long polls, MCP streams); close a stream you no longer read",
	}
}

// tooManyForwards refuses an allowed call whose principal has
// limits.max_forwards_per_subject calls being forwarded already: nothing
// reached the upstream.
func tooManyForwards() answer {
	return answer{
		kind: refusal, status: http.StatusTooManyRequests, outcome: outcomeUnavailable, retryAfter: "1",
		title:  "Too many calls in flight",
		detail: "as many of your calls are being forwarded by this replica as you may have at once; retry when one is answered",
	}
}

// sessionFailed answers a forwarded call whose session could not be bound
// because the store failed: 503, like a store outage on the way in; 429
// for a caller at its cap.
func (s *Server) sessionFailed(c *call, err error) (answer, bool) {
	var se *sessionStoreError
	if !errors.As(err, &se) || errors.Is(err, context.Canceled) {
		return answer{}, false // upstreamFailed: nobody is left to answer
	}
	if capErr := (*pending.SessionCapError)(nil); errors.As(err, &capErr) {
		s.log.Info("MCP session refused: its principal holds too many", "call_id", c.id, "error", err)
		return tooManySessions(), true
	}
	s.log.Error("session store unavailable; the upstream's answer was not passed on", "call_id", c.id, "error", err)
	return storeUnavailable("Session store unavailable", "the MCP session could not be recorded; retry later"), true
}
