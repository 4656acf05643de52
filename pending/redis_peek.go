package pending

import (
	"context"
	"time"
)

// What Peek answers without a round trip: the calls this replica parked,
// as the park stored them, for as long as nothing can have moved them
// unseen. An approver's decision reads the call before deciding (to check
// who may decide it), and with an instant approver that read was one of an
// ask's five round trips to Redis.
//
// An entry is kept only when the subscription can vouch for the park's
// aftermath (redis_heard.go), and only for a call without a quorum: an
// approval that does not complete a quorum publishes nothing, and a
// decision read from a record without it would audit a vote the store
// already counted. It is dropped when a message for the call is heard,
// when this replica runs a script on it, and when the subscription is
// made again (what was published meanwhile may be lost), and it is
// trusted for one poll interval at most (a message can also be lost
// without a reconnection: a dead connection not yet noticed, a full
// channel). What it can miss is a transition made elsewhere whose message
// is still on its way: Peek's callers decide next, and the decision's
// script checks the call as it stands (docs/security.md, R22).

const (
	// peekCalls bounds the calls kept; peekBytes the bytes of their
	// information (Info, Brief: the request is not kept).
	peekCalls = 4096
	peekBytes = 8 << 20
)

// peeks is guarded by RedisStore.mu, as what the subscription heard.
type peeks struct {
	calls map[string]peekEntry
	fifo  []string // IDs in the order kept, some of them dropped since
	bytes int
}

type peekEntry struct {
	c     Call
	epoch uint64
	at    time.Time // when it was kept
	size  int
}

// Peek implements [Store.Peek].
func (s *RedisStore) Peek(ctx context.Context, id string) (Call, error) {
	s.mu.Lock()
	e, ok := s.peeks.calls[id]
	ok = ok && s.heard.live && e.epoch == s.heard.epoch && time.Since(e.at) < s.poll
	s.mu.Unlock()
	if ok {
		return e.c.out(), nil
	}
	return s.Get(ctx, id)
}

// keepPeek keeps c, just parked (Waiting) with the subscription at m, for
// Peek, unless a message for it was heard since m or could have been lost.
func (s *RedisStore) keepPeek(c Call, m heardMark) {
	size := len(c.Info) + len(c.Brief) + len(c.ID)
	if size > peekBytes/64 || len(c.Quorum) > 0 || len(c.Approvals) > 0 {
		return // read when decided: a call that large, or one with a quorum
	}
	c.Request = nil
	c = c.out() // nothing shared with the caller of Park but the bytes
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.heard
	if !h.live || m.epoch != h.epoch || h.n-m.n > heardRing {
		return
	}
	for i := m.n; i < h.n; i++ {
		if h.ring[i%heardRing] == c.ID {
			return
		}
	}
	p := &s.peeks
	if p.calls == nil {
		p.calls = make(map[string]peekEntry)
	}
	if _, ok := p.calls[c.ID]; ok {
		return
	}
	p.calls[c.ID] = peekEntry{c: c, epoch: m.epoch, at: time.Now(), size: size}
	p.fifo = append(p.fifo, c.ID)
	p.bytes += size
	for len(p.calls) > peekCalls || p.bytes > peekBytes {
		s.dropPeek(p.fifo[0])
		p.fifo = p.fifo[1:]
	}
	if len(p.fifo) > 2*len(p.calls)+64 {
		// Most entries are dropped by their call's first transition, long
		// before the bound: their IDs go from the queue here, in one pass.
		live := p.fifo[:0]
		for _, id := range p.fifo {
			if _, ok := p.calls[id]; ok {
				live = append(live, id)
			}
		}
		clear(p.fifo[len(live):])
		p.fifo = live
	}
}

// dropPeek forgets id's entry; s.mu is held.
func (s *RedisStore) dropPeek(id string) {
	p := &s.peeks
	if e, ok := p.calls[id]; ok {
		delete(p.calls, id)
		p.bytes -= e.size
	}
}

// forgetPeek forgets id's entry before this replica moves the call.
func (s *RedisStore) forgetPeek(id string) {
	s.mu.Lock()
	s.dropPeek(id)
	s.mu.Unlock()
}
