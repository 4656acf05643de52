package pending

// What the store's subscription heard lately, so that Wait on a call this
// replica just parked can skip its first read of the call's state (one
// round trip of an ask's eight). That read is there for a transition
// published before Wait listened; for a call parked here, every
// transition after the park is either among the messages heard since the
// park was sent, or still to come, provided the subscription was
// confirmed before the park and has not been made again since (a
// reconnection loses what was published meanwhile). When that cannot be
// shown, Wait reads as before. Either way Wait still polls: a message
// lost without a reconnection being seen (a dead connection not yet
// noticed, a full channel) costs one poll interval, as it always did,
// never a missed transition.
//
// Only with the one global channel: on a Cluster each shard has its own
// subscription, and Wait always reads first.

// heardRing is how many published IDs the store remembers; a park older
// than that many messages is read as before.
const heardRing = 1024

// heardMarks bounds the parks remembered for a Wait that has not come (a
// call parked without holding its caller).
const heardMarks = 4096

// heard is guarded by RedisStore.mu, as the waiters it is checked with.
type heard struct {
	live  bool   // the subscription is confirmed, at epoch
	epoch uint64 // subscriptions confirmed so far
	n     uint64 // messages heard in all
	ring  [heardRing]string
	marks map[string]heardMark
	fifo  []string // marks' IDs, oldest first, for the bound

	grants uint64   // grants made, as heard or made here (redis_nogrants.go)
	none   noGrants // the last lookup that found none
}

// heardMark is where the subscription stood when a park was sent, and
// the state the park reported.
type heardMark struct {
	epoch, n, grants uint64
	state            State
}

// subscribed records a (re)confirmed subscription: what was published
// before it may have been lost.
func (s *RedisStore) subscribed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heard.epoch++
	s.heard.live = true
	s.peeks = peeks{} // what Peek kept may have moved unheard (redis_peek.go)
}

// hear records a published ID; s.mu is held.
func (s *RedisStore) hear(id string) {
	h := &s.heard
	h.ring[h.n%heardRing] = id
	h.n++
}

// markHeard returns where the subscription stands before a park is sent,
// and whether it can vouch for what follows.
func (s *RedisStore) markHeard() (heardMark, bool) {
	if s.shardedPubSub {
		return heardMark{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return heardMark{epoch: s.heard.epoch, n: s.heard.n, grants: s.heard.grants}, s.heard.live
}

// parkedHeard remembers the mark of a park of id that reported state.
func (s *RedisStore) parkedHeard(id string, m heardMark, state State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.heard
	if h.marks == nil {
		h.marks = make(map[string]heardMark)
	}
	if _, ok := h.marks[id]; !ok {
		h.fifo = append(h.fifo, id)
	}
	m.state = state
	h.marks[id] = m
	for len(h.fifo) > heardMarks {
		delete(h.marks, h.fifo[0])
		h.fifo = h.fifo[1:]
	}
}

// unmovedSinceParked reports whether id, which this replica parked in
// state from, cannot have moved unheard: the subscription was confirmed
// before the park and not since, and no message for id came after the
// park was sent. The mark is used once. The caller is registered as a
// waiter already, so a message that comes after this wakes it.
func (s *RedisStore) unmovedSinceParked(id string, from State) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.heard
	m, ok := h.marks[id]
	if !ok {
		return false
	}
	delete(h.marks, id) // its fifo entry goes with the bound
	if m.state != from || !h.live || m.epoch != h.epoch || h.n-m.n > heardRing {
		return false
	}
	for i := m.n; i < h.n; i++ {
		if h.ring[i%heardRing] == id {
			return false
		}
	}
	return true
}
