package proxy

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/toolgate/toolgate/pending"
)

// An MCP client cancels a request it sent with notifications/cancelled
// (params.requestId). For a tools/call toolgate holds parked, toolgate is
// the receiver: the upstream never got the request. So such a notification
// cancels the parked call, as DELETE on its status URL does, and goes no
// further. Without this, a session-era client (whose closed stream leaves
// the call parked) had no way within MCP to stop a call, and an approver
// could still run it after the user pressed stop.
//
// Only requests held on this replica, in a session, are known here. A
// cancel that reaches another replica goes to the upstream as before, and
// the call stays parked until it is decided, cancelled through its status
// URL, or expires. Without a session (the 2026-07-28 revision, where
// closing the stream cancels; a server that mints none) every client of
// one API key numbers its requests alike, and one's cancel of its own
// running request would cancel another's parked call.

// heldRequests maps an MCP request held waiting for a decision (its
// principal, session and JSON-RPC id) to the parked call it waits for,
// with how many requests so keyed hold it (an identical retry attaches).
type heldRequests struct {
	mu sync.Mutex
	m  map[string]*heldCall
	// byCall counts the requests held on each call, whatever their key:
	// another session's identical call attaches to it too.
	byCall map[string]int
}

type heldCall struct {
	id      string
	holders int
}

// cancelsID is the request a notifications/cancelled names, or nil.
func (m *mcpMessage) cancelsID() []byte {
	if m == nil {
		return nil
	}
	return m.cancels
}

// cancelledID is the request msg, a notifications/cancelled, names (its
// params.requestId, as a request's id is kept), or nil.
func cancelledID(msg map[string]any, method string) []byte {
	if method != "notifications/cancelled" {
		return nil // every other message: nothing more to look up
	}
	params, _ := msg["params"].(map[string]any)
	if rid := params["requestId"]; rid != nil {
		return rpcIDJSON(rid)
	}
	return nil
}

func mcpHeldKey(principal, session string, rpcID []byte) string {
	return principal + "\x00" + session + "\x00" + string(rpcID)
}

func (h *heldRequests) add(key, callID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m, h.byCall = map[string]*heldCall{}, map[string]int{}
	}
	h.byCall[callID]++
	if e := h.m[key]; e != nil && e.id == callID {
		e.holders++
		return
	}
	h.m[key] = &heldCall{id: callID, holders: 1}
}

// remove forgets one holder of key, and key with its last.
func (h *heldRequests) remove(key, callID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[key]; e != nil && e.id == callID {
		if e.holders--; e.holders == 0 {
			delete(h.m, key)
		}
	}
	if h.byCall[callID]--; h.byCall[callID] <= 0 {
		delete(h.byCall, callID)
	}
}

// get returns the call key's requests wait for, and whether requests of
// other keys wait for it too (shared).
func (h *heldRequests) get(key string) (callID string, shared, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[key]; e != nil {
		return e.id, h.byCall[e.id] > e.holders, true
	}
	return "", false, false
}

// holding returns the Held hook of an MCP request's ask, which records the
// call it waits for, and then calls next (nil: nothing more); and the
// function that forgets it once the request is answered.
func (s *Server) holding(r *http.Request, c *call, next func(pending.Call)) (held func(pending.Call), done func()) {
	session := r.Header.Get(headerSessionID)
	if c.mcp == nil || c.mcp.id == nil || session == "" {
		return next, func() {}
	}
	key := mcpHeldKey(c.subject.Principal, session, c.mcp.id)
	var callID string
	return func(pc pending.Call) {
			callID = pc.ID
			s.heldMCP.add(key, callID)
			if next != nil {
				next(pc)
			}
		}, func() {
			if callID != "" {
				s.heldMCP.remove(key, callID)
			}
		}
}

// cancellable reports whether a cancel in a batch would cancel a call held
// here: one that still waits for a decision (a cancel of a call that runs
// goes to the upstream, in a batch as alone).
func (s *Server) cancellable(r *http.Request, c *call, rpcID []byte) bool {
	id, _, ok := s.heldFor(r, c, rpcID)
	if !ok || s.cfg.Pending == nil {
		return false
	}
	pc, err := s.cfg.Pending.Get(r.Context(), id)
	return err != nil || pc.State == pending.Waiting // unknown: refused, the safer reading
}

// heldFor returns the call a request held here waits for, when rpcID
// names one in c's session.
func (s *Server) heldFor(r *http.Request, c *call, rpcID []byte) (callID string, shared, ok bool) {
	session := r.Header.Get(headerSessionID)
	if s.life == nil || rpcID == nil || session == "" {
		return "", false, false
	}
	return s.heldMCP.get(mcpHeldKey(c.subject.Principal, session, rpcID))
}

// cancelHeld answers a notifications/cancelled that names a request held
// here: its parked call is cancelled and nothing is forwarded. ok is false
// for any other message, and for a call already decided (it may be
// running: the upstream hears the cancel).
func (s *Server) cancelHeld(w http.ResponseWriter, r *http.Request, c *call) (answer, bool) {
	id, shared, ok := s.heldFor(r, c, c.mcp.cancelsID())
	if !ok {
		return answer{}, false
	}
	if shared {
		// Another request (another session's identical call) waits for
		// the call too: its client did not cancel. The call stays
		// parked, and this request's answer is one its client ignores.
		s.log.Info("MCP client cancelled a request whose parked call others wait for: the call stays parked", "call_id", id)
		w.WriteHeader(http.StatusAccepted)
		return answer{kind: written}, true
	}
	if _, err := s.life.Cancel(context.WithoutCancel(r.Context()), c.subject.Principal, id); err != nil {
		if se := (*pending.StateError)(nil); errors.As(err, &se) || errors.Is(err, pending.ErrNotFound) {
			return answer{}, false
		}
		s.log.Warn("cannot cancel a parked call its MCP client cancelled", "call_id", id, "error", err)
		return unavailable("Store unavailable", "the parked call could not be cancelled; cancel it through its status URL"), true
	}
	s.log.Info("parked call cancelled by its MCP client (notifications/cancelled)", "call_id", id)
	w.WriteHeader(http.StatusAccepted)
	return answer{kind: written}, true
}
