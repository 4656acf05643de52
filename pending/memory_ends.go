package pending

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// owedEnd is an End of a memCall not yet marked Resolved, and when the
// call reached it.
type owedEnd struct {
	state State
	at    time.Time
	seq   uint64 // orders ends reached in one instant
}

// owe records the End m just reached (it moved to m.c.State). s.mu is
// held.
func (s *MemoryStore) owe(m *memCall, now time.Time) {
	if !announcedEnd(m.c.State) {
		return
	}
	m.owed = append(m.owed, owedEnd{state: m.c.State, at: now, seq: m.seq})
	if s.owing == nil {
		s.owing = make(map[string]*memCall)
	}
	s.owing[m.c.ID] = m
}

// Resolved implements [Store.Resolved].
func (s *MemoryStore) Resolved(ctx context.Context, ends []End) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range ends {
		m := s.owing[e.ID]
		if m == nil {
			continue
		}
		m.owed = slices.DeleteFunc(m.owed, func(o owedEnd) bool { return o.state == e.State })
		if len(m.owed) == 0 {
			m.owed = nil
			delete(s.owing, e.ID)
		}
	}
	return nil
}

// Unresolved implements [Store.Unresolved]. Only the calls that owe an
// end are looked at: a settled end leaves the index at once, and one kept
// past EndsKept leaves it here, as the Redis index trims its own.
func (s *MemoryStore) Unresolved(ctx context.Context, olderThan time.Duration, limit int, maxBytes int64) ([]Owed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	kept := now.Add(-min(s.resultTTL, EndsKept))
	type due struct {
		m *memCall
		o owedEnd
	}
	var all []due
	for id, m := range s.owing {
		if s.lookup(m.c.ID, now) == nil {
			continue // past its retention: forgotten now
		}
		if m.owed = slices.DeleteFunc(m.owed, func(o owedEnd) bool { return o.at.Before(kept) }); len(m.owed) == 0 {
			m.owed = nil
			delete(s.owing, id)
			continue
		}
		for _, o := range m.owed {
			if !o.at.After(now.Add(-olderThan)) {
				all = append(all, due{m, o})
			}
		}
	}
	slices.SortFunc(all, func(a, b due) int { return cmp.Or(a.o.at.Compare(b.o.at), cmp.Compare(a.o.seq, b.o.seq)) })
	all = all[:min(len(all), max(limit, 0))]
	all = all[:fitting(len(all), maxBytes, func(i int) int64 { return storedBytes(all[i].m.c) })]
	out := make([]Owed, 0, len(all))
	for _, d := range all {
		out = append(out, Owed{End: End{ID: d.m.c.ID, State: d.o.state}, Call: d.m.c.out()})
	}
	return out, nil
}
