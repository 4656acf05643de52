package pending

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var _ Listings = (*RedisStore)(nil)

// Shared listings in Redis: per upstream, a hash and when each of its
// tools was last remembered,
//
//	{toolgate}:listed:<upstream>        hash: tool name -> the proxy's bytes
//	{toolgate}:listed-seen:<upstream>   sorted set: tool name, scored by its last Remember (ms, Redis' TIME)
//
// both PEXPIRE ListingTTL at each write. The keys are on a shard picked
// by the upstream's name, like a session's (the same hash tag as the
// shard's other keys, so on a Cluster keys of its own slot's node).
// Remember is one script on those two keys alone (declared in KEYS):
// it first forgets up to maxListingDrops tools not remembered for
// ListingTTL, oldest first, then keeps at most MaxListedTools fields, each
// checked and replaced in one step. Recall is one HGET: a tool past its
// lifetime is read until a Remember of its upstream drops it (at the
// latest when the keys expire, ListingTTL after the last write).

func (s *RedisStore) listingKey(upstream string) string {
	return s.listingBase(upstream) + "listed:" + upstream
}

// listingSeenKey is the sorted set of the last-seen times of upstream's
// tools, with the hash tag of its listingKey.
func (s *RedisStore) listingSeenKey(upstream string) string {
	return s.listingBase(upstream) + "listed-seen:" + upstream
}

func (s *RedisStore) listingBase(upstream string) string {
	return s.bases[hash32(upstream)%uint32(len(s.bases))]
}

// rememberScript: KEYS[1] the upstream's hash, KEYS[2] its last-seen
// sorted set, ARGV[1] MaxListedTools, ARGV[2] ListingTTL ms, ARGV[3]
// maxListingDrops, ARGV[4…] tool, bytes pairs.
//
// Fields without a last-seen time (written by a version that kept none)
// are given the time now, once: they lapse like the others. Then the
// tools whose last-seen time is ListingTTL or more ago are dropped, at
// most ARGV[3] of them, oldest first. A tool new to the hash is added
// while it has fewer than MaxListedTools fields; a known one is replaced.
// Each tool kept is seen now. Replies how many pairs it kept.
var rememberScript = redis.NewScript(`
local k, seen = KEYS[1], KEYS[2]
local maxn, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = redis.call('HLEN', k)
if n > redis.call('ZCARD', seen) then
  for _, f in ipairs(redis.call('HKEYS', k)) do
    redis.call('ZADD', seen, 'NX', now, f)
  end
end
local old = redis.call('ZRANGEBYSCORE', seen, '-inf', now - ttl, 'LIMIT', 0, tonumber(ARGV[3]))
if #old > 0 then
  n = n - redis.call('HDEL', k, unpack(old))
  redis.call('ZREM', seen, unpack(old))
end
local kept = 0
for i = 4, #ARGV, 2 do
  local known = redis.call('HEXISTS', k, ARGV[i]) == 1
  if known or n < maxn then
    redis.call('HSET', k, ARGV[i], ARGV[i + 1])
    redis.call('ZADD', seen, now, ARGV[i])
    if not known then n = n + 1 end
    kept = kept + 1
  end
end
if kept > 0 then
  redis.call('PEXPIRE', k, ttl)
  redis.call('PEXPIRE', seen, ttl)
end
return kept
`)

// Remember implements [Listings.Remember].
func (s *RedisStore) Remember(ctx context.Context, upstream string, entries map[string][]byte) (int, error) {
	entries = keptListings(upstream, entries)
	if len(entries) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 3+2*len(entries))
	args = append(args, MaxListedTools, ListingTTL.Milliseconds(), maxListingDrops)
	for tool, v := range entries {
		args = append(args, tool, v)
	}
	keys := []string{s.listingKey(upstream), s.listingSeenKey(upstream)}
	n, err := rememberScript.Run(ctx, s.rdb, keys, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("pending: remembering the listing of upstream %q: %w", upstream, err)
	}
	return n, nil
}

// Recall implements [Listings.Recall].
func (s *RedisStore) Recall(ctx context.Context, upstream, tool string) ([]byte, error) {
	if checkListingNames(upstream, tool) != nil {
		return nil, listingMiss{upstream: upstream, tool: tool}
	}
	v, err := s.rdb.HGet(ctx, s.listingKey(upstream), tool).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, listingMiss{upstream: upstream, tool: tool}
	}
	if err != nil {
		return nil, fmt.Errorf("pending: recalling the listing of tool %q of upstream %q: %w", tool, upstream, err)
	}
	return v, nil
}
