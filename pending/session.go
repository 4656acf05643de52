package pending

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MCP sessions. An Mcp-Session-Id belongs to the principal that opened it:
// the proxy binds the ID to that principal when the upstream hands it out
// (BindSession) and checks every later use (TouchSession). A binding is
// one opaque string per session ID, kept until its ttl runs out; the ttl
// starts again at every use by its owner.

// A binding's owner is a principal, optionally followed by a NUL and a
// note that goes with the session (what the client declared when it
// opened it). Owners are compared on their principal alone, so a note
// never makes another principal of the same caller; the caller keeps NUL
// out of principals (SplitOwner would otherwise cut one short).
const noteSep = "\x00"

// SplitOwner returns a binding owner's principal and note.
func SplitOwner(owner string) (principal, note string) {
	principal, note, _ = strings.Cut(owner, noteSep)
	return principal, note
}

// sameOwner reports whether two owners name the same principal.
func sameOwner(a, b string) bool {
	pa, _ := SplitOwner(a)
	pb, _ := SplitOwner(b)
	return pa == pb
}

// MaxSessionIDBytes bounds a session ID the stores accept.
const MaxSessionIDBytes = 1024

// ErrTooManySessions: a new binding was refused because the store holds
// Options.MaxSessions bindings that have not expired (MemoryStore), or
// because its principal has Options.MaxSessionsPerPrincipal (a
// *SessionCapError); nothing was bound.
var ErrTooManySessions = errors.New("pending: too many MCP sessions")

// SessionCapError is ErrTooManySessions for one principal at its cap:
// that caller's to wait out, not the store's.
type SessionCapError struct {
	Principal string
	Max       int
}

func (e *SessionCapError) Error() string {
	return fmt.Sprintf("pending: too many MCP sessions: principal %q has %d", e.Principal, e.Max)
}

func (e *SessionCapError) Unwrap() error { return ErrTooManySessions }

func checkSession(id, principal string, ttl time.Duration) error {
	if err := checkSessionID(id); err != nil {
		return err
	}
	if p, _ := SplitOwner(principal); p == "" {
		return fmt.Errorf("%w: binding session %s needs a principal", errInvalid, id)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: binding session %s with ttl %v", errInvalid, id, ttl)
	}
	return nil
}

func checkSessionID(id string) error {
	if id == "" || len(id) > MaxSessionIDBytes {
		return fmt.Errorf("%w: a session ID is 1 to %d bytes, not %d", errInvalid, MaxSessionIDBytes, len(id))
	}
	return nil
}

func noSession(id string) error { return fmt.Errorf("%w: session %s has no owner", ErrNotFound, id) }

// memSession is one binding of a MemoryStore.
type memSession struct {
	owner string
	until time.Time // forgotten from then on
}

// BindSession implements [Store.BindSession].
func (s *MemoryStore) BindSession(ctx context.Context, id, principal string, ttl time.Duration) (string, error) {
	if err := checkSession(id, principal, ttl); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if m, ok := s.session(id, now); ok {
		s.prolong(id, m, principal, now.Add(ttl))
		return m.owner, nil
	}
	p, _ := SplitOwner(principal)
	if !s.principalRoom(p, now) {
		return "", &SessionCapError{Principal: p, Max: s.maxSessionsPer}
	}
	if !s.sessionRoom(now) {
		return "", fmt.Errorf("%w: binding session %s: the store holds %d", ErrTooManySessions, id, s.maxSessions)
	}
	until := now.Add(ttl)
	s.sessions[id] = memSession{owner: principal, until: until}
	if s.sessionsOf[p] == nil {
		s.sessionsOf[p] = map[string]struct{}{}
	}
	s.sessionsOf[p][id] = struct{}{}
	if s.sessionsFirstDue.IsZero() || until.Before(s.sessionsFirstDue) {
		s.sessionsFirstDue = until
	}
	return principal, nil
}

// SessionRoom implements [Store.SessionRoom].
func (s *MemoryStore) SessionRoom(ctx context.Context, principal string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.principalRoom(principal, s.now()), nil
}

// TouchSession implements [Store.TouchSession].
func (s *MemoryStore) TouchSession(ctx context.Context, id, principal string, ttl time.Duration) (string, error) {
	if err := checkSession(id, principal, ttl); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	m, ok := s.session(id, now)
	if !ok {
		return "", noSession(id)
	}
	s.prolong(id, m, principal, now.Add(ttl))
	return m.owner, nil
}

// EndSession implements [Store.EndSession].
func (s *MemoryStore) EndSession(ctx context.Context, id, principal string) error {
	if err := checkSessionID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.session(id, s.now()); ok && sameOwner(m.owner, principal) {
		delete(s.sessions, id)
		s.forgetOf(id, m)
	}
	return nil
}

// SessionOwner implements [Store.SessionOwner].
func (s *MemoryStore) SessionOwner(ctx context.Context, id string) (string, error) {
	if err := checkSessionID(id); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.session(id, s.now())
	if !ok {
		return "", noSession(id)
	}
	return m.owner, nil
}

// session returns the binding of id, forgetting it if it has expired.
// s.mu is held.
func (s *MemoryStore) session(id string, now time.Time) (memSession, bool) {
	m, ok := s.sessions[id]
	if ok && !now.Before(m.until) {
		delete(s.sessions, id)
		s.forgetOf(id, m)
		return memSession{}, false
	}
	return m, ok
}

// forgetOf drops binding m of id from its principal's IDs. s.mu is held.
func (s *MemoryStore) forgetOf(id string, m memSession) {
	p, _ := SplitOwner(m.owner)
	if ids := s.sessionsOf[p]; ids != nil {
		delete(ids, id)
		if len(ids) == 0 {
			delete(s.sessionsOf, p)
		}
	}
}

// prolong makes the binding m of id last until until when principal owns
// it. s.mu is held.
func (s *MemoryStore) prolong(id string, m memSession, principal string, until time.Time) {
	if sameOwner(m.owner, principal) && until.After(m.until) {
		m.until = until
		s.sessions[id] = m
	}
}

// principalRoom reports whether principal p may have one more binding:
// at its cap, the IDs of its bindings that expired or went are dropped
// first (at most the cap of them to look at). s.mu is held.
func (s *MemoryStore) principalRoom(p string, now time.Time) bool {
	ids := s.sessionsOf[p]
	if len(ids) < s.maxSessionsPer {
		return true
	}
	for id := range ids {
		if m, ok := s.session(id, now); !ok || !sameOwner(m.owner, p) {
			delete(ids, id)
		}
	}
	if len(ids) == 0 {
		delete(s.sessionsOf, p)
	}
	return len(ids) < s.maxSessionsPer
}

// sessionRoom drops the expired bindings when the map has doubled since
// the last sweep, or when it is full and one of them may have expired, and
// reports whether a new binding fits under the cap. Sweeps are amortised:
// a full store whose bindings are all live refuses without a sweep.
// s.mu is held.
func (s *MemoryStore) sessionRoom(now time.Time) bool {
	n := len(s.sessions)
	full := n >= s.maxSessions
	if n >= s.sessionsSweepAt || (full && !now.Before(s.sessionsFirstDue)) {
		var first time.Time
		for id, m := range s.sessions {
			switch {
			case !now.Before(m.until):
				delete(s.sessions, id)
				s.forgetOf(id, m)
			case first.IsZero() || m.until.Before(first):
				first = m.until
			}
		}
		s.sessionsFirstDue = first
		s.sessionsSweepAt = max(2*len(s.sessions), 64)
	}
	return len(s.sessions) < s.maxSessions
}
