package pending

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Declared keys, on a Redis Cluster. A reshard moves a slot's keys to
// another node a few at a time; meanwhile Redis checks the keys a command
// declares: when one is missing on the old node it redirects the command
// (ASK), and the new node runs a command of several keys only once all of
// them have arrived (TRYAGAIN until then). A script that touched keys it
// did not declare would pass that check and then meet, half-way through,
// keys still on the other node: it would fail after some of its writes,
// or on the new node take a key not yet moved for one that does not exist
// and create it there (the key then exists on both nodes, and the move
// stops with BUSYKEY).
//
// So on a Cluster every script that writes declares every key it touches:
// its shard's indexes (shardKeys), the call's keys, and those that depend
// on the call: its principal's count and its attach keys, and for a park
// the calls its attach keys name. The store knows those only once the
// script has read the call, so a script that finds one undeclared replies
// {'declare', k, …} before it writes anything, and runCall runs it again
// with them. Those keys never change once the call is parked, so each
// store remembers them per call (seenKeys): only a replica's first
// transition of a call it has not met costs the second round trip.
//
// While a slot moves, the transitions of its calls wait for the move to
// end (TRYAGAIN, retried by runMoving for up to movingPatience, then
// failed, closed): a script declares keys that do not exist (an empty
// index, the body key of a call of the earlier layout), and Redis runs a
// command of several keys on a slot being moved only when every one of
// them exists on the node it reaches; the scripts that only read declare one key and
// may see a call on the move as missing, which is why the unannounced
// list writes nothing on what it reads on a Cluster.

// maxKeyRounds bounds the runs of a script that keeps naming keys: a park
// names the call an attach key points to, then that call's own keys.
const maxKeyRounds = 4

// shardKeys returns the keys of the shard with key base base that the
// transition scripts may touch whatever the call: its indexes.
func shardKeys(base string) []string {
	keys := []string{base + "due", base + "leases", base + "unannounced", base + "unresolved"}
	for _, st := range allStates {
		keys = append(keys, base+"state:"+string(st))
	}
	return keys
}

// callKeys returns the keys a script on call id declares: on a Cluster
// its shard's indexes, its own keys and more; elsewhere the call's key
// alone, which routes the script.
func (s *RedisStore) callKeys(base, id string, more []string) []string {
	if !s.cluster {
		return []string{base + "call:" + id}
	}
	fixed := s.shardKeys[base]
	keys := make([]string, 0, len(fixed)+2+len(more)+4)
	keys = append(keys, base+"call:"+id, base+"body:"+id)
	keys = append(keys, fixed...)
	return append(keys, more...)
}

// callOwnKeys returns the keys of call c that its scripts touch beyond its
// own and its shard's: its principal's counts and its attach keys.
func callOwnKeys(base string, c Call) []string {
	var keys []string
	if c.Principal != "" {
		keys = append(keys, base+"parked:"+c.Principal, base+"ended:"+c.Principal)
	}
	for _, k := range [...]string{c.AttachKey, c.ArgsKey} {
		if k != "" {
			keys = append(keys, base+"attach:"+k)
		}
	}
	return keys
}

// runCall runs sc on call id (ARGV[4], then args), confirmed by WAIT when
// replicated (eval), declaring the keys callKeys gives and then the ones a
// 'declare' reply names.
func (s *RedisStore) runCall(ctx context.Context, sc *redis.Script, replicated bool, id string, more []string, args ...any) ([]any, error) {
	if id == "" {
		// No call has it, and scriptArgs would leave it out, shifting the
		// script's arguments into its place.
		return nil, ErrNotFound
	}
	s.forgetPeek(id) // this replica is moving the call
	base := s.baseOf(id)
	all := s.scriptArgs(base, id, args)
	if !s.cluster {
		return s.eval(ctx, sc, replicated, s.callKeys(base, id, nil), all)
	}
	keys := s.callKeys(base, id, append(more, s.seen.get(id)...))
	fixed := 2 + len(s.shardKeys[base])
	v, keys, err := s.runDeclaring(ctx, sc, replicated, keys, all)
	if err == nil && len(keys) > fixed {
		s.seen.put(id, keys[fixed:])
	}
	return v, err
}

// runDeclaring runs sc (all: its arguments, scriptArgs) with keys
// declared, then with the keys a 'declare' reply names as well; it
// returns the keys last declared.
func (s *RedisStore) runDeclaring(ctx context.Context, sc *redis.Script, replicated bool, keys []string, all []any) ([]any, []string, error) {
	for range maxKeyRounds {
		v, err := s.runMoving(ctx, sc, replicated, keys, all)
		if err != nil || len(v) == 0 || v[0] != "declare" {
			return v, keys, err
		}
		for _, k := range v[1:] {
			name, ok := k.(string)
			if !ok {
				return nil, keys, errors.New("pending: unexpected declare reply")
			}
			keys = append(keys, name)
		}
	}
	return nil, keys, fmt.Errorf("pending: the script on %s named keys to declare %d times", keys[0], maxKeyRounds)
}

// movingPatience is how long runMoving waits out a slot on the move: a
// move of a slot of some thousands of calls takes a second or two, and a
// transition that gives up meanwhile fails (a finish that does leaves its
// executed call unknown).
const movingPatience = 5 * time.Second

// runMoving runs a script, and on a Cluster runs it again while its slot
// is on the move (the error says so before the script ran), backing off,
// for up to movingPatience or until ctx ends.
func (s *RedisStore) runMoving(ctx context.Context, sc *redis.Script, replicated bool, keys []string, all []any) ([]any, error) {
	backoff := 10 * time.Millisecond
	var giveUp time.Time
	for {
		v, err := s.eval(ctx, sc, replicated, keys, all)
		if err == nil || !s.cluster || !slotMoving(err) {
			return v, err
		}
		if giveUp.IsZero() {
			giveUp = time.Now().Add(movingPatience)
		} else if time.Now().After(giveUp) {
			return v, err
		}
		if c, ok := s.rdb.(*redis.ClusterClient); ok && strings.HasPrefix(err.Error(), "MOVED ") {
			c.ReloadState(ctx) // the node path of evalReplicated reads the cached slot map
		}
		if !sleep(ctx, backoff) {
			return nil, err
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// slotMoving reports whether err is Redis Cluster's answer to a command
// on a slot that is moving or has moved: nothing ran.
func slotMoving(err error) bool {
	msg := err.Error()
	for _, p := range []string{"TRYAGAIN", "ASK ", "MOVED ", "CLUSTERDOWN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// expireDeclared is Expire on a Cluster: per shard, the due entries
// (dueScript, which declares the shard's indexes), then one script per
// entry with the call's keys declared (expireOneScript).
func (s *RedisStore) expireDeclared(ctx context.Context, base string, limit int) ([]any, error) {
	due, err := s.runMoving(ctx, dueScript, false, s.shardKeys[base], s.scriptArgs(base, "", []any{limit}))
	if err != nil {
		return nil, err
	}
	if len(due)%2 != 0 {
		return nil, errors.New("pending: unexpected due reply")
	}
	var out []any
	for i := 0; i < len(due); i += 2 {
		list, _ := due[i].(string)
		id, _ := due[i+1].(string)
		v, err := s.runCall(ctx, expireOneScript, false, id, nil, list)
		if err != nil {
			return out, err
		}
		if len(v) == 2 && v[0] == "moved" {
			out = append(out, id, v[1])
		}
	}
	return out, nil
}

// maxSeen bounds seenKeys: some thousands of calls a replica is likely to
// meet again (an approval, a claim, a finish) before they end.
const maxSeen = 8192

// seenKeys remembers, by call ID, the keys beyond its own and its shard's
// that a call's scripts declared last (its principal's count, its attach
// keys): they never change once the call is parked, so a replica that has
// met a call declares them at once and spares the 'declare' round trip.
// Emptied when full.
type seenKeys struct {
	mu sync.Mutex
	m  map[string][]string
}

func (k *seenKeys) get(id string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.m[id]
}

func (k *seenKeys) put(id string, keys []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= maxSeen {
		k.m = make(map[string][]string)
	}
	k.m[id] = keys
}

// sleep waits d, or less when ctx ends first; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
