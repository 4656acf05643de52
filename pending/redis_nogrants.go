package pending

import "time"

// Remembered grants are opt-in (an approver ticks "remember"), so most
// asks find none, and each would pay a round trip to learn it. FindGrant
// remembers that Redis held no live grant at all, as of a mark of the
// subscription (redis_heard.go), and answers "none" without asking while
// three things hold: the subscription was confirmed before that lookup
// and not made again since, no grant was made since (every Grant
// publishes grantsMessage, and this replica's own Grant counts at once),
// and the lookup is younger than the poll interval, which bounds a
// message lost unseen (a dead connection not yet noticed) as it bounds a
// waiter's. The shortcut can only miss a grant, never find one that is
// not there: a missed grant asks the approvers again, it never lets a call
// through. Revocations need no message, for the same reason. When any
// grant is live, every lookup asks Redis, as before; on a Cluster (sharded
// channels) it always does.

// grantsMessage is published by every Grant: no call ID has a '*'.
const grantsMessage = "*grants"

// noGrants is the last lookup that found no live grant; guarded by
// RedisStore.mu.
type noGrants struct {
	ok     bool
	epoch  uint64 // of the subscription, at the lookup
	grants uint64 // heard.grants at the lookup
	at     time.Time
}

// granted records a grant made (by a message heard, or by this replica):
// what a lookup found before it no longer holds.
func (s *RedisStore) granted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heard.grants++
}

// heardGrant records a message that announced a grant, and reports
// whether msgID was one; s.mu is held.
func (s *RedisStore) heardGrant(msgID string) bool {
	if msgID != grantsMessage {
		return false
	}
	s.heard.grants++
	return true
}

// noGrantsSince remembers that a lookup that started at mark found no live
// grant.
func (s *RedisStore) noGrantsSince(m heardMark) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.epoch == s.heard.epoch && s.heard.live {
		s.heard.none = noGrants{ok: true, epoch: m.epoch, grants: m.grants, at: time.Now()}
	}
}

// noGrantsKnown reports whether FindGrant may answer "none" unasked.
func (s *RedisStore) noGrantsKnown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.heard
	n := h.none
	return n.ok && h.live && n.epoch == h.epoch && n.grants == h.grants && time.Since(n.at) < s.poll
}
