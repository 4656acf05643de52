package pending

// Ended calls are kept for ResultTTL, so that agents can read their results
// and approvers what happened. Retention alone does not bound them: an
// agent that parks a call and cancels it, in a loop, ends a call every few
// milliseconds with no human involved, and each one keeps its request and
// arguments for a day. So the MemoryStore keeps no more ended calls than
// the caps let it park (Options.MaxParked and MaxBytes, and
// MaxParkedPerPrincipal and MaxBytesPerPrincipal of one principal: ended
// calls' arguments and results count as waiting calls' requests do); past
// any, the call that ended first is forgotten at once, as its retention
// would have forgotten it later. Ended calls then hold at
// most the memory parked ones may. A zero cap bounds nothing, as for parked
// calls. s.mu is held throughout.

// endedQueue is a FIFO of ended calls in the order they ended, with how
// many of them are still kept. An entry names its call by ID and the seq
// it ended with: a call forgotten by retention (in the same order, ResultTTL
// after its end) or by a cap stays queued until it reaches the front, and a
// later call under the same ID is not it.
type endedQueue struct {
	q     []endedEntry
	head  int
	n     int   // calls queued and still kept
	bytes int64 // what they hold (endedBytes)
}

// endedBytes is what an ended call keeps in memory: the arguments shown to
// approvers and its result (its request is dropped when it ends).
func endedBytes(m *memCall) int64 {
	n := int64(len(m.c.Info) + len(m.c.Brief) + len(m.c.Request))
	if r := m.c.Result; r != nil {
		n += int64(len(r.Body))
	}
	return n
}

type endedEntry struct {
	id  string
	seq uint64
}

func (e *endedQueue) push(m *memCall) {
	if e.head > 64 && e.head > len(e.q)/2 {
		e.q = append(e.q[:0], e.q[e.head:]...) // the front half is popped: reuse it
		e.head = 0
	}
	e.q = append(e.q, endedEntry{id: m.c.ID, seq: m.seq})
	e.n++
	e.bytes += endedBytes(m)
}

// ended records m, which has just ended, and forgets the oldest ended calls
// past a cap.
func (s *MemoryStore) ended(m *memCall) {
	s.endedAll.push(m)
	p := m.c.Principal
	var mine *endedQueue
	if p != "" {
		if mine = s.endedBy[p]; mine == nil {
			mine = &endedQueue{}
			s.endedBy[p] = mine
		}
		mine.push(m)
	}
	if mine != nil {
		// One principal's ended calls hold at most what its waiting ones
		// may (Options.MaxBytesPerPrincipal), as they count no more.
		s.trimEnded(mine, s.maxPerPrincipal, s.maxBytes)
	}
	s.trimEnded(&s.endedAll, s.maxParked, s.maxTotal)
	if mine != nil && mine.n == 0 {
		delete(s.endedBy, p)
	}
}

// trimEnded forgets the oldest calls of q until at most limit are kept,
// holding at most maxBytes (0: no bound), and drops the entries at its
// front that name calls already forgotten.
// Entries of calls forgotten behind a kept one (the other queue's cap
// forgot them) are dropped once they are as many as the calls kept.
func (s *MemoryStore) trimEnded(q *endedQueue, limit int, maxBytes int64) {
	for q.head < len(q.q) {
		m, kept := s.keptEnded(q.q[q.head])
		if kept && (limit <= 0 || q.n <= limit) && (maxBytes <= 0 || q.bytes <= maxBytes) {
			break
		}
		q.q[q.head] = endedEntry{}
		q.head++
		if kept {
			s.forget(m) // counts it out of q too
		}
	}
	if len(q.q)-q.head > 2*q.n+64 {
		live := q.q[:0]
		for _, e := range q.q[q.head:] {
			if _, kept := s.keptEnded(e); kept {
				live = append(live, e)
			}
		}
		clear(q.q[len(live):])
		q.q, q.head = live, 0
	}
}

// keptEnded returns the call e names when it is still kept.
func (s *MemoryStore) keptEnded(e endedEntry) (*memCall, bool) {
	m := s.calls[e.id]
	return m, m != nil && m.seq == e.seq && m.c.State.Terminal()
}

// forgotEnded counts m, an ended call being forgotten, out of its queues.
func (s *MemoryStore) forgotEnded(m *memCall) {
	b := endedBytes(m)
	s.endedAll.n--
	s.endedAll.bytes -= b
	if mine := s.endedBy[m.c.Principal]; mine != nil {
		mine.n--
		mine.bytes -= b
		if mine.n == 0 {
			delete(s.endedBy, m.c.Principal)
		}
	}
}
