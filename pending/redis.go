package pending

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
// Every key of a call carries the hash tag of its shard, derived from the
// prefix ("{toolgate}:call:<id>", "{toolgate}:due", … with one shard,
// "{toolgate:7}:call:<id>" with Options.Shards 16), so a call and the
// indexes of its shard live in one Cluster slot and every transition is
// a single-slot Lua script: atomic, with its indexes, TTLs and attach key
// in the same step. Shards spread the calls over a Cluster's primaries;
// a principal's calls share one (redis_shards.go).
//
// The store never lists the keyspace (no KEYS, no SCAN): it reads sorted-set
// indexes. Every key has a TTL (deadline + ResultTTL while live, finish +
// ResultTTL once terminal), so nothing outlives its retention even if no
// sweeper ever runs. Expiry is enforced by the transitions themselves,
// against Redis' clock: a sweeper (Expire) only makes it visible sooner
// (docs/security.md, R14).
//
// Layout, with the default prefix and one shard (with more, each shard's
// keys are under its own tag; the layout and grants stay under {toolgate}):
//
//	{toolgate}:call:<id>       string: the call, its fields packed (see redis_scripts.go)
//	{toolgate}:state:waiting   sorted set of waiting IDs by expiry
//	{toolgate}:state:<state>   sorted set of IDs by when they entered <state>
//	{toolgate}:due             sorted set of approved IDs by expiry
//	{toolgate}:leases          sorted set of executing IDs by lease end
//	{toolgate}:attach:<key>    string: the ID a Call.AttachKey or Call.ArgsKey attaches to
//	{toolgate}:parked:<principal>  sorted set of the waiting and approved IDs of one Call.Principal, by expiry
//	{toolgate}:ended:<principal>   sorted set of the ended IDs of one Call.Principal, by when they ended
//	{toolgate}:unannounced     sorted set of waiting IDs not yet Announced, by CreatedAt
//	{toolgate}:unresolved      sorted set of "<state>:<ID>" ends not yet Resolved, by when reached
//	{toolgate}:session:<id>    string: the owner of an MCP session (redis_session.go)
//	{toolgate}:listed:<upstream>  hash: what listings told of each tool (redis_listings.go)
//	{toolgate}:layout          string: the number of shards (checkLayout)
//	toolgate:events            pub/sub channel; message = ID of a changed call
type RedisStore struct {
	rdb   redis.UniversalClient
	base  string   // "{tag}:": grants, the layout, shard 0 with one shard
	bases []string // each shard's key base (redis_shards.go)
	// unannouncedFrom and unresolvedFrom turn the shard each listing
	// bounded in bytes starts at (collectBounded): one counter for both,
	// listed one after the other, would start each at the same shards.
	unannouncedFrom, unresolvedFrom atomic.Uint32
	channel                         string
	// scriptChannel is the channel as the scripts take it: on a Cluster
	// with '{' before it, their mark for SPUBLISH (redis_scripts.go). Made
	// once, not at every script call.
	scriptChannel string
	// common holds, by key base, the arguments every script takes first
	// (scriptArgs), made into interface values once: boxing them again
	// was three allocations of every round trip.
	common map[string][]any
	// shardedPubSub: on a Cluster, transitions are published on their
	// shard's channel ("{tag:i}:events", SPUBLISH), which stays on the
	// shard's nodes; a message on the global channel crosses the cluster
	// bus, where 1.5% of them took 30-42 ms (a test Cluster of 3 primaries,
	// 400 messages), against a 0.6 ms p99 sharded.
	shardedPubSub bool
	// cluster: the scripts declare every key they touch (redis_declare.go).
	cluster bool
	// shardKeys holds each shard's index keys, by key base (shardKeys).
	shardKeys map[string][]string
	seen      seenKeys // on a Cluster, the keys calls met declared
	resultTTL time.Duration
	poll      time.Duration
	window    time.Duration // Options.ApprovedWindow

	maxParked, maxPerPrincipal int
	maxSessionsPer             int           // MaxSessionsPerPrincipal (redis_session.go)
	parkEvery                  time.Duration // Options.ParkEvery, ParkBurst: the rate of parks (rate.go)
	parkBurst                  int
	minReplicas                int           // Options.MinReplicas: WAIT after transitions
	replicaTimeout             time.Duration // Options.ReplicaTimeout

	mu      sync.Mutex
	waiters map[string]map[chan State]struct{} // call ID → waiting Wait calls
	sub     *subscription                      // nil until the first Wait
	closed  bool
	heard   heard // redis_heard.go
	peeks   peeks // redis_peek.go

	viaPubSub, viaPoll atomic.Uint64
	layoutOK           atomic.Bool // checkLayout passed

	// fnState says whether the transitions run as functions
	// (redis_functions.go); fnMu makes one load at a time.
	fnState atomic.Int32
	fnMu    sync.Mutex
	fnWhy   atomic.Pointer[string] // why Redis refused it (Scripts)
	fnRetry atomic.Int64           // no load before this (UnixNano)
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
	if err := checkShards(opts.Shards); err != nil {
		return nil, err
	}
	_, cluster := rdb.(*redis.ClusterClient)
	s := &RedisStore{
		rdb:           rdb,
		shardedPubSub: cluster,
		cluster:       cluster,
		base:          "{" + tag + "}:",
		bases:         shardBases(tag, opts.Shards),
		channel:       opts.Prefix + "events",
		scriptChannel: scriptChannel(opts.Prefix+"events", cluster),
		resultTTL:     opts.ResultTTL,
		poll:          opts.PollInterval,
		window:        opts.ApprovedWindow,
		waiters:       make(map[string]map[chan State]struct{}),

		maxParked:       opts.MaxParked,
		maxPerPrincipal: opts.MaxParkedPerPrincipal,
		maxSessionsPer:  opts.MaxSessionsPerPrincipal,
		parkEvery:       opts.ParkEvery,
		parkBurst:       opts.ParkBurst,
		minReplicas:     opts.MinReplicas,
		replicaTimeout:  opts.ReplicaTimeout,
	}
	s.common = map[string][]any{s.base: s.commonArgs(s.base)}
	for _, b := range s.bases {
		s.common[b] = s.commonArgs(b)
	}
	if cluster {
		s.shardKeys = make(map[string][]string, len(s.bases))
		for _, b := range s.bases {
			s.shardKeys[b] = shardKeys(b)
		}
	}
	return s, nil
}

// refusedForMemory reports whether err is Redis refusing a park for
// memory (maxmemory with noeviction), which must stay refused: Redis
// judges an EVAL script by its first write, and the park script's is a
// trim (not refused out of memory), after which its SETs would pass
// maxmemory. An agent could otherwise grow a full Redis with calls until
// the host kills it. Transitions of calls already parked still fall back,
// so that a full Redis can still decide, run and end them.
func refusedForMemory(sc *redis.Script, err error) bool {
	return sc == parkScript && err != nil && strings.HasPrefix(err.Error(), "OOM ")
}

func (s *RedisStore) callKey(id string) string { return s.baseOf(id) + "call:" + id }

// run runs a script on the shard whose keys start with base (keys are
// some of them), with the common arguments (see redis_scripts.go).
func (s *RedisStore) run(ctx context.Context, sc *redis.Script, base string, keys []string, args ...any) ([]any, error) {
	return s.eval(ctx, sc, false, keys, s.scriptArgs(base, "", args))
}

// eval runs a script with its arguments all given, confirmed by WAIT when
// replicated and MinReplicas is set (evalReplicated).
func (s *RedisStore) eval(ctx context.Context, sc *redis.Script, replicated bool, keys []string, all []any) ([]any, error) {
	if replicated && s.minReplicas > 0 {
		return s.evalReplicated(ctx, sc, keys, all)
	}
	if fn := s.function(ctx, sc); fn != "" {
		v, err := s.rdb.FCall(ctx, fn, keys, all...).Slice()
		if !s.functionGone(err) || refusedForMemory(sc, err) {
			return v, err
		}
	}
	return sc.Run(ctx, s.rdb, keys, all...).Slice()
}

// scriptArgs puts the common arguments before a script's own, and the
// call's ID first among those of a script on one call (id not empty).
func (s *RedisStore) scriptArgs(base, id string, args []any) []any {
	all := make([]any, 0, 4+len(args))
	common, ok := s.common[base]
	if !ok {
		common = s.commonArgs(base)
	}
	all = append(all, common...)
	if id != "" {
		all = append(all, id)
	}
	return append(all, args...)
}

// commonArgs are the arguments every script on base takes first.
func (s *RedisStore) commonArgs(base string) []any {
	return []any{base, s.resultTTL.Milliseconds(), s.scriptChannel}
}

// scriptChannel is channel as the scripts take it (RedisStore.scriptChannel).
func scriptChannel(channel string, sharded bool) string {
	if sharded {
		return "{" + channel
	}
	return channel
}

// runOn runs a script that takes a call ID first on the call's shard.
func (s *RedisStore) runOn(ctx context.Context, sc *redis.Script, id string, args ...any) ([]any, error) {
	return s.runCall(ctx, sc, false, id, nil, args...)
}

// Park implements [Store.Park]. Parking again a call whose ID is taken by
// the same request (same RequestDigest) returns the stored call: go-redis
// may retry a park whose reply was lost (docs/security.md, R02), and the
// retry must not fail.
func (s *RedisStore) Park(ctx context.Context, c Call, ttl time.Duration) (Call, bool, error) {
	if err := checkPark(c, ttl); err != nil {
		return Call{}, false, err
	}
	// A replica with another number of shards than the others would park
	// where they never look: it parks nothing (checked once).
	if err := s.checkLayout(ctx); err != nil {
		return Call{}, false, fmt.Errorf("pending: parking %s: %w", c.ID, err)
	}
	ttlMS := max(ttl.Milliseconds(), 1)
	others, err := s.parkedElsewhere(ctx, c.ID)
	if err != nil {
		return Call{}, false, fmt.Errorf("pending: parking %s: %w", c.ID, err)
	}
	base := s.baseOf(c.ID)
	lens, data := largeFields(c)
	args := []any{
		ttlMS, packDigest(c.RequestDigest), c.AttachKey, c.Principal, s.maxParked, s.maxPerPrincipal, c.ArgsKey, others, lens, data,
		s.parkEvery.Milliseconds(), s.parkBurst, // whole ms: withDefaults rounded it up
	}
	add := func(field, value string) {
		if value != "" {
			args = append(args, field, value)
		}
	}
	if c.AttachKey != "" && c.AttachKey == c.ArgsKey {
		// the usual call: no Idempotency-Key, found by its arguments
		// alone. One digest in the record, not two.
		add("aa", "1")
	} else {
		add("ak", packDigest(c.AttachKey))
	}
	add("ag", packDigest(c.ArgsKey))
	add("ad", packDigest(c.ArgsDigest))
	add("sb", c.Subject)
	add("up", c.Upstream)
	add("tl", c.Tool)
	add("pr", c.Principal)
	add("rd", packDigest(c.RequestDigest))
	add("qm", encodeInts(c.Quorum))
	var more []string
	if s.cluster {
		more = append(callOwnKeys(base, c), abandonedKey(base, c.ID))
		if c.Principal != "" && s.parkEvery > 0 {
			more = append(more, base+"rate:"+c.Principal) // only Park reads it
		}
	}
	mark, heard := s.markHeard()
	v, err := s.runCall(ctx, parkScript, true, c.ID, more, args...)
	if err != nil {
		return Call{}, false, fmt.Errorf("pending: parking %s: %w", c.ID, err)
	}
	if len(v) == 1 && v[0] == "abandoned" {
		return Call{}, false, fmt.Errorf("pending: parking %s: %w", c.ID, ErrAbandoned)
	}
	if len(v) >= 2 && v[0] == "toomany" {
		switch v[1] {
		case "principal":
			return Call{}, false, tooMany(c.ID, c.Principal, true, s.maxPerPrincipal)
		case "rate":
			ms, _ := v[len(v)-1].(string)
			n, _ := strconv.ParseInt(ms, 10, 64)
			return Call{}, false, &RateError{ID: c.ID, Principal: c.Principal, Burst: s.parkBurst, Every: s.parkEvery, RetryAfter: time.Duration(n) * time.Millisecond}
		}
		return Call{}, false, tooMany(c.ID, c.Principal, false, s.maxParked)
	}
	var code string
	var got Call
	if len(v) == 3 && v[0] == "new" {
		code = "new"
		got, err = parkedCall(c, data, v[1], v[2])
	} else {
		code, got, err = reply(c.ID, v)
	}
	if err != nil {
		return Call{}, false, fmt.Errorf("pending: parking %s: %w", c.ID, err)
	}
	if heard && (code == "new" || code == "ok" || code == "attached") {
		s.parkedHeard(got.ID, mark, got.State)
	}
	if heard && (code == "new" || code == "ok") && got.State == Waiting {
		s.keepPeek(got, mark)
	}
	switch code {
	case "new", "ok":
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
	v, err := s.rdb.Get(ctx, s.callKey(id)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return Call{}, notFound(id)
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return s.getEarlier(ctx, id)
	case err != nil:
		return Call{}, fmt.Errorf("pending: getting %s: %w", id, err)
	}
	c, err := decodeRecord(id, v)
	if err != nil {
		return Call{}, fmt.Errorf("pending: getting %s: %w", id, err)
	}
	if s.cluster {
		s.seen.put(id, callOwnKeys(s.baseOf(id), c)) // a decision often follows
	}
	return c, nil
}

// Attaches implements [Store.Attaches]: the ID the attach key names, in
// the shard of c's ID as Park looks it up, then the call, judged as Park
// judges it. Two reads; only a call a grant would let run asks.
func (s *RedisStore) Attaches(ctx context.Context, c Call) (Call, error) {
	if c.AttachKey == "" {
		return Call{}, notFound(c.ID)
	}
	// A replica that would park elsewhere than the others would look
	// elsewhere too, and find nothing: it says so, as Park does.
	if err := s.checkLayout(ctx); err != nil {
		return Call{}, fmt.Errorf("pending: looking up %s's attach key: %w", c.ID, err)
	}
	id, err := s.rdb.Get(ctx, s.baseOf(c.ID)+"attach:"+c.AttachKey).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return Call{}, notFound(c.ID)
	case err != nil:
		return Call{}, fmt.Errorf("pending: looking up %s's attach key: %w", c.ID, err)
	}
	got, err := s.Get(ctx, id)
	if err != nil {
		return Call{}, err // ErrNotFound: gone, so it attaches nothing
	}
	// Judged as stored, not as it would stand past its deadline: Park
	// judges that by Redis' clock, which this replica's may run behind or
	// ahead of. An executing call whose lease ran out a moment ago may be
	// named, and the call asks; never the other way, in which a grant
	// would run a retry beside the call still executing.
	if !attachable(got) {
		return Call{}, notFound(c.ID)
	}
	return got, nil
}

// getEarlier reads a call an earlier release stored: a hash and a body key
// (redis_scripts.go, earlier).
func (s *RedisStore) getEarlier(ctx context.Context, id string) (Call, error) {
	base := s.baseOf(id)
	var hash *redis.MapStringStringCmd
	var body *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // one slot: one node
		hash = p.HGetAll(ctx, base+"call:"+id)
		body = p.Get(ctx, base+"body:"+id)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Call{}, fmt.Errorf("pending: getting %s: %w", id, err)
	}
	m := hash.Val()
	if len(m) == 0 {
		return Call{}, notFound(id)
	}
	c, err := decodeCall(id, func(yield func(string, string) bool) {
		for f, v := range m {
			if !yield(f, v) {
				return
			}
		}
		decodeBody(body.Val(), yield)
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
	var claim int64
	if d.To == Approved && d.Claim > 0 && s.minReplicas == 0 {
		// Not where replicas must confirm each transition: an approval
		// they did not confirm still stands, and the held request's own
		// claim may be confirmed once they answer again; a claim made
		// with it and not confirmed would never run.
		claim = max(d.Claim.Milliseconds(), 1)
	}
	args := []any{string(d.To), d.By, d.Comment, nonce(), s.window.Milliseconds(), encodeInts(d.Counts), claim}
	v, err := s.runCall(ctx, fromWaitingScript, true, id, nil, args...)
	if err != nil && (claim > 0 || !errors.Is(err, ErrNotReplicated)) {
		// A decision without an answer is asked again, as Claim asks: one
		// that ran answers as it did (its nonce), unless the call moved on
		// since; one that did not runs now. Without this an approver
		// would hear "not recorded" of an approval that stands, and a
		// claim made with it would never run.
		v, err = s.askAgain(ctx, fromWaitingScript, id, args, err)
	}
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
	if err := ctx.Err(); err != nil {
		// Gone before asking (a replica shutting down, a caller who
		// left): nothing was sent, and askAgain must not claim for it.
		return Call{}, fmt.Errorf("pending: claiming %s: %w", id, err)
	}
	args := []any{max(lease.Milliseconds(), 1), nonce()}
	v, err := s.runCall(ctx, claimScript, true, id, nil, args...)
	if err != nil {
		v, err = s.askAgain(ctx, claimScript, id, args, err)
	}
	if err != nil {
		return Call{}, fmt.Errorf("pending: claiming %s: %w", id, err)
	}
	return s.transition("claiming", id, v)
}

// claimRecovery bounds how long a claim without an answer is asked again.
const claimRecovery = 5 * time.Second

// askAgain asks again, with the same arguments and so the same nonce, for
// a claim that got no answer (a reply lost or late, or the caller gone
// while it was on its way): sc is the claim script, or the decide script
// claiming with its approval. The claim may have run: the call is then
// executing under this nonce, and nothing but its lease moves it on, so
// it would end unknown without ever having been sent, its approval lost.
// The script answers ok to a claim it already made with this nonce, and
// makes one it did not; either way the caller holds the claim and runs
// the call. The asks run on a context of their own, bounded by
// claimRecovery: a caller that left still gets the claim, and runs the
// call for a retry to take, as a sweeper would. err, the first ask's, is
// returned when none answers.
func (s *RedisStore) askAgain(ctx context.Context, sc *redis.Script, id string, args []any, err error) ([]any, error) {
	return s.askAgainFor(ctx, claimRecovery, true, sc, id, args, err)
}

// askAgainFor asks sc again with args, as askAgain does, for at most
// bound; replicated as runCall takes it.
func (s *RedisStore) askAgainFor(ctx context.Context, bound time.Duration, replicated bool, sc *redis.Script, id string, args []any, err error) ([]any, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if v, again := s.runCall(rctx, sc, replicated, id, nil, args...); again == nil {
			return v, nil
		}
		if !sleep(rctx, wait) {
			return nil, err
		}
	}
}

// finishRecovery bounds how long a finish without an answer is asked
// again: about what is left of a claim's lease once its call has been
// sent (an execution ends resultMargin before the lease, at least 5 s).
// Past the lease the finish script answers lapsed (the call is unknown),
// so asking longer changes nothing. A finish whose context has a deadline
// (a held agent waits on the result) asks again until then at most.
const finishRecovery = 30 * time.Second

// Finish implements [Store.Finish]. A Finish after the lease ran out (by
// Redis' clock) is fenced even if Expire has not run yet: the call becomes
// Unknown, since others may already have given it up. Redis replies the
// finished call's short fields but the result, which it puts back from
// res (storedResult): a result as large as the largest kept, and the
// call's information, would otherwise come back to the replica that
// just sent or claimed them.
func (s *RedisStore) Finish(ctx context.Context, id string, fence int64, to State, res Result) (Call, error) {
	return s.finish(ctx, id, fence, to, res, false)
}

// FinishDeliver implements [Store.FinishDeliver]: the finish script sets
// the delivered flag with the result, and the move to a terminal state
// then drops the attach keys, as the deliver script does.
func (s *RedisStore) FinishDeliver(ctx context.Context, id string, fence int64, to State, res Result) (Call, error) {
	return s.finish(ctx, id, fence, to, res, true)
}

func (s *RedisStore) finish(ctx context.Context, id string, fence int64, to State, res Result, deliver bool) (Call, error) {
	if err := checkOutcome(to); err != nil {
		return Call{}, err
	}
	args := []any{strconv.FormatInt(fence, 10), string(to), nonce(), "rs", res.Status}
	var header []byte
	if len(res.Header) > 0 {
		var err error
		if header, err = json.Marshal(res.Header); err != nil {
			return Call{}, fmt.Errorf("pending: finishing %s: %w", id, err)
		}
		args = append(args, "rh", header)
	}
	if len(res.Body) > 0 {
		args = append(args, "rb", res.Body)
	}
	if res.Truncated {
		args = append(args, "rt", "1")
	}
	if deliver {
		args = append(args, "dl", "1")
	}
	v, err := s.runOn(ctx, finishScript, id, args...)
	if err != nil {
		// The call was sent: its result, unrecorded, would be lost and
		// the call end unknown. The same finish, asked again with its
		// nonce, answers as the first did if that one ran (finishScript).
		bound := finishRecovery
		if d, ok := ctx.Deadline(); ok {
			bound = min(bound, time.Until(d)) // a caller waiting on the result bounds it
		}
		v, err = s.askAgainFor(ctx, bound, false, finishScript, id, args, err)
	}
	if err != nil {
		return Call{}, fmt.Errorf("pending: finishing %s: %w", id, err)
	}
	code, c, err := reply(id, v)
	if err != nil {
		return Call{}, fmt.Errorf("pending: finishing %s: %w", id, err)
	}
	switch code {
	case "ok":
		// The reply leaves the result out (finishScript): it is the one
		// sent, as the store now holds it.
		c.Result, err = storedResult(res, header)
		if err != nil {
			return Call{}, fmt.Errorf("pending: finishing %s: %w", id, err)
		}
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
	v, err := s.runOn(ctx, deliverScript, id, nonce())
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

// Expire implements [Store.Expire], shard by shard. It also drops index
// entries of calls whose keys have expired.
func (s *RedisStore) Expire(ctx context.Context, limit int) ([]Call, error) {
	out, err := s.collect(ctx, limit, func(base string, left int) ([]any, error) {
		if s.cluster {
			return s.expireDeclared(ctx, base, left)
		}
		return s.run(ctx, expireScript, base, []string{base + "state:waiting"}, left)
	})
	if err != nil {
		// with the calls moved before the error: they are no longer due,
		// and only this reply can report their end
		return out, fmt.Errorf("pending: expiring calls: %w", err)
	}
	return out, nil
}

// Approved implements [Store.Approved]; grace is measured on Redis' clock.
func (s *RedisStore) Approved(ctx context.Context, grace time.Duration, limit int) ([]Call, error) {
	out, err := s.collect(ctx, limit, func(base string, left int) ([]any, error) {
		return s.run(ctx, approvedScript, base, []string{base + "state:approved"}, grace.Milliseconds(), left)
	})
	if err != nil {
		return nil, fmt.Errorf("pending: listing approved calls: %w", err)
	}
	if s.cluster {
		for _, c := range out { // the sweeper claims them next
			s.seen.put(c.ID, callOwnKeys(s.baseOf(c.ID), c))
		}
	}
	return out, nil
}

// collect gathers up to limit calls from the shards, each shard's script
// asked for what is still missing. On an error it returns what it
// gathered, the failing script's partial reply included.
func (s *RedisStore) collect(ctx context.Context, limit int, script func(base string, left int) ([]any, error)) ([]Call, error) {
	return collectAs(s, limit, script, decodeList)
}

// collectAs is collect for replies that decode decodes.
func collectAs[T any](s *RedisStore, limit int, script func(base string, left int) ([]any, error), decode func([]any) ([]T, error)) ([]T, error) {
	return collectBounded(s, limit, 0, nil, func(base string, left int, _ int64, _ string) ([]any, error) { return script(base, left) }, decode)
}

// collectBounded is collectAs for the listings bounded in bytes as well
// (Store.Unannounced): each shard's script is given what is left of
// maxBytes (negative: no bound), measured as the script measures it (the
// stored values' lengths), and first ("1") while nothing is listed, so
// that the first call due is listed whatever its size. A bounded listing
// starts at the next shard each time: from a fixed one, a large call due
// on a later shard would never fit behind the calls of the earlier ones.
func collectBounded[T any](s *RedisStore, limit int, maxBytes int64, from *atomic.Uint32, script func(base string, left int, budget int64, first string) ([]any, error), decode func([]any) ([]T, error)) ([]T, error) {
	var out []T
	var used int64
	bases := s.bases
	if maxBytes > 0 && from != nil && len(bases) > 1 {
		i := int(from.Add(1) % uint32(len(bases)))
		bases = append(slices.Clone(bases[i:]), bases[:i]...)
	}
	err := eachOf(bases, func(base string) (bool, error) {
		if limit-len(out) <= 0 || (maxBytes > 0 && used >= maxBytes) {
			return false, nil
		}
		budget, first := int64(-1), "0"
		if maxBytes > 0 {
			budget = maxBytes - used
		}
		if len(out) == 0 {
			first = "1"
		}
		v, err := script(base, limit-len(out), budget, first)
		for i := 1; i < len(v); i += 2 {
			if r, ok := v[i].(string); ok {
				used += int64(len(r))
			}
		}
		got, derr := decode(v)
		out = append(out, got...)
		if err != nil {
			return false, err
		}
		return true, derr
	})
	return out, err
}

// List implements [Store.List]: oldest first means longest in state st.
func (s *RedisStore) List(ctx context.Context, st State, limit int) ([]Call, error) {
	return s.list(ctx, listScript, st, limit, false)
}

// ListBrief implements [Store.ListBrief] with one read-only script per
// shard that reads only the listed fields of each call (listBriefScript).
func (s *RedisStore) ListBrief(ctx context.Context, st State, limit int) ([]Call, error) {
	return s.list(ctx, listBriefScript, st, limit, true)
}

// list runs a list script on every shard and merges their replies by
// when each call entered st (latest first when latest), up to limit.
func (s *RedisStore) list(ctx context.Context, sc *redis.Script, st State, limit int, latest bool) ([]Call, error) {
	if err := checkState(st); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var all []scoredCall
	err := s.eachShard(func(base string) (bool, error) {
		v, err := s.run(ctx, sc, base, []string{base + "state:" + string(st)}, string(st), limit)
		if err != nil {
			return false, err
		}
		got, err := decodeScored(v)
		all = append(all, got...)
		return true, err
	})
	if err != nil {
		return nil, fmt.Errorf("pending: listing %s calls: %w", st, err)
	}
	return mergeScored(all, limit, latest, len(s.bases) > 1), nil
}

// Count implements [Store.Count] with ZCARD of the state's index in each
// shard, which every transition script keeps: no call is read.
func (s *RedisStore) Count(ctx context.Context, st State) (int, error) {
	if err := checkState(st); err != nil {
		return 0, err
	}
	cmds := make([]*redis.IntCmd, len(s.bases))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, b := range s.bases {
			cmds[i] = p.ZCard(ctx, b+"state:"+string(st))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pending: counting %s calls: %w", st, err)
	}
	n := 0
	for _, c := range cmds {
		n += int(c.Val())
	}
	return n, nil
}

// parkedElsewhere counts the calls waiting or approved, not past their
// expiry, in the shards other than id's (what MaxParked adds to the count
// the park script reads in its own): zero with one shard or no cap.
func (s *RedisStore) parkedElsewhere(ctx context.Context, id string) (int64, error) {
	if len(s.bases) == 1 || s.maxParked <= 0 {
		return 0, nil
	}
	own := s.baseOf(id)
	now := "(" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	var cmds []*redis.IntCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, b := range s.bases {
			if b != own {
				cmds = append(cmds, p.ZCount(ctx, b+"state:waiting", now, "+inf"), p.ZCount(ctx, b+"due", now, "+inf"))
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// Ping implements [Store.Ping] with PING, and checks once that the store's
// number of shards is the one recorded under its prefix (checkLayout). It
// also loads the function library ahead of the first ask, if it is not
// loaded yet (redis_functions.go): readiness checks come before asks. The
// library's refusal is not the store's, and is not returned.
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("pending: redis: %w", err)
	}
	if err := s.checkLayout(ctx); err != nil {
		return err
	}
	if s.fnState.Load() == fnUnknown && time.Now().UnixNano() >= s.fnRetry.Load() {
		_ = s.loadLibrary(ctx, s.rdb)
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
