package pending

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Wait implements [Store.Wait]. A waiter is woken by the store's one shared
// pub/sub subscription (every transition publishes the call's ID and new
// state), and also re-reads the call every PollInterval, because pub/sub
// loses what is published while the subscriber reconnects or sits on a
// demoted node (docs/security.md, R12): a lost message costs at most one
// poll interval, never a missed approval. A waiter holds no pool
// connection while it waits (R18). Redis errors while waiting are not
// returned (the next poll tries again, R05); a call that vanished (Redis
// restarted empty, R08) gives ErrNotFound.
func (s *RedisStore) Wait(ctx context.Context, id string, from State) (Call, error) {
	return s.wait(ctx, id, from, false)
}

// WaitHeld implements [Store.WaitHeld]: Wait, except that a message saying
// the call moved to Approved or Executing is taken at its word, without
// reading the call. The message is a hint, not an authority: the holder's
// Claim checks the state in the same script that claims, and a call that
// is not approved after all (a forged or stale message) comes back from
// it as a conflict, with the call as it stands; a holder told its call
// is executing waits for its end, and that wait reads the state first.
func (s *RedisStore) WaitHeld(ctx context.Context, id string, from State) (Call, error) {
	return s.wait(ctx, id, from, true)
}

func (s *RedisStore) wait(ctx context.Context, id string, from State, held bool) (Call, error) {
	wake := make(chan State, 1)
	s.addWaiter(id, wake) // before reading, so no wake-up falls in between
	defer s.removeWaiter(id, wake)

	// The state alone, here and at every poll: a held agent starts
	// waiting on the call it just parked, and a waiter polls twice a
	// second, so the whole call (its request, its result) is read only
	// once it moved, when a transition published its ID, or when ctx
	// ends. Not even that here when this replica just parked the call and
	// the subscription has heard everything since (redis_heard.go).
	st, err := from, error(nil)
	if !s.unmovedSinceParked(id, from) {
		if st, err = s.state(ctx, id); err != nil {
			if ctx.Err() != nil {
				return Call{}, ctx.Err()
			}
			return Call{}, err
		}
	}
	poll := time.NewTimer(s.pollDelay())
	defer poll.Stop()
	waited, viaPoll := false, false
	for {
		if st != from {
			c, err := s.Get(ctx, id)
			switch {
			case ctx.Err() != nil:
				return s.asItStands(ctx, id)
			case err == nil && c.State == from:
				// read back from a node that had not seen the change (a
				// failover): wait on
			case err == nil:
				if waited {
					s.countWakeup(viaPoll)
				}
				return c, nil
			case errors.Is(err, ErrNotFound) || !waited:
				return Call{}, err
			}
			// Redis is away: keep waiting, the next poll re-reads.
		}
		var told State
		select {
		case <-ctx.Done():
			return s.asItStands(ctx, id)
		case told = <-wake:
			viaPoll = false
		case <-poll.C:
			viaPoll = true
			poll.Reset(s.pollDelay())
		}
		waited = true
		if !viaPoll {
			if held && (told == Approved || told == Executing) && told != from {
				// The holder claims an approved call next, and Claim
				// returns it whole; an executing one it waits on (or an
				// approval made beside it claimed it for it).
				s.countWakeup(false)
				return Call{ID: id, State: told}, nil
			}
			// A transition published the ID: the call has most likely
			// moved, so it is read whole at once rather than its state
			// first (one round trip, not two).
			st = ""
			continue
		}
		st, err = s.state(ctx, id)
		switch {
		case ctx.Err() != nil:
			return s.asItStands(ctx, id)
		case errors.Is(err, ErrNotFound):
			return Call{}, err
		case err != nil:
			st = from // Redis is away: keep waiting, the next poll re-reads
		}
	}
}

func (s *RedisStore) countWakeup(viaPoll bool) {
	if viaPoll {
		s.viaPoll.Add(1)
	} else {
		s.viaPubSub.Add(1)
	}
}

// asItStands is what Wait returns when ctx ended: the call as it stands,
// read on a moment of its own (ctx is over), and ctx's error.
func (s *RedisStore) asItStands(ctx context.Context, id string) (Call, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	c, err := s.Get(rctx, id)
	if err != nil {
		return Call{}, ctx.Err()
	}
	return c, ctx.Err()
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

func (s *RedisStore) addWaiter(id string, wake chan State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters[id] == nil {
		s.waiters[id] = make(map[chan State]struct{})
	}
	s.waiters[id][wake] = struct{}{}
	if s.sub == nil && !s.closed {
		ctx, stop := context.WithCancel(context.Background())
		s.sub = &subscription{stop: stop, done: make(chan struct{})}
		go s.listen(ctx, s.sub.done)
	}
}

func (s *RedisStore) removeWaiter(id string, wake chan State) {
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
	if s.shardedPubSub {
		// One subscription per shard channel: go-redis keeps each on the
		// node that serves its slot, through failovers.
		cc := s.rdb.(*redis.ClusterClient)
		for _, b := range s.bases {
			sps := cc.SSubscribe(ctx, b+"events")
			defer sps.Close()
			go s.forward(ctx, sps.Channel(redis.WithChannelSize(1024)))
		}
	}
	// The global channel's confirmations too: each says the subscription
	// was made (again), which Wait's shortcut needs (redis_heard.go).
	all := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-all:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					s.subscribed()
				}
			case *redis.Message:
				s.notify(m.Payload)
			}
		}
	}
}

// forward hands each published call ID to its waiters until ctx ends or
// the subscription closes.
func (s *RedisStore) forward(ctx context.Context, msgs <-chan *redis.Message) {
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

// notify hands a message, "<id> <state>", to the call's waiters. A
// message without a state (a replica of an earlier release) wakes them
// all the same, to read the call.
func (s *RedisStore) notify(msg string) {
	id, st, _ := strings.Cut(msg, " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.heardGrant(id) {
		return
	}
	s.hear(id)
	s.dropPeek(id)
	for wake := range s.waiters[id] {
		select {
		case <-wake: // a wake-up not taken yet: this one is newer
		default:
		}
		wake <- State(st) // cannot block: s.mu is held by every sender
	}
}

// nonce identifies one write, so that its retry can be recognised.
func nonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// state reads a call's state alone: the start of its key, or the st field
// of a call an earlier release stored as a hash.
func (s *RedisStore) state(ctx context.Context, id string) (State, error) {
	v, err := s.rdb.GetRange(ctx, s.callKey(id), 0, 63).Result()
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		st, err := s.rdb.HGet(ctx, s.callKey(id), "st").Result()
		if errors.Is(err, redis.Nil) {
			return "", notFound(id)
		}
		return State(st), err
	}
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", notFound(id)
	}
	st, ok := storedState(v)
	if !ok {
		return "", fmt.Errorf("pending: reading %s: %w", id, ErrDamaged)
	}
	return st, nil
}
