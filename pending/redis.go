package pending

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
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
// atomicity is worth more than spreading them (SECURITY.md R20).
//
// The store never lists the keyspace (no KEYS, no SCAN): it reads sorted-set
// indexes. Every key has a TTL (deadline + ResultTTL while live, finish +
// ResultTTL once terminal), so nothing outlives its retention even if no
// sweeper ever runs. Expiry is enforced by the transitions themselves,
// against Redis' clock: a sweeper (Expire) only makes it visible sooner
// (R14).
//
// Layout, with the default prefix:
//
//	{toolgate}:call:<id>       hash: the call (see redis_scripts.go)
//	{toolgate}:state:<state>   sorted set of IDs by when they entered <state>
//	{toolgate}:due             sorted set of live IDs by expiry or lease end
//	{toolgate}:attach:<key>    string: the ID a Call.AttachKey attaches to
//	toolgate:events            pub/sub channel; message = ID of a changed call
type RedisStore struct {
	rdb       redis.UniversalClient
	base      string // "{tag}:", the start of every key
	channel   string
	resultTTL time.Duration
	poll      time.Duration

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
// caller's deadline bounds each command (R15). Parked calls survive a Redis
// restart only with persistence (AOF); an eviction policy other than
// noeviction may drop them (R17).
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
		waiters:   make(map[string]map[chan struct{}]struct{}),
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

// reply splits a per-call script's reply into its code and call.
func reply(id string, v []any) (code string, c Call, err error) {
	if len(v) == 0 {
		return "", Call{}, errors.New("pending: empty reply from Redis")
	}
	code, _ = v[0].(string)
	if len(v) > 2 {
		id, _ = v[2].(string) // attached: the call that was found
	}
	if len(v) > 1 {
		c, err = decodeFlat(id, v[1])
	}
	return code, c, err
}

// Park implements [Store.Park]. Parking again a call whose ID is taken by
// the same request (same RequestDigest) returns the stored call: go-redis
// may retry a park whose reply was lost (R02), and the retry must not fail.
func (s *RedisStore) Park(ctx context.Context, c Call, ttl time.Duration) (Call, bool, error) {
	if err := checkPark(c, ttl); err != nil {
		return Call{}, false, err
	}
	ttlMS := max(ttl.Milliseconds(), 1)
	args := []any{c.ID, ttlMS, c.RequestDigest, c.AttachKey}
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
	add("ad", c.ArgsDigest)
	add("sb", c.Subject)
	add("up", c.Upstream)
	add("tl", c.Tool)
	addBytes("rq", c.Request)
	add("rd", c.RequestDigest)
	addBytes("in", c.Info)
	v, err := s.run(ctx, parkScript, s.callKey(c.ID), args...)
	if err != nil {
		return Call{}, false, fmt.Errorf("pending: parking %s: %w", c.ID, err)
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
// methods never change state, INV-6).
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
func (s *RedisStore) Decide(ctx context.Context, id string, to State, by, comment string) (Call, error) {
	if err := checkDecision(to); err != nil {
		return Call{}, err
	}
	return s.fromWaiting(ctx, "deciding", id, to, by, comment)
}

// Cancel implements [Store.Cancel].
func (s *RedisStore) Cancel(ctx context.Context, id string) (Call, error) {
	return s.fromWaiting(ctx, "cancelling", id, Cancelled, "", "")
}

func (s *RedisStore) fromWaiting(ctx context.Context, doing, id string, to State, by, comment string) (Call, error) {
	v, err := s.run(ctx, fromWaitingScript, s.callKey(id), id, string(to), by, comment, nonce())
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
	case "notfound":
		return Call{}, notFound(id)
	}
	return Call{}, fmt.Errorf("pending: %s %s: unexpected reply %q", doing, id, code)
}

// Claim implements [Store.Claim]. A call whose expiry has passed (by
// Redis' clock) becomes Expired instead of being claimed.
func (s *RedisStore) Claim(ctx context.Context, id string, lease time.Duration) (Call, error) {
	if err := checkLease(lease); err != nil {
		return Call{}, err
	}
	v, err := s.run(ctx, claimScript, s.callKey(id), id, max(lease.Milliseconds(), 1), nonce())
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
	case "notfound":
		return Call{}, notFound(id)
	}
	return Call{}, fmt.Errorf("pending: finishing %s: unexpected reply %q", id, code)
}

// Deliver implements [Store.Deliver]. Any terminal call can be delivered
// (a refusal is an answer too); a live one gives a *StateError.
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

// Wait implements [Store.Wait]. A waiter is woken by the store's one shared
// pub/sub subscription (every transition publishes the call's ID), and also
// re-reads the call every PollInterval, because pub/sub loses what is
// published while the subscriber reconnects or sits on a demoted node
// (R12): a lost message costs at most one poll interval, never a missed
// approval. A waiter holds no pool connection while it waits (R18). Redis
// errors while waiting are not returned (the next poll tries again, R05);
// a call that vanished (Redis restarted empty, R08) gives ErrNotFound.
func (s *RedisStore) Wait(ctx context.Context, id string, from State) (Call, error) {
	wake := make(chan struct{}, 1)
	s.addWaiter(id, wake) // before reading, so no wake-up falls in between
	defer s.removeWaiter(id, wake)

	c, err := s.Get(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return c, ctx.Err()
		}
		return c, err
	}
	poll := time.NewTimer(s.pollDelay())
	defer poll.Stop()
	for c.State == from {
		viaPoll := false
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-wake:
		case <-poll.C:
			viaPoll = true
			poll.Reset(s.pollDelay())
		}
		// The state alone first: a waiter polls twice a second, and the
		// whole call (its request, its result) is read only once it moved.
		st, err := s.rdb.HGet(ctx, s.callKey(id), "st").Result()
		if err == nil && State(st) == from {
			continue
		}
		if errors.Is(err, redis.Nil) {
			err = ErrNotFound
		}
		now := c
		if err == nil {
			now, err = s.Get(ctx, id)
		}
		switch {
		case ctx.Err() != nil:
			return c, ctx.Err()
		case errors.Is(err, ErrNotFound):
			return c, err
		case err != nil:
			continue // Redis is away: keep waiting, the next poll re-reads
		}
		c = now
		if c.State != from {
			if viaPoll {
				s.viaPoll.Add(1)
			} else {
				s.viaPubSub.Add(1)
			}
		}
	}
	return c, nil
}

// WakeupsViaPubSub counts the Wait calls that saw their change through a
// pub/sub message.
func (s *RedisStore) WakeupsViaPubSub() uint64 { return s.viaPubSub.Load() }

// WakeupsViaPoll counts the Wait calls that saw their change only by
// polling: pub/sub missed it (or was slower than the poll).
func (s *RedisStore) WakeupsViaPoll() uint64 { return s.viaPoll.Load() }

// pollDelay spreads the polls of many waiters (up to a quarter shorter
// than the interval, never longer).
func (s *RedisStore) pollDelay() time.Duration {
	if j := s.poll / 4; j > 0 {
		return s.poll - mrand.N(j)
	}
	return s.poll
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

func (s *RedisStore) addWaiter(id string, wake chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters[id] == nil {
		s.waiters[id] = make(map[chan struct{}]struct{})
	}
	s.waiters[id][wake] = struct{}{}
	if s.sub == nil && !s.closed {
		ctx, stop := context.WithCancel(context.Background())
		s.sub = &subscription{stop: stop, done: make(chan struct{})}
		go s.listen(ctx, s.sub.done)
	}
}

func (s *RedisStore) removeWaiter(id string, wake chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiters[id], wake)
	if len(s.waiters[id]) == 0 {
		delete(s.waiters, id)
	}
}

// listen holds the store's one subscription and fans its messages out to
// the waiters of each call. go-redis reconnects and resubscribes by itself
// (and pings to notice a dead connection); what is published meanwhile is
// lost, which polling covers.
func (s *RedisStore) listen(ctx context.Context, done chan struct{}) {
	defer close(done)
	ps := s.rdb.Subscribe(ctx, s.channel)
	defer ps.Close()
	msgs := ps.Channel(redis.WithChannelSize(1024))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			s.notify(m.Payload)
		}
	}
}

func (s *RedisStore) notify(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for wake := range s.waiters[id] {
		select {
		case wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// nonce identifies one write, so that its retry can be recognised.
func nonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// decodeFlat decodes an HGETALL reply (field, value, …) returned by a
// script.
func decodeFlat(id string, v any) (Call, error) {
	flat, ok := v.([]any)
	if !ok || len(flat)%2 != 0 {
		return Call{}, fmt.Errorf("pending: unexpected call encoding %T", v)
	}
	return decodeCall(id, func(yield func(string, string) bool) {
		for i := 0; i < len(flat); i += 2 {
			f, _ := flat[i].(string)
			v, _ := flat[i+1].(string)
			if !yield(f, v) {
				return
			}
		}
	})
}

// decodeList decodes a reply {id, call, id, call, …}.
func decodeList(v []any) ([]Call, error) {
	if len(v)%2 != 0 {
		return nil, errors.New("pending: unexpected list reply")
	}
	var out []Call
	for i := 0; i < len(v); i += 2 {
		id, _ := v[i].(string)
		c, err := decodeFlat(id, v[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// decodeCall builds a call from its hash fields (see redis_scripts.go).
func decodeCall(id string, fields func(yield func(field, value string) bool)) (Call, error) {
	c := Call{ID: id}
	var res Result
	hasResult := false
	var err error
	ms := func(v string) time.Time {
		n, e := strconv.ParseInt(v, 10, 64)
		err = cmpErr(err, e)
		return time.UnixMilli(n)
	}
	for f, v := range fields {
		switch f {
		case "st":
			c.State = State(v)
		case "ak":
			c.AttachKey = v
		case "ad":
			c.ArgsDigest = v
		case "sb":
			c.Subject = v
		case "up":
			c.Upstream = v
		case "tl":
			c.Tool = v
		case "rq":
			c.Request = []byte(v)
		case "rd":
			c.RequestDigest = v
		case "in":
			c.Info = []byte(v)
		case "ca":
			c.CreatedAt = ms(v)
		case "ea":
			c.ExpiresAt = ms(v)
		case "by":
			c.DecidedBy = v
		case "cm":
			c.Comment = v
		case "da":
			c.DecidedAt = ms(v)
		case "fe":
			n, e := strconv.ParseInt(v, 10, 64)
			c.Fence, err = n, cmpErr(err, e)
		case "lu":
			c.LeaseUntil = ms(v)
		case "rs":
			n, e := strconv.Atoi(v)
			res.Status, hasResult, err = n, true, cmpErr(err, e)
		case "rh":
			err = cmpErr(err, json.Unmarshal([]byte(v), &res.Header))
		case "rb":
			res.Body = []byte(v)
		case "rt":
			res.Truncated = v == "1"
		case "dl":
			c.Delivered = v == "1"
		}
	}
	if err != nil {
		return Call{}, fmt.Errorf("pending: decoding call %s: %w", id, err)
	}
	if hasResult {
		c.Result = &res
	}
	return c, nil
}

// cmpErr keeps the first error.
func cmpErr(old, e error) error {
	if old != nil {
		return old
	}
	return e
}
