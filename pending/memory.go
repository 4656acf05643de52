package pending

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// MemoryStore keeps parked calls in the process's memory, for a single
// replica (the quickstart). Its calls are lost when the process stops.
// One mutex makes every method one atomic step; nothing runs in the
// background: expired and retained calls are handled when they are touched
// and by Expire.
type MemoryStore struct {
	now             func() time.Time
	resultTTL       time.Duration
	approvedWindow  time.Duration
	maxParked       int
	maxPerPrincipal int
	maxBytes        int64 // Options.MaxBytesPerPrincipal
	maxTotal        int64 // Options.MaxBytes
	parkEvery       time.Duration
	parkBurst       int

	mu     sync.Mutex
	calls  map[string]*memCall
	attach map[string]string // AttachKey or ArgsKey → ID of the call it names
	seq    uint64
	// parked holds the calls waiting or approved (those past their expiry
	// until they are moved), all and by principal: Park counts them
	// against the caps. move keeps them.
	parked      map[string]*memCall
	byPrincipal map[string]map[string]*memCall
	parkedBytes int64 // what the parked calls hold (heldBytes), for maxTotal
	// byState holds every call by its state, and drops when each is to be
	// forgotten: the sweeper's rounds and the lists read the calls of one
	// state, and retention pops what is due, instead of scanning every
	// call kept (most of them finished, kept for ResultTTL) several times
	// a second under the lock (memory_index.go).
	byState map[State]map[string]*memCall
	drops   dropQueue
	// owing holds the calls with an end not yet marked Resolved, so that
	// Unresolved reads those alone (memory_ends.go).
	owing map[string]*memCall
	// endedAll and endedBy hold the ended calls in the order they ended,
	// all and by principal, for the caps on how many are kept
	// (memory_ended.go).
	endedAll endedQueue
	endedBy  map[string]*endedQueue

	// sessions are the MCP session bindings (session.go), at most
	// maxSessions of them; sessionsSweepAt is the size at which the
	// expired ones are dropped next, sessionsFirstDue the earliest expiry
	// among them (or earlier).
	sessions         map[string]memSession
	maxSessions      int
	sessionsSweepAt  int
	sessionsFirstDue time.Time
	// sessionsOf holds the IDs of each principal's bindings (some maybe
	// expired), at most maxSessionsPer live ones each.
	sessionsOf     map[string]map[string]struct{}
	maxSessionsPer int

	rates  memRates  // principals' arrival times (rate.go)
	grants memGrants // remembered grants (memory_grants.go)
	nonces memNonces // one-time values (nonce.go)

	listings memListings // what listings told (memory_listings.go)
}

var _ Store = (*MemoryStore)(nil)

type memCall struct {
	c Call
	// since is when the call entered its state, seq breaks ties: List's
	// "oldest first" and Approved's grace are about time in the state.
	since time.Time
	seq   uint64
	// announced: Announced was called (Unannounced skips the call).
	announced bool
	// owed are the call's ends not yet marked Resolved (memory_ends.go).
	owed []owedEnd
	// dropAt is when the call is forgotten: its deadline plus ResultTTL
	// while live, the finish plus ResultTTL once terminal (the same rule as
	// RedisStore's key TTLs).
	dropAt time.Time
	// changed is closed and replaced at every change: a broadcast to the
	// Wait calls holding the old channel, with no polling and no
	// per-waiter bookkeeping.
	changed chan struct{}
}

// NewMemory returns an empty MemoryStore. It uses opts.ResultTTL,
// opts.ApprovedWindow, the caps, the rate of parks, opts.MaxSessions and
// opts.Now; the other options are for RedisStore.
func NewMemory(opts Options) *MemoryStore {
	opts = opts.withDefaults()
	return &MemoryStore{
		now:             opts.Now,
		resultTTL:       opts.ResultTTL,
		approvedWindow:  opts.ApprovedWindow,
		maxParked:       opts.MaxParked,
		maxPerPrincipal: opts.MaxParkedPerPrincipal,
		maxBytes:        opts.MaxBytesPerPrincipal,
		maxTotal:        opts.MaxBytes,
		parkEvery:       opts.ParkEvery,
		parkBurst:       opts.ParkBurst,
		calls:           make(map[string]*memCall),
		attach:          make(map[string]string),
		parked:          make(map[string]*memCall),
		byPrincipal:     make(map[string]map[string]*memCall),
		byState:         make(map[State]map[string]*memCall),
		endedBy:         make(map[string]*endedQueue),
		sessions:        make(map[string]memSession),
		maxSessions:     opts.MaxSessions,
		sessionsOf:      make(map[string]map[string]struct{}),
		maxSessionsPer:  opts.MaxSessionsPerPrincipal,
	}
}

// Park implements [Store.Park]. Parking again a call whose ID is taken by
// the same request (same RequestDigest) returns the stored call: a retried
// Park is harmless, as with RedisStore.
func (s *MemoryStore) Park(ctx context.Context, c Call, ttl time.Duration) (Call, bool, error) {
	if err := checkPark(c, ttl); err != nil {
		return Call{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return Call{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if m := s.lookup(c.ID, now); m != nil {
		if m.c.RequestDigest == c.RequestDigest {
			return m.c.out(), false, nil
		}
		return Call{}, false, idTaken(c.ID)
	}
	if c.AttachKey != "" {
		if id, ok := s.attach[c.AttachKey]; ok {
			if m := s.lookup(id, now); m != nil {
				s.expireIfDue(m, now)
				if attachable(m.c) {
					return m.c.out(), true, nil
				}
			}
			delete(s.attach, c.AttachKey)
		}
	}
	if err := s.checkCaps(c, now); err != nil {
		return Call{}, false, err
	}
	if err := s.rates.take(c.ID, c.Principal, s.parkEvery, s.parkBurst, now); err != nil {
		return Call{}, false, err
	}

	c = c.clone()
	c.State = Waiting
	c.CreatedAt = now
	c.ExpiresAt = now.Add(ttl)
	c.DecidedBy, c.Comment, c.DecidedAt, c.Approvals = "", "", time.Time{}, nil
	c.Fence, c.LeaseUntil = 0, time.Time{}
	c.Result, c.Delivered = nil, false
	s.seq++
	m := &memCall{
		c:       c,
		since:   now,
		seq:     s.seq,
		changed: make(chan struct{}),
	}
	s.calls[c.ID] = m
	s.index(m)
	s.dropAt(m, c.ExpiresAt.Add(s.resultTTL))
	s.track(m)
	if c.AttachKey != "" {
		s.attach[c.AttachKey] = c.ID
	}
	if k := c.ArgsKey; k != "" && k != c.AttachKey && !s.namesAttachable(k, now) {
		s.attach[k] = c.ID
	}
	return c.out(), false, nil
}

// Attaches implements [Store.Attaches].
func (s *MemoryStore) Attaches(ctx context.Context, c Call) (Call, error) {
	if err := ctx.Err(); err != nil {
		return Call{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.AttachKey == "" || !s.namesAttachable(c.AttachKey, s.now()) {
		return Call{}, notFound(c.ID)
	}
	return s.calls[s.attach[c.AttachKey]].c.out(), nil
}

// namesAttachable reports whether the attach key k names a call that
// still attaches retries. s.mu is held.
func (s *MemoryStore) namesAttachable(k string, now time.Time) bool {
	id, ok := s.attach[k]
	if !ok {
		return false
	}
	m := s.lookup(id, now)
	if m == nil {
		return false
	}
	// Judged as the call would stand past its deadline, without moving
	// it: this call is not the one being parked or attached to, and its
	// end is Expire's to report (as the Redis store leaves it).
	c := m.c
	if to := overdue(c, now); to != "" {
		c.State = to
	}
	return attachable(c)
}

// Get implements [Store.Get].
func (s *MemoryStore) Get(ctx context.Context, id string) (Call, error) {
	if err := ctx.Err(); err != nil {
		return Call{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.lookup(id, s.now())
	if m == nil {
		return Call{}, notFound(id)
	}
	return m.c.out(), nil
}

// Peek implements [Store.Peek]: Get, which costs nothing more here.
func (s *MemoryStore) Peek(ctx context.Context, id string) (Call, error) { return s.Get(ctx, id) }

// Decide implements [Store.Decide].
func (s *MemoryStore) Decide(ctx context.Context, id string, d Decision) (Call, error) {
	if err := checkDecisionOf(d); err != nil {
		return Call{}, err
	}
	return s.fromWaiting(ctx, id, d)
}

// Cancel implements [Store.Cancel].
func (s *MemoryStore) Cancel(ctx context.Context, id string) (Call, error) {
	return s.fromWaiting(ctx, id, Decision{To: Cancelled})
}

func (s *MemoryStore) fromWaiting(ctx context.Context, id string, d Decision) (Call, error) {
	if err := ctx.Err(); err != nil {
		return Call{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	// An expired call cannot be decided even if no sweeper has run yet:
	// expiry is checked here, against the store's clock.
	m, err := s.inState(id, Waiting, now)
	if err != nil {
		return Call{}, err
	}
	if d.To == Approved {
		if ApprovedBy(m.c.Approvals, d.By) || full(m.c.Approvals) {
			return m.c.decided(), nil // counted once; or as many as a call may hold
		}
		m.c.Approvals = append(m.c.Approvals, Approval{By: d.By, At: now, Comment: d.Comment, Counts: slices.Clone(d.Counts)})
		if !quorumMet(m.c.Quorum, m.c.Approvals) {
			return m.c.decided(), nil // still waiting for more approvers
		}
		// An approval just before the expiry must still run: the call
		// stays claimable for the approved window.
		m.c.ExpiresAt = later(m.c.ExpiresAt, now.Add(s.approvedWindow))
		s.dropAt(m, m.c.ExpiresAt.Add(s.resultTTL))
	}
	m.c.DecidedBy, m.c.Comment, m.c.DecidedAt = d.By, d.Comment, now
	s.move(m, d.To, now)
	s.owe(m, now)
	if d.To == Approved && d.Claim > 0 {
		return s.claim(m, d.Claim, now), nil
	}
	return m.c.decided(), nil
}

// Claim implements [Store.Claim].
func (s *MemoryStore) Claim(ctx context.Context, id string, lease time.Duration) (Call, error) {
	if err := checkLease(lease); err != nil {
		return Call{}, err
	}
	if err := ctx.Err(); err != nil {
		return Call{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	m, err := s.inState(id, Approved, now)
	if err != nil {
		return Call{}, err
	}
	return s.claim(m, lease, now), nil
}

// claim moves an approved call m to Executing for one executor.
func (s *MemoryStore) claim(m *memCall, lease time.Duration, now time.Time) Call {
	m.c.Fence++
	m.c.LeaseUntil = now.Add(lease)
	s.move(m, Executing, now)
	return m.c.out()
}

// Finish implements [Store.Finish]. A Finish with the fence after the
// lease ran out is fenced even if Expire has not run yet: the call becomes
// Unknown, since others may already have given it up, and ErrLapsed hands
// it back. A stale fence, or a call not executing, is fenced and leaves
// the call as it stands, overdue or not: its end is for the fence holder's
// Finish or for Expire to report.
func (s *MemoryStore) Finish(ctx context.Context, id string, fence int64, to State, res Result) (Call, error) {
	return s.finish(ctx, id, fence, to, res, false)
}

// FinishDeliver implements [Store.FinishDeliver].
func (s *MemoryStore) FinishDeliver(ctx context.Context, id string, fence int64, to State, res Result) (Call, error) {
	return s.finish(ctx, id, fence, to, res, true)
}

func (s *MemoryStore) finish(ctx context.Context, id string, fence int64, to State, res Result, deliver bool) (Call, error) {
	if err := checkOutcome(to); err != nil {
		return Call{}, err
	}
	if err := ctx.Err(); err != nil {
		return Call{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	m := s.lookup(id, now)
	if m == nil {
		return Call{}, notFound(id)
	}
	if m.c.State != Executing || m.c.Fence != fence {
		return Call{}, fenced(id, fence)
	}
	if s.expireIfDue(m, now) {
		return m.c.out(), lapsed(id, fence)
	}
	r := Call{Result: &res}.clone().Result
	m.c.Result = r
	s.move(m, to, now)
	if deliver {
		m.c.Delivered = true
		s.unattach(m)
	}
	done := m.c
	done.Info, done.Brief = nil, nil // see Store.Finish; dropped before out copies them
	return done.out(), nil
}

// Deliver implements [Store.Deliver]. Any terminal call can be delivered
// (a refusal is an answer too); a live one gives a *StateError. The first
// delivery forgets the call's attach keys.
func (s *MemoryStore) Deliver(ctx context.Context, id string) (bool, Call, error) {
	if err := ctx.Err(); err != nil {
		return false, Call{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.lookup(id, s.now())
	if m == nil {
		return false, Call{}, notFound(id)
	}
	if !m.c.State.Terminal() {
		return false, Call{}, &StateError{Call: m.c.out()}
	}
	if m.c.Delivered {
		return false, m.c.out(), nil
	}
	m.c.Delivered = true
	s.unattach(m)
	return true, m.c.out(), nil
}

// Expire implements [Store.Expire]. It also forgets calls past their
// retention.
func (s *MemoryStore) Expire(ctx context.Context, limit int) ([]Call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.forgetDue(now)
	var due []*memCall
	for _, st := range []State{Waiting, Approved, Executing} {
		for _, m := range s.byState[st] {
			if overdue(m.c, now) != "" {
				due = append(due, m)
			}
		}
	}
	slices.SortFunc(due, func(a, b *memCall) int {
		return cmp.Or(deadline(a.c).Compare(deadline(b.c)), cmp.Compare(a.seq, b.seq))
	})
	var out []Call
	for _, m := range due[:min(len(due), max(limit, 0))] {
		s.expireIfDue(m, now)
		out = append(out, m.c.out())
	}
	return out, nil
}

// Approved implements [Store.Approved].
func (s *MemoryStore) Approved(ctx context.Context, grace time.Duration, limit int) ([]Call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	return s.list(now, Approved, limit, func(m *memCall) bool {
		return !m.since.After(now.Add(-grace))
	}), nil
}

// List implements [Store.List]: oldest first means longest in state s.
func (s *MemoryStore) List(ctx context.Context, st State, limit int) ([]Call, error) {
	if err := checkState(st); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list(s.now(), st, limit, func(*memCall) bool { return true }), nil
}

// ListBrief implements [Store.ListBrief]: newest first means latest to
// enter state s (waiting calls: latest to expire). Only the listed fields are copied, under the lock.
func (s *MemoryStore) ListBrief(ctx context.Context, st State, limit int) ([]Call, error) {
	if err := checkState(st); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []Call
	for _, m := range s.selectInState(now, st, limit, true, func(m *memCall) bool { return overdue(m.c, now) == "" }) {
		out = append(out, m.c.brief())
	}
	return out, nil
}

// Count implements [Store.Count].
func (s *MemoryStore) Count(ctx context.Context, st State) (int, error) {
	if err := checkState(st); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inStateNow(st, s.now())), nil
}

// Wait implements [Store.Wait]. Every change closes the call's channel, so
// a waiter wakes at once and never polls.
func (s *MemoryStore) Wait(ctx context.Context, id string, from State) (Call, error) {
	var last Call
	for {
		s.mu.Lock()
		m := s.lookup(id, s.now())
		if m == nil {
			s.mu.Unlock()
			return last, notFound(id)
		}
		last = m.c.out()
		changed := m.changed
		s.mu.Unlock()
		if last.State != from {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-changed:
		}
	}
}

// WaitHeld implements [Store.WaitHeld]: the call is at hand, so it is
// Wait.
func (s *MemoryStore) WaitHeld(ctx context.Context, id string, from State) (Call, error) {
	return s.Wait(ctx, id, from)
}

// Ping implements [Store.Ping]: memory is always there.
func (s *MemoryStore) Ping(context.Context) error { return nil }

// Announced implements [Store.Announced].
func (s *MemoryStore) Announced(ctx context.Context, ids []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, id := range ids {
		if m := s.lookup(id, now); m != nil {
			m.announced = true
		}
	}
	return nil
}

// Unannounced implements [Store.Unannounced]: a waiting call's time in
// its state is its time since Park.
func (s *MemoryStore) Unannounced(ctx context.Context, olderThan time.Duration, limit int, maxBytes int64) ([]Call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ms := s.selectInState(now, Waiting, limit, false, func(m *memCall) bool {
		return !m.announced && !m.since.After(now.Add(-olderThan)) && overdue(m.c, now) == ""
	})
	ms = ms[:fitting(len(ms), maxBytes, func(i int) int64 { return storedBytes(ms[i].c) })]
	out := make([]Call, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.c.out())
	}
	return out, nil
}

// fitting is how many of n calls, the first first, a listing bounded to
// maxBytes returns (Store.Unannounced): as many as fit, and at least the
// first.
func fitting(n int, maxBytes int64, size func(i int) int64) int {
	if maxBytes <= 0 {
		return n
	}
	var used int64
	for i := range n {
		if used += size(i); used > maxBytes && i > 0 {
			return i
		}
	}
	return n
}

// storedBytes is what a call holds for a listing bounded in bytes: its
// large fields.
func storedBytes(c Call) int64 {
	n := len(c.Brief) + len(c.Info) + len(c.Request)
	if c.Result != nil {
		n += len(c.Result.Body)
	}
	return int64(n)
}
