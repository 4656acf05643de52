package pending

import (
	"container/heap"
	"time"
)

// The MemoryStore's indexes. byState holds every call under its state, so
// reading the calls of one state costs what that state holds; drops is a
// queue of when calls are to be forgotten, so retention costs what is due.
// A call's forget time moves (an approval's window, a claim's lease, its
// end): each move queues a new entry, and an entry that no longer matches
// its call is skipped when it comes up. s.mu is held throughout.

// index and unindex add m to, and remove it from, its state's set.
func (s *MemoryStore) index(m *memCall) {
	set := s.byState[m.c.State]
	if set == nil {
		set = make(map[string]*memCall)
		s.byState[m.c.State] = set
	}
	set[m.c.ID] = m
}

func (s *MemoryStore) unindex(m *memCall) { delete(s.byState[m.c.State], m.c.ID) }

// inStateNow returns the calls in state st that are not past their
// retention (those are forgotten now).
func (s *MemoryStore) inStateNow(st State, now time.Time) []*memCall {
	ms := make([]*memCall, 0, len(s.byState[st]))
	for id := range s.byState[st] {
		if m := s.lookup(id, now); m != nil {
			ms = append(ms, m)
		}
	}
	return ms
}

// dropAt sets when m is forgotten, and queues it.
func (s *MemoryStore) dropAt(m *memCall, at time.Time) {
	m.dropAt = at
	heap.Push(&s.drops, dropEntry{at: at, m: m})
	if n := len(s.drops); n > 64 && n > 4*len(s.calls) {
		s.rebuildDrops() // stale entries outnumber the calls
	}
}

// forgetDue forgets the calls whose retention has passed.
func (s *MemoryStore) forgetDue(now time.Time) {
	for len(s.drops) > 0 && !now.Before(s.drops[0].at) {
		e := heap.Pop(&s.drops).(dropEntry)
		if s.calls[e.m.c.ID] == e.m && e.m.dropAt.Equal(e.at) {
			s.lookup(e.m.c.ID, now)
		}
	}
}

// rebuildDrops queues each call once, at its current forget time.
func (s *MemoryStore) rebuildDrops() {
	q := make(dropQueue, 0, len(s.calls))
	for _, m := range s.calls {
		q = append(q, dropEntry{at: m.dropAt, m: m})
	}
	heap.Init(&q)
	s.drops = q
}

type dropEntry struct {
	at time.Time
	m  *memCall
}

// dropQueue is a min-heap of forget times (container/heap).
type dropQueue []dropEntry

func (q dropQueue) Len() int           { return len(q) }
func (q dropQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q dropQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *dropQueue) Push(x any)        { *q = append(*q, x.(dropEntry)) }
func (q *dropQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = dropEntry{}
	*q = old[:len(old)-1]
	return e
}
