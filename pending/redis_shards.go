package pending

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Shards (Options.Shards). With one shard every key carries the hash tag
// of the prefix, "{toolgate}:…", and all of them share one Cluster slot.
// With n shards, shard i's keys carry "{toolgate:i}": the call hashes, the
// state and due indexes, the parked counts, the attach keys and the
// unannounced index of the calls in shard i. Every transition still runs
// as one script on one slot, atomic with its indexes; what reads across
// calls (Expire, Approved, Unannounced, List, Count) walks the shards one
// script each, so a sweeper on any replica covers them all without a
// cross-slot script.
//
// A call's shard is read from its ID alone (Get, Decide and Claim take
// nothing else): the ID's last character picks it. PlaceID sets that
// character so that the shard is the one of the call's principal: the
// calls of a principal share a shard, so its parked count
// (MaxParkedPerPrincipal) and the attach keys its retries look up are in
// the slot of its calls. MaxParked counts across shards: the park script
// adds the other shards' counts, read just before it, to its own (a cap
// that concurrent parks on other shards can pass by at most their number).
//
// Grants, sessions and nonces are single keys or families of their own:
// grants stay under the prefix's tag, a session key is spread by its ID.

// idAlphabet is the alphabet of call IDs (crypto/rand.Text): a placed ID
// ends with one of its 32 characters.
const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// maxShards is the most shards a store takes: one per last character.
const maxShards = len(idAlphabet)

// checkShards reports whether n is a number of shards a store takes: a
// power of two up to maxShards, so that a placed ID names the same shard
// for every such n (n divides maxShards).
func checkShards(n int) error {
	if n < 1 || n > maxShards || n&(n-1) != 0 {
		return fmt.Errorf("pending: %d shards: the number of shards is 1, 2, 4, 8, 16 or 32", n)
	}
	return nil
}

// hash32 is FNV-1a of s, written out: hash/fnv's hasher and the []byte
// copy would cost two allocations on every authenticated request of a
// sharded store (PlaceID) and every session lookup.
func hash32(s string) uint32 {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for i := range len(s) {
		h = (h ^ uint32(s[i])) * prime
	}
	return h
}

// slot32 is the shard of id among maxShards: the hash of all but its last
// character plus the last character's place in idAlphabet (or its byte
// value for an ID PlaceID did not make).
func slot32(id string) int {
	if id == "" {
		return 0
	}
	last := id[len(id)-1]
	code := int(last)
	if i := strings.IndexByte(idAlphabet, last); i >= 0 {
		code = i
	}
	return (int(hash32(id[:len(id)-1])%uint32(maxShards)) + code) % maxShards
}

// PlaceID returns id with its last character replaced so that the call
// falls in principal's shard, whatever the number of shards. id must be
// made of idAlphabet's characters (crypto/rand.Text); it keeps all its
// randomness but 5 bits.
func PlaceID(id, principal string) string {
	if id == "" {
		return id
	}
	prefix := id[:len(id)-1]
	want := int(hash32(principal) % uint32(maxShards))
	code := (want - int(hash32(prefix)%uint32(maxShards)) + maxShards) % maxShards
	return prefix + idAlphabet[code:code+1]
}

// shardBases returns the key base ("{tag}:" or "{tag:i}:") of shard i.
func shardBases(tag string, n int) []string {
	if n == 1 {
		return []string{"{" + tag + "}:"}
	}
	bases := make([]string, n)
	for i := range bases {
		bases[i] = "{" + tag + ":" + strconv.Itoa(i) + "}:"
	}
	return bases
}

// baseOf is the key base of call id's shard.
func (s *RedisStore) baseOf(id string) string {
	if len(s.bases) <= 1 {
		return s.base
	}
	return s.bases[slot32(id)%len(s.bases)]
}

// Sharded reports whether the store spreads calls over shards, that is
// whether call IDs must be made with PlaceID.
func (s *RedisStore) Sharded() bool { return len(s.bases) > 1 }

// eachShard runs f on every shard's base, in turn, until f returns false
// or an error.
func (s *RedisStore) eachShard(f func(base string) (more bool, err error)) error {
	return eachOf(s.bases, f)
}

// eachOf is eachShard over bases, in their order.
func eachOf(bases []string, f func(base string) (more bool, err error)) error {
	for _, b := range bases {
		more, err := f(b)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// ErrLayout: the store's number of shards is not the one the calls in
// Redis under its prefix were stored with.
var ErrLayout = errors.New("pending: the number of shards differs from the one the parked calls were stored with")

// checkLayout records the number of shards under the prefix, or checks
// it against the one recorded: replicas with different numbers would
// look for a call in different places. A store of one shard that finds
// none recorded takes the prefix as it is (the layout before shards).
func (s *RedisStore) checkLayout(ctx context.Context) error {
	if s.layoutOK.Load() {
		return nil
	}
	key := s.base + "layout"
	n := strconv.Itoa(len(s.bases))
	if len(s.bases) > 1 {
		// Calls parked under the one-shard layout would be lost from
		// sight: refuse rather than set the layout over them.
		if live, err := s.rdb.Exists(ctx, s.base+"state:waiting", s.base+"due", s.base+"leases").Result(); err != nil {
			return fmt.Errorf("pending: redis: %w", err)
		} else if live > 0 {
			if got, _ := s.rdb.Get(ctx, key).Result(); got != n {
				return fmt.Errorf("%w: calls are parked under the prefix with 1 shard, this replica has %s", ErrLayout, n)
			}
		}
	}
	if err := s.rdb.SetNX(ctx, key, n, 0).Err(); err != nil {
		return fmt.Errorf("pending: redis: %w", err)
	}
	got, err := s.rdb.Get(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("pending: redis: %w", err)
	}
	if got != n {
		return fmt.Errorf("%w: %s under the prefix, %s on this replica", ErrLayout, got, n)
	}
	s.layoutOK.Store(true)
	return nil
}

// scoredCall is a listed call with its index score: when it entered the
// listed state, by Redis' clock.
type scoredCall struct {
	Call
	score float64
}

// decodeScored decodes a list script's reply {id, score, fields, …}.
func decodeScored(v []any) ([]scoredCall, error) {
	if len(v)%3 != 0 {
		return nil, errors.New("pending: unexpected list reply")
	}
	out := make([]scoredCall, 0, len(v)/3)
	for i := 0; i < len(v); i += 3 {
		id, _ := v[i].(string)
		text, _ := v[i+1].(string) // Lua hands ZRANGE's scores over as strings
		score, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("pending: list reply: score of %s: %w", id, err)
		}
		c, err := decodeRecord(id, v[i+2])
		if err != nil {
			return nil, err
		}
		out = append(out, scoredCall{c, score})
	}
	return out, nil
}

// mergeScored orders the shards' lists by score (earliest first, or
// latest first), ties by ID, and keeps limit. One shard's list is in
// order already.
func mergeScored(all []scoredCall, limit int, latest, sharded bool) []Call {
	if sharded {
		slices.SortStableFunc(all, func(a, b scoredCall) int {
			if latest {
				a, b = b, a
			}
			return cmp.Or(cmp.Compare(a.score, b.score), strings.Compare(a.ID, b.ID))
		})
	}
	out := make([]Call, 0, min(limit, len(all)))
	for _, c := range all[:min(limit, len(all))] {
		out = append(out, c.Call)
	}
	return out
}
