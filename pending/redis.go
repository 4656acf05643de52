package pending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisStore keeps parked calls in Redis, shared by every replica that uses
// the same Redis and prefix. It works with a single node, Sentinel
// (redis.NewFailoverClient) and Cluster.
//
// Every key of the store carries one hash tag derived from the prefix
// ("{toolgate}:call:<id>", "{toolgate}:due", …), so all of them live in one
// Cluster slot and every transition is a single-slot Lua script: atomic,
// with its indexes, TTLs and attach key in the same step. One slot is
// plenty for parked calls — they move at human speed — and multi-key
// atomicity is worth more than spreading them (docs/security.md, R20).
//
// The store never lists the keyspace (no KEYS, no SCAN): it reads sorted-set
// indexes. Every key has a TTL (deadline + ResultTTL while live, finish +
// ResultTTL once terminal), so nothing outlives its retention even if no
// sweeper ever runs. Expiry is enforced by the transitions themselves,
// against Redis' clock: a sweeper (Expire) only makes it visible sooner
// (docs/security.md, R14).
//
// Layout, with the default prefix:
//
//	{toolgate}:call:<id>       hash: the call (see redis_scripts.go)
//	{toolgate}:state:<state>   sorted set of IDs by when they entered <state>
//	{toolgate}:due             sorted set of live IDs by expiry or lease end
//	{toolgate}:attach:<key>    string: the ID a Call.AttachKey or Call.ArgsKey attaches to
//	{toolgate}:parked          sorted set of waiting and approved IDs by expiry (the caps)
//	{toolgate}:parked:<principal>  the same for one Call.Principal
//	{toolgate}:unannounced     sorted set of waiting IDs not yet Announced, by CreatedAt
//	{toolgate}:session:<id>    string: the owner of an MCP session (redis_session.go)
//	toolgate:events            pub/sub channel; message = ID of a changed call
type RedisStore struct {
	rdb       redis.UniversalClient
	base      string // "{tag}:", the start of every key
	channel   string
	resultTTL time.Duration
	poll      time.Duration
	window    time.Duration // Options.ApprovedWindow

	maxParked, maxPerPrincipal int
	minReplicas                int           // Options.MinReplicas: WAIT after transitions
	replicaTimeout             time.Duration // Options.ReplicaTimeout

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{} // call ID → waiting Wait calls
	sub     *subscription                         // nil until the first Wait
	closed  bool

	viaPubSub, viaPoll atomic.Uint64
}

var _ Store = (*RedisStore)(nil)

type subscription struct {
	stop context.CancelFunc
	done chan struct{}
}

// NewRedis returns a store on rdb, which the caller owns and closes (after
// Close). It does no I/O; call Ping to check that Redis answers.
//
// rdb should have redis.Options.ContextTimeoutEnabled set, so that a
// caller's deadline bounds each command (docs/security.md, R15). Parked
// calls survive a Redis restart only with persistence (AOF); an eviction
// policy other than noeviction may drop them (R17).
func NewRedis(rdb redis.UniversalClient, opts Options) (*RedisStore, error) {
	if rdb == nil {
		return nil, errors.New("pending: NewRedis needs a client")
	}
	opts = opts.withDefaults()
	tag := strings.TrimSuffix(opts.Prefix, ":")
	if tag == "" || strings.ContainsAny(tag, "{}") {
		return nil, fmt.Errorf("pending: prefix %q: it must be non-empty and must not contain '{' or '}'", opts.Prefix)
	}
	return &RedisStore{
		rdb:       rdb,
		base:      "{" + tag + "}:",
		channel:   opts.Prefix + "events",
		resultTTL: opts.ResultTTL,
		poll:      opts.PollInterval,
		window:    opts.ApprovedWindow,
		waiters:   make(map[string]map[chan struct{}]struct{}),

		maxParked:       opts.MaxParked,
		maxPerPrincipal: opts.MaxParkedPerPrincipal,
		minReplicas:     opts.MinReplicas,
		replicaTimeout:  opts.ReplicaTimeout,
	}, nil
}

func (s *RedisStore) callKey(id string) string { return s.base + "call:" + id }

// run runs a script with the common arguments (see redis_scripts.go).
func (s *RedisStore) run(ctx context.Context, sc *redis.Script, key string, args ...any) ([]any, error) {
	all := make([]any, 0, 3+len(args))
	all = append(all, s.base, s.resultTTL.Milliseconds(), s.channel)
	all = append(all, args...)
	return sc.Run(ctx, s.rdb, []string{key}, all...).Slice()
}

// Park implements [Store.Park]. Parking again a call whose ID is taken by
// the same request (same RequestDigest) returns the stored call: go-redis
// may retry a park whose reply was lost (docs/security.md, R02), and the
// retry must not fail.
func (s *RedisStore) Park(ctx context.Context, c Call, ttl time.Duration) (Call, bool, error) {
	if err := checkPark(c, ttl); err != nil {
		return Call{}, false, err
	}
	ttlMS := max(ttl.Milliseconds(), 1)
	args := []any{c.ID, ttlMS, c.RequestDigest, c.AttachKey, c.Principal, s.maxParked, s.maxPerPrincipal, c.ArgsKey}
	add := func(field, value string) {
		if value != "" {
			args = append(args, field, value)
		}
	}
	addBytes := func(field string, value []byte) { // not copied into a string
		if len(value) > 0 {
			args = append(args, field, value)
		}
	}
	add("ak", c.AttachKey)
	add("ag", c.ArgsKey)
	add("ad", c.ArgsDigest)
	add("sb", c.Subject)
	add("up", c.Upstream)
	add("tl", c.Tool)
	add("pr", c.Principal)
	addBytes("rq", c.Request)
	add("rd", c.RequestDigest)
	addBytes("in", c.Info)
	addBytes("bf", c.Brief)
	add("qm", encodeInts(c.Quorum))
	v, err := s.runReplicated(ctx, parkScript, s.callKey(c.ID), args...)
	if err != nil {
		return Call{}, false, fmt.Errorf("pending: parking %s: %w", c.ID, err)
	}
	if len(v) == 2 && v[0] == "toomany" {
		if which, _ := v[1].(string); which == "principal" {
			return Call{}, false, tooMany(c.ID, c.Principal, true, s.maxPerPrincipal)
		}
		return Call{}, false, tooMany(c.ID, c.Principal, false, s.maxParked)
	}
	code, got, err := reply(c.ID, v)
	if err != nil {
		return Call{}, false, fmt.Errorf("pending: parking %s: %w", c.ID, err)
	}
	switch code {
	case "ok":
		return got, false, nil
	case "attached":
		return got, true, nil
	case "taken":
		return Call{}, false, idTaken(c.ID)
	}
	return Call{}, false, fmt.Errorf("pending: parking %s: unexpected reply %q", c.ID, code)
}

// Get implements [Store.Get]. It only reads: a call past its expiry is
// shown as it is stored until a transition or Expire moves it (safe
// methods never change state; docs/security.md, INV-6).
func (s *RedisStore) Get(ctx context.Context, id string) (Call, error) {
	m, err := s.rdb.HGetAll(ctx, s.callKey(id)).Result()
	if err != nil {
		return Call{}, fmt.Errorf("pending: getting %s: %w", id, err)
	}
	if len(m) == 0 {
		return Call{}, notFound(id)
	}
	c, err := decodeCall(id, func(yield func(string, string) bool) {
		for f, v := range m {
			if !yield(f, v) {
				return
			}
		}
	})
	if err != nil {
		return Call{}, fmt.Errorf("pending: getting %s: %w", id, err)
	}
	return c, nil
}

// Decide implements [Store.Decide].
func (s *RedisStore) Decide(ctx context.Context, id string, d Decision) (Call, error) {
	if err := checkDecisionOf(d); err != nil {
		return Call{}, err
	}
	return s.fromWaiting(ctx, "deciding", id, d)
}

// Cancel implements [Store.Cancel].
func (s *RedisStore) Cancel(ctx context.Context, id string) (Call, error) {
	return s.fromWaiting(ctx, "cancelling", id, Decision{To: Cancelled})
}

func (s *RedisStore) fromWaiting(ctx context.Context, doing, id string, d Decision) (Call, error) {
	v, err := s.runReplicated(ctx, fromWaitingScript, s.callKey(id), id, string(d.To), d.By, d.Comment, nonce(), s.window.Milliseconds(), encodeInts(d.Counts))
	if err != nil {
		return Call{}, fmt.Errorf("pending: %s %s: %w", doing, id, err)
	}
	return s.transition(doing, id, v)
}

// transition turns a reply of the ok/conflict/notfound kind into a result.
func (s *RedisStore) transition(doing, id string, v []any) (Call, error) {
	code, c, err := reply(id, v)
	if err != nil {
		return Call{}, fmt.Errorf("pending: %s %s: %w", doing, id, err)
	}
	switch code {
	case "ok":
		return c, nil
	case "conflict":
		return Call{}, &StateError{Call: c}
	case "ended":
		return Call{}, &StateError{Call: c, Ended: true}
	case "notfound":
		return Call{}, notFound(id)
	}
	return Call{}, fmt.Errorf("pending: %s %s: unexpected reply %q", doing, id, code)
}

// Claim implements [Store.Claim]. An approved call whose expiry has passed
// (by Redis' clock) becomes Expired instead of being claimed; a call in
// another state is left as it stands.
func (s *RedisStore) Claim(ctx context.Context, id string, lease time.Duration) (Call, error) {
	if err := checkLease(lease); err != nil {
		return Call{}, err
	}
	v, err := s.runReplicated(ctx, claimScript, s.callKey(id), id, max(lease.Milliseconds(), 1), nonce())
	if err != nil {
		return Call{}, fmt.Errorf("pending: claiming %s: %w", id, err)
	}
	return s.transition("claiming", id, v)
}

// Finish implements [Store.Finish]. A Finish after the lease ran out (by
// Redis' clock) is fenced even if Expire has not run yet: the call becomes
// Unknown, since others may already have given it up.
func (s *RedisStore) Finish(ctx context.Context, id string, fence int64, to State, res Result) (Call, error) {
	if err := checkOutcome(to); err != nil {
		return Call{}, err
	}
	args := []any{id, strconv.FormatInt(fence, 10), string(to), nonce(), "rs", res.Status}
	if len(res.Header) > 0 {
		h, err := json.Marshal(res.Header)
		if err != nil {
			return Call{}, fmt.Errorf("pending: finishing %s: %w", id, err)
		}
		args = append(args, "rh", h)
	}
	if len(res.Body) > 0 {
		args = append(args, "rb", res.Body)
	}
	if res.Truncated {
		args = append(args, "rt", "1")
	}
	v, err := s.run(ctx, finishScript, s.callKey(id), args...)
	if err != nil {
		return Call{}, fmt.Errorf("pending: finishing %s: %w", id, err)
	}
	code, c, err := reply(id, v)
	if err != nil {
		return Call{}, fmt.Errorf("pending: finishing %s: %w", id, err)
	}
	switch code {
	case "ok":
		return c, nil
	case "fenced":
		return Call{}, fenced(id, fence)
	case "lapsed":
		return c, lapsed(id, fence)
	case "notfound":
		return Call{}, notFound(id)
	}
	return Call{}, fmt.Errorf("pending: finishing %s: unexpected reply %q", id, code)
}

// Deliver implements [Store.Deliver]. Any terminal call can be delivered
// (a refusal is an answer too); a live one gives a *StateError. The first
// delivery deletes the call's attach keys.
func (s *RedisStore) Deliver(ctx context.Context, id string) (bool, Call, error) {
	v, err := s.run(ctx, deliverScript, s.callKey(id), id, nonce())
	if err != nil {
		return false, Call{}, fmt.Errorf("pending: delivering %s: %w", id, err)
	}
	code, c, err := reply(id, v)
	if err != nil {
		return false, Call{}, fmt.Errorf("pending: delivering %s: %w", id, err)
	}
	switch code {
	case "first":
		return true, c, nil
	case "again":
		return false, c, nil
	case "conflict":
		return false, Call{}, &StateError{Call: c}
	case "notfound":
		return false, Call{}, notFound(id)
	}
	return false, Call{}, fmt.Errorf("pending: delivering %s: unexpected reply %q", id, code)
}

// Expire implements [Store.Expire]. It also drops index entries of calls
// whose keys have expired.
func (s *RedisStore) Expire(ctx context.Context, limit int) ([]Call, error) {
	if limit <= 0 {
		return nil, nil
	}
	v, err := s.run(ctx, expireScript, s.base+"due", limit)
	if err != nil {
		return nil, fmt.Errorf("pending: expiring calls: %w", err)
	}
	return decodeList(v)
}

// Approved implements [Store.Approved]; grace is measured on Redis' clock.
func (s *RedisStore) Approved(ctx context.Context, grace time.Duration, limit int) ([]Call, error) {
	if limit <= 0 {
		return nil, nil
	}
	v, err := s.run(ctx, approvedScript, s.base+"state:approved", grace.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("pending: listing approved calls: %w", err)
	}
	return decodeList(v)
}

// List implements [Store.List]: oldest first means longest in state st.
func (s *RedisStore) List(ctx context.Context, st State, limit int) ([]Call, error) {
	if err := checkState(st); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	v, err := s.run(ctx, listScript, s.base+"state:"+string(st), string(st), limit)
	if err != nil {
		return nil, fmt.Errorf("pending: listing %s calls: %w", st, err)
	}
	return decodeList(v)
}

// ListBrief implements [Store.ListBrief] with one read-only script that
// reads only the listed fields of each call (listBriefScript).
func (s *RedisStore) ListBrief(ctx context.Context, st State, limit int) ([]Call, error) {
	if err := checkState(st); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	v, err := s.run(ctx, listBriefScript, s.base+"state:"+string(st), string(st), limit)
	if err != nil {
		return nil, fmt.Errorf("pending: listing %s calls: %w", st, err)
	}
	return decodeList(v)
}

// Count implements [Store.Count] with ZCARD of the state's index, which
// every transition script keeps: no call is read.
func (s *RedisStore) Count(ctx context.Context, st State) (int, error) {
	if err := checkState(st); err != nil {
		return 0, err
	}
	n, err := s.rdb.ZCard(ctx, s.base+"state:"+string(st)).Result()
	if err != nil {
		return 0, fmt.Errorf("pending: counting %s calls: %w", st, err)
	}
	return int(n), nil
}

// Ping implements [Store.Ping] with PING.
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("pending: redis: %w", err)
	}
	return nil
}

// Close stops the pub/sub subscription. Waits still running fall back to
// polling. It does not close the client.
func (s *RedisStore) Close() error {
	s.mu.Lock()
	s.closed = true
	sub := s.sub
	s.sub = nil
	s.mu.Unlock()
	if sub != nil {
		sub.stop()
		<-sub.done
	}
	return nil
}
