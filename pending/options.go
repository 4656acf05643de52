package pending

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Options configure a store. The zero value gives the defaults.
type Options struct {
	// Prefix starts every Redis key and the pub/sub channel (default
	// "toolgate:"). RedisStore turns it into one hash tag, so it must not
	// contain '{' or '}'. Two stores with the same prefix on the same Redis
	// are replicas of one store. MemoryStore ignores it.
	Prefix string

	// ResultTTL is how long a call is kept after it finished (default
	// 24h): the agent can fetch its result and approvers can see what
	// happened. A call that never finishes is kept until its expiry (or
	// lease) plus ResultTTL. Retention keeps memory and keys bounded
	// (docs/security.md, INV-8).
	ResultTTL time.Duration

	// PollInterval is how often RedisStore.Wait re-reads a call when no
	// pub/sub wake-up came (default 500ms). Pub/sub drops messages while
	// reconnecting, so polling bounds how late a missed wake-up is seen;
	// it bounds as long how long RedisStore.FindGrant trusts that no
	// grant exists (redis_nogrants.go). MemoryStore ignores it.
	PollInterval time.Duration

	// MaxParked caps the calls waiting or approved in the store, and
	// MaxParkedPerPrincipal those of one Call.Principal (a call without
	// a principal counts only towards MaxParked). Park of a new call
	// beyond either cap gives ErrTooMany; attaching to a parked call is
	// always allowed. A call past its expiry no longer counts, swept or
	// not. Zero means no cap. The caps also bound the ended calls kept
	// (memory_ended.go): MaxParkedPerPrincipal those of one principal
	// (RedisStore: at its next Park), MaxParked all (MemoryStore).
	MaxParked             int
	MaxParkedPerPrincipal int

	// MaxBytesPerPrincipal caps, in MemoryStore, the bytes one
	// Call.Principal's calls waiting or approved hold (their Request,
	// Info and Brief): each keeps its whole request in the process's
	// memory, so the count cap alone let one agent with 1 MiB bodies hold
	// some 200 MiB. Park of a new call past it gives ErrTooMany. Zero
	// means no cap. RedisStore ignores it: Redis's own maxmemory bounds
	// what it holds.
	MaxBytesPerPrincipal int64
	// MaxBytes caps the same over all principals (MemoryStore), and the
	// ended calls kept (their arguments and results) as much.
	MaxBytes int64

	// ParkEvery and ParkBurst bound how often one Call.Principal parks
	// new calls (rate.go): ParkBurst at once, then one every ParkEvery.
	// The caps bound how many calls a principal holds, not how often it
	// parks; each new call is announced to the approvers, so an agent that
	// parks and cancels in a loop would reach them as fast as it can. Park
	// of a new call past the rate gives a *RateError (ErrTooMany);
	// attaching is always allowed, and a call without a principal is not
	// limited. Zero ParkEvery means no limit; ParkBurst defaults to 1.
	ParkEvery time.Duration
	ParkBurst int

	// ApprovedWindow is how long an approved call can at least still be
	// claimed (default 30s): an approval moves the call's expiry to now +
	// ApprovedWindow when that is later, so that an approval landing just
	// before the expiry still runs.
	ApprovedWindow time.Duration

	// MinReplicas, when positive, makes RedisStore confirm every park,
	// decision and claim with WAIT: the transition counts only once that
	// many replicas acknowledged it within ReplicaTimeout (default 1s),
	// else it gives ErrNotReplicated. Replication is asynchronous: a
	// write acknowledged by the primary alone is lost when a replica
	// without it is promoted, and a claim lost so could hand an approved
	// call to a second executor. An unconfirmed claim is never executed.
	// MemoryStore ignores it.
	MinReplicas    int
	ReplicaTimeout time.Duration

	// Shards spreads RedisStore's calls over that many hash-tagged key
	// families (1, 2, 4, 8, 16 or 32; default 1), so that on a Redis
	// Cluster they land on every primary (redis_shards.go). A call's
	// shard is read from its ID, which the caller makes with PlaceID so
	// that a principal's calls share one: its cap and the retries that
	// attach stay single-slot, atomic. Every replica on one prefix must
	// use the same number, and it cannot change while calls are parked
	// (Ping refuses a mismatch). MemoryStore ignores it.
	Shards int

	// MaxSessions caps the MCP session bindings a MemoryStore keeps
	// (default 100000): expired ones are dropped as new ones come, and a
	// binding past the cap is refused (ErrTooManySessions). RedisStore
	// ignores it: every binding is a key with a TTL.
	MaxSessions int

	// MaxSessionsPerPrincipal caps the live MCP session bindings one
	// principal may have (default 1000), in both stores: past it a new
	// binding is refused (ErrTooManySessions, a *SessionCapError), so one
	// caller opening sessions in a loop cannot fill MaxSessions for every
	// other caller, nor grow Redis without bound. In Redis the count is a
	// sorted set per principal, apart from the session keys (a Cluster
	// holds them on other slots): approximate by the few bindings that
	// race the count, and an entry leaves it a TTL after its binding,
	// however long the session is then kept in use (a touch would cost
	// every MCP message a second round trip): there it bounds the sessions
	// a principal opens per TTL.
	MaxSessionsPerPrincipal int

	// Now is MemoryStore's clock (default time.Now); tests move it.
	// RedisStore ignores it: it uses Redis' own clock (TIME) so that
	// replicas' clock skew changes nothing.
	Now func() time.Time
}

// Defaults.
const (
	DefaultPrefix         = "toolgate:"
	DefaultResultTTL      = 24 * time.Hour
	DefaultPollInterval   = 500 * time.Millisecond
	DefaultApprovedWindow = 30 * time.Second
	DefaultMaxSessions    = 100000
	// DefaultMaxSessionsPerPrincipal is MaxSessionsPerPrincipal's default.
	DefaultMaxSessionsPerPrincipal = 1000
	// DefaultReplicaTimeout is how long WAIT waits for replicas (MinReplicas).
	DefaultReplicaTimeout = time.Second
)

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.ResultTTL <= 0 {
		o.ResultTTL = DefaultResultTTL
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.ApprovedWindow <= 0 {
		o.ApprovedWindow = DefaultApprovedWindow
	}
	if o.MaxParked < 0 {
		o.MaxParked = 0
	}
	if o.MaxParkedPerPrincipal < 0 {
		o.MaxParkedPerPrincipal = 0
	}
	if o.ParkEvery < 0 {
		o.ParkEvery = 0
	}
	// Whole milliseconds, rounded up, as the park script keeps them, so
	// that both stores allow the same rate, and never more than asked.
	o.ParkEvery = (o.ParkEvery + time.Millisecond - 1).Truncate(time.Millisecond)
	if o.ParkBurst <= 0 {
		o.ParkBurst = 1
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerPrincipal <= 0 {
		o.MaxSessionsPerPrincipal = DefaultMaxSessionsPerPrincipal
	}
	if o.MinReplicas < 0 {
		o.MinReplicas = 0
	}
	if o.ReplicaTimeout <= 0 {
		o.ReplicaTimeout = DefaultReplicaTimeout
	}
	if o.Shards <= 0 {
		o.Shards = 1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// The checks below catch programmer errors (a call without an ID, a
// decision that is not one) before they reach a store, identically for
// every store.

var errInvalid = errors.New("pending: invalid argument")

func checkPark(c Call, ttl time.Duration) error {
	if c.ID == "" {
		return fmt.Errorf("%w: a call needs an ID", errInvalid)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: parking %s with ttl %v", errInvalid, c.ID, ttl)
	}
	return checkQuorum(c)
}

func checkDecision(to State) error {
	if to != Approved && to != Rejected {
		return fmt.Errorf("%w: a decision is approved or rejected, not %q", errInvalid, to)
	}
	return nil
}

func checkOutcome(to State) error {
	if to != Executed && to != Failed && to != Unknown {
		return fmt.Errorf("%w: a finished call is executed, failed or unknown, not %q", errInvalid, to)
	}
	return nil
}

func checkState(s State) error {
	if s.Valid() {
		return nil
	}
	return fmt.Errorf("%w: no state %q", errInvalid, s)
}

// Valid reports whether s is one of the states of a parked call.
func (s State) Valid() bool { return slices.Contains(allStates[:], s) }

func checkLease(lease time.Duration) error {
	if lease <= 0 {
		return fmt.Errorf("%w: lease %v", errInvalid, lease)
	}
	return nil
}

func notFound(id string) error { return fmt.Errorf("%w: %s", ErrNotFound, id) }

func fenced(id string, fence int64) error {
	return fmt.Errorf("%w: call %s, fence %d", ErrFenced, id, fence)
}

func lapsed(id string, fence int64) error {
	return fmt.Errorf("%w: call %s, fence %d", ErrLapsed, id, fence)
}

func tooMany(id, principal string, perPrincipal bool, limit int) error {
	if perPrincipal {
		return fmt.Errorf("%w: parking %s: principal %q is at its cap of %d calls waiting or approved", ErrTooMany, id, principal, limit)
	}
	return fmt.Errorf("%w: parking %s: the store is at its cap of %d calls waiting or approved", ErrTooMany, id, limit)
}

func idTaken(id string) error {
	return fmt.Errorf("pending: the ID %s is taken by another request: %w", id, ErrConflict)
}

// clone returns a deep copy of c, so that a caller's slices and maps are
// never shared with the store.
func (c Call) clone() Call {
	c.Request = cloneBytes(c.Request)
	c.Info = cloneBytes(c.Info)
	c.Brief = cloneBytes(c.Brief)
	res := c.Result
	c.Result = nil
	c = c.out()
	if res != nil {
		r := *res
		r.Body = cloneBytes(r.Body)
		r.Header = cloneHeader(r.Header)
		c.Result = &r
	}
	return c
}

// out returns the copy of a stored call the memory store hands out: what
// the store changes in place (the quorum, the approvals, the result's
// header map) is copied, and the bytes, never changed once stored, are
// shared (see [Store]). An ask used to copy its request and call info at
// every transition: some 7 KiB per call.
func (c Call) out() Call {
	c.Quorum = slices.Clone(c.Quorum)
	if c.Approvals != nil {
		as := make([]Approval, len(c.Approvals))
		for i, a := range c.Approvals {
			a.Counts = slices.Clone(a.Counts)
			as[i] = a
		}
		c.Approvals = as
	}
	if c.Result != nil {
		r := *c.Result
		r.Header = cloneHeader(r.Header)
		c.Result = &r
	}
	return c
}

// decided returns the copy of a stored call that Decide and Cancel
// return: out, without Request (see Store.Decide).
func (c Call) decided() Call {
	c.Request = nil // before out: it is not copied only to be dropped
	return c.out()
}

// cloneHeader copies h: its values share one backing array, each capped
// at its own length so that an append to one never reaches another. A
// nil or empty list of values stays nil or empty.
func cloneHeader(h map[string][]string) map[string][]string {
	if h == nil {
		return nil
	}
	n := 0
	for _, v := range h {
		n += len(v)
	}
	all := make([]string, 0, n)
	out := make(map[string][]string, len(h))
	for k, v := range h {
		if len(v) == 0 {
			out[k] = v[:0:0]
			continue
		}
		i := len(all)
		all = append(all, v...)
		out[k] = all[i:len(all):len(all)]
	}
	return out
}

// brief returns the fields of c that ListBrief returns, copied.
func (c Call) brief() Call {
	b := Call{
		ID: c.ID, State: c.State, Subject: c.Subject, Principal: c.Principal, Upstream: c.Upstream, Tool: c.Tool,
		CreatedAt: c.CreatedAt, ExpiresAt: c.ExpiresAt, Quorum: c.Quorum, Approvals: c.Approvals,
		DecidedBy: c.DecidedBy, Brief: c.Brief,
	}
	return b.out()
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// attachable reports whether retries with c's AttachKey or ArgsKey attach
// to c: it is live, or it ended with an outcome its caller has not
// received yet: a result (executed), or a refusal (rejected, expired).
// Cancelled, failed and unknown calls are not: an identical call after
// them is a new call (a cancel came from the caller itself).
func attachable(c Call) bool {
	switch c.State {
	case Waiting, Approved, Executing:
		return true
	case Executed, Rejected, Expired:
		return !c.Delivered
	}
	return false
}
