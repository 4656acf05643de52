package pending

import (
	"cmp"
	"context"
	"crypto/rand"
	"slices"
	"sync"
	"time"
)

var _ Grants = (*MemoryStore)(nil)

// memGrants are the remembered grants of a MemoryStore. Its zero value is
// ready for use. It has its own mutex: grants never touch parked calls,
// and FindGrant, on the path of every "ask", need not wait for them.
//
// Expired grants are dropped when they are met (FindGrant, Revoke, a
// replaced scope) and by sweeps on write: when the map has doubled since
// the last sweep, or when it is full and a grant may have expired. The map
// never holds more than MaxGrants grants, live or not.
type memGrants struct {
	mu      sync.Mutex
	byID    map[string]*memGrant
	byScope map[string]*memGrant // grantScope → the one grant of the scope
	seq     uint64

	sweepAt  int       // the size at which the expired grants are dropped next
	firstDue time.Time // the earliest expiry among the grants (or earlier)
}

type memGrant struct {
	g     Grant
	scope string
	seq   uint64 // orders grants made at the same time, for Grants
}

// Grant implements [Grants.Grant].
func (s *MemoryStore) Grant(ctx context.Context, g Grant, lifetime time.Duration) (Grant, error) {
	if err := CheckGrant(g, lifetime); err != nil {
		return Grant{}, err
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	gs := &s.grants
	gs.mu.Lock()
	defer gs.mu.Unlock()
	now := s.now()
	scope := grantScope(g.Subject, g.Upstream, g.Tool, g.Target, g.AnyTarget)
	old := gs.live(gs.byScope[scope], now)
	if old == nil && !gs.room(now) {
		return Grant{}, tooManyGrants()
	}
	if old != nil {
		gs.drop(old) // replaced: a scope holds one grant
	}
	if gs.byID == nil {
		gs.byID = make(map[string]*memGrant)
		gs.byScope = make(map[string]*memGrant)
	}
	if g.ID == "" {
		g.ID = rand.Text()
	}
	g.CreatedAt = now
	g.ExpiresAt = now.Add(lifetime)
	gs.seq++
	m := &memGrant{g: g, scope: scope, seq: gs.seq}
	gs.byID[g.ID] = m
	gs.byScope[scope] = m
	if len(gs.byID) == 1 || g.ExpiresAt.Before(gs.firstDue) {
		gs.firstDue = g.ExpiresAt
	}
	return g, nil
}

// FindGrant implements [Grants.FindGrant].
func (s *MemoryStore) FindGrant(ctx context.Context, q GrantQuery) (Grant, error) {
	if !findable(q) {
		return Grant{}, noGrantFor(q)
	}
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	gs := &s.grants
	gs.mu.Lock()
	defer gs.mu.Unlock()
	now := s.now()
	if q.SoleTarget {
		if m := gs.live(gs.byScope[grantScope(q.Subject, q.Upstream, q.Tool, q.Target, false)], now); m != nil {
			return m.g, nil
		}
	}
	if m := gs.live(gs.byScope[grantScope(q.Subject, q.Upstream, q.Tool, "", true)], now); m != nil {
		return m.g, nil
	}
	return Grant{}, noGrantFor(q)
}

// Grants implements [Grants.Grants].
func (s *MemoryStore) Grants(ctx context.Context, limit int) ([]Grant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	gs := &s.grants
	gs.mu.Lock()
	defer gs.mu.Unlock()
	now := s.now()
	var ms []*memGrant
	for _, m := range gs.byID {
		if now.Before(m.g.ExpiresAt) {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b *memGrant) int {
		return cmp.Or(b.g.CreatedAt.Compare(a.g.CreatedAt), cmp.Compare(b.seq, a.seq))
	})
	var out []Grant
	for _, m := range ms[:min(len(ms), limit)] {
		out = append(out, m.g)
	}
	return out, nil
}

// Revoke implements [Grants.Revoke].
func (s *MemoryStore) Revoke(ctx context.Context, id string) (Grant, error) {
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	gs := &s.grants
	gs.mu.Lock()
	defer gs.mu.Unlock()
	m := gs.live(gs.byID[id], s.now())
	if m == nil {
		return Grant{}, noGrant(id)
	}
	gs.drop(m)
	return m.g, nil
}

// live returns m if it is a grant that has not expired; an expired one is
// dropped. gs.mu is held.
func (gs *memGrants) live(m *memGrant, now time.Time) *memGrant {
	if m == nil {
		return nil
	}
	if !now.Before(m.g.ExpiresAt) {
		gs.drop(m)
		return nil
	}
	return m
}

// drop forgets m. gs.mu is held.
func (gs *memGrants) drop(m *memGrant) {
	delete(gs.byID, m.g.ID)
	if gs.byScope[m.scope] == m {
		delete(gs.byScope, m.scope)
	}
}

// room drops the expired grants when the map has doubled since the last
// sweep, or when it is full and one of them may have expired, and reports
// whether a new grant fits under MaxGrants. A full store whose grants are
// all live refuses without a sweep. gs.mu is held.
func (gs *memGrants) room(now time.Time) bool {
	n := len(gs.byID)
	full := n >= MaxGrants
	if n >= gs.sweepAt || (full && !now.Before(gs.firstDue)) {
		var first time.Time
		for _, m := range gs.byID {
			switch {
			case !now.Before(m.g.ExpiresAt):
				gs.drop(m)
			case first.IsZero() || m.g.ExpiresAt.Before(first):
				first = m.g.ExpiresAt
			}
		}
		gs.firstDue = first
		gs.sweepAt = max(2*len(gs.byID), 64)
	}
	return len(gs.byID) < MaxGrants
}
