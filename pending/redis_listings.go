package pending

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var _ Listings = (*RedisStore)(nil)

// Shared listings in Redis: one hash per upstream,
//
//	{toolgate}:listed:<upstream>   hash: tool name -> the proxy's bytes, PEXPIRE ListingTTL at each write
//
// The key is on a shard picked by the upstream's name, like a session's
// (the same hash tag as the shard's other keys, so on a Cluster a key of
// its own slot's node). Remember is one script on that key alone (declared
// in KEYS): at most MaxListedTools fields, each checked and replaced in
// one step. Recall is one HGET.

func (s *RedisStore) listingKey(upstream string) string {
	return s.bases[hash32(upstream)%uint32(len(s.bases))] + "listed:" + upstream
}

// rememberScript: KEYS[1] the upstream's hash, ARGV[1] MaxListedTools,
// ARGV[2] ListingTTL ms, ARGV[3…] tool, bytes pairs. A tool new to the
// hash is added while it has fewer than MaxListedTools fields; a known
// one is replaced. Replies how many pairs it kept.
var rememberScript = redis.NewScript(`
local k, maxn = KEYS[1], tonumber(ARGV[1])
local n, kept = redis.call('HLEN', k), 0
for i = 3, #ARGV, 2 do
  local known = redis.call('HEXISTS', k, ARGV[i]) == 1
  if known or n < maxn then
    redis.call('HSET', k, ARGV[i], ARGV[i + 1])
    if not known then n = n + 1 end
    kept = kept + 1
  end
end
if kept > 0 then redis.call('PEXPIRE', k, ARGV[2]) end
return kept
`)

// Remember implements [Listings.Remember].
func (s *RedisStore) Remember(ctx context.Context, upstream string, entries map[string][]byte) (int, error) {
	entries = keptListings(upstream, entries)
	if len(entries) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 2+2*len(entries))
	args = append(args, MaxListedTools, ListingTTL.Milliseconds())
	for tool, v := range entries {
		args = append(args, tool, v)
	}
	n, err := rememberScript.Run(ctx, s.rdb, []string{s.listingKey(upstream)}, args...).Int()
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
