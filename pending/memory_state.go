package pending

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

func (s *MemoryStore) list(now time.Time, st State, limit int, keep func(*memCall) bool) []Call {
	var out []Call
	for _, m := range s.selectInState(now, st, limit, false, keep) {
		out = append(out, m.c.out())
	}
	return out
}

// selectInState returns up to limit calls in state st that keep selects,
// oldest in the state first, or newest first; waiting calls by their
// expiry instead, as in the Redis store, whose waiting index is its list
// of deadlines (with one ttl, the same order). s.mu is held.
func (s *MemoryStore) selectInState(now time.Time, st State, limit int, newestFirst bool, keep func(*memCall) bool) []*memCall {
	var ms []*memCall
	for _, m := range s.inStateNow(st, now) {
		if keep(m) {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b *memCall) int {
		if newestFirst {
			a, b = b, a
		}
		if st == Waiting {
			return cmp.Or(a.c.ExpiresAt.Compare(b.c.ExpiresAt), cmp.Compare(a.seq, b.seq))
		}
		return cmp.Or(a.since.Compare(b.since), cmp.Compare(a.seq, b.seq))
	})
	return ms[:min(len(ms), max(limit, 0))]
}

// lookup returns the call, or nil when there is none or its retention has
// passed (then it is forgotten now). s.mu is held.
func (s *MemoryStore) lookup(id string, now time.Time) *memCall {
	m := s.calls[id]
	if m == nil {
		return nil
	}
	if !now.Before(m.dropAt) {
		s.forget(m)
		return nil
	}
	return m
}

// forget drops m from the store, its indexes and its counts. s.mu is held.
func (s *MemoryStore) forget(m *memCall) {
	delete(s.calls, m.c.ID)
	delete(s.owing, m.c.ID)
	s.unindex(m)
	s.unattach(m)
	s.untrack(m)
	if m.c.State.Terminal() {
		s.forgotEnded(m)
	}
	close(m.changed) // waiters wake and find it gone
}

// move is the one place a call changes state. s.mu is held.
func (s *MemoryStore) move(m *memCall, to State, now time.Time) {
	s.unindex(m)
	m.c.State = to
	s.index(m)
	m.since = now
	s.seq++
	m.seq = s.seq
	if counted(to) {
		s.track(m)
	} else {
		s.untrack(m)
	}
	switch {
	case to == Executing:
		s.dropAt(m, later(m.c.ExpiresAt, m.c.LeaseUntil).Add(s.resultTTL))
	case to.Terminal():
		m.c.Request = nil // see Call.Request
		s.dropAt(m, now.Add(s.resultTTL))
		if !attachable(m.c) {
			s.unattach(m) // nothing left to hand a retry
		}
		s.ended(m) // may forget the calls that ended first (memory_ended.go)
	}
	close(m.changed)
	m.changed = make(chan struct{})
}

// expireIfDue moves a call past its deadline to Expired (waiting,
// approved) or Unknown (executing), and reports whether it did.
func (s *MemoryStore) expireIfDue(m *memCall, now time.Time) bool {
	to := overdue(m.c, now)
	if to == "" {
		return false
	}
	s.move(m, to, now)
	s.owe(m, now) // an end nobody decided: announced as one
	return true
}

// unattach forgets the call's attach keys, those that still name it.
// s.mu is held.
func (s *MemoryStore) unattach(m *memCall) {
	for _, k := range []string{m.c.AttachKey, m.c.ArgsKey} {
		if k != "" && s.attach[k] == m.c.ID {
			delete(s.attach, k)
		}
	}
}

// overdue returns the state a call past its deadline moves to, or "".
func overdue(c Call, now time.Time) State {
	switch c.State {
	case Waiting, Approved:
		if !now.Before(c.ExpiresAt) {
			return Expired
		}
	case Executing:
		if !now.Before(c.LeaseUntil) {
			return Unknown
		}
	}
	return ""
}

// deadline is the time a live call becomes overdue.
func deadline(c Call) time.Time {
	if c.State == Executing {
		return c.LeaseUntil
	}
	return c.ExpiresAt
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// inState returns the live call id when it is in state want; a missing
// call is ErrNotFound, one in another state or past its deadline a
// *StateError. Only a call in state want is moved when overdue (to
// expired): that move is the caller's, and the StateError carries it. A
// call in another state is left as it stands, overdue or not: ending it
// here would end it where nobody reports it (Expire would no longer
// return it, and an executor's Finish would no longer get ErrLapsed). The
// caller holds s.mu.
func (s *MemoryStore) inState(id string, want State, now time.Time) (*memCall, error) {
	m := s.lookup(id, now)
	if m == nil {
		return nil, notFound(id)
	}
	if m.c.State != want {
		return nil, &StateError{Call: m.c.out()}
	}
	if s.expireIfDue(m, now) {
		return nil, &StateError{Call: m.c.out(), Ended: true}
	}
	return m, nil
}

// counted reports whether calls in state st count against the caps.
func counted(st State) bool { return st == Waiting || st == Approved }

// track records m among the parked calls. s.mu is held.
func (s *MemoryStore) track(m *memCall) {
	if _, ok := s.parked[m.c.ID]; !ok {
		s.parkedBytes += heldBytes(m.c) // once, though a move between parked states tracks again
	}
	s.parked[m.c.ID] = m
	if p := m.c.Principal; p != "" {
		if s.byPrincipal[p] == nil {
			s.byPrincipal[p] = make(map[string]*memCall)
		}
		s.byPrincipal[p][m.c.ID] = m
	}
}

// untrack forgets m among the parked calls. s.mu is held.
func (s *MemoryStore) untrack(m *memCall) {
	if _, ok := s.parked[m.c.ID]; ok {
		s.parkedBytes -= heldBytes(m.c)
	}
	delete(s.parked, m.c.ID)
	if p := m.c.Principal; p != "" {
		delete(s.byPrincipal[p], m.c.ID)
		if len(s.byPrincipal[p]) == 0 {
			delete(s.byPrincipal, p)
		}
	}
}

// checkCaps returns ErrTooMany when parking c as a new call would pass a
// cap. Calls past their expiry do not count, swept or not. s.mu is held.
func (s *MemoryStore) checkCaps(c Call, now time.Time) error {
	live := func(ms map[string]*memCall, limit int) int {
		if len(ms) < limit {
			return len(ms) // at most that many are live: no need to look
		}
		n := 0
		for _, m := range ms {
			if now.Before(m.c.ExpiresAt) {
				n++
			}
		}
		return n
	}
	if s.maxPerPrincipal > 0 && c.Principal != "" && live(s.byPrincipal[c.Principal], s.maxPerPrincipal) >= s.maxPerPrincipal {
		return tooMany(c.ID, c.Principal, true, s.maxPerPrincipal)
	}
	if s.maxParked > 0 && live(s.parked, s.maxParked) >= s.maxParked {
		return tooMany(c.ID, c.Principal, false, s.maxParked)
	}
	if s.maxBytes > 0 && c.Principal != "" {
		// At most MaxParkedPerPrincipal calls to add up.
		held := heldBytes(c)
		for _, m := range s.byPrincipal[c.Principal] {
			if now.Before(m.c.ExpiresAt) {
				held += heldBytes(m.c)
			}
		}
		if held > s.maxBytes {
			return fmt.Errorf("%w: parking %s: principal %q's calls waiting or approved would hold %d bytes, past its cap of %d", ErrTooMany, c.ID, c.Principal, held, s.maxBytes)
		}
	}
	// Over all principals: kept as a sum, since they may be many. Calls
	// past their expiry count until they are moved, as the sweeper does
	// within seconds.
	if s.maxTotal > 0 && s.parkedBytes+heldBytes(c) > s.maxTotal {
		return fmt.Errorf("%w: parking %s: the calls waiting or approved would hold more than the store's cap of %d bytes", ErrTooMany, c.ID, s.maxTotal)
	}
	return nil
}

// heldBytes is what c keeps in a MemoryStore's memory while it waits.
func heldBytes(c Call) int64 { return int64(len(c.Request) + len(c.Info) + len(c.Brief)) }
