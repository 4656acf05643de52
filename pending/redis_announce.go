package pending

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// luaWalk is walk, for the scripts that list an index of calls: it
// walks the entries of index scored lo to hi and replies {entry, call, …}
// for up to limit of them, the call being the one idof(entry) names.
// judge(h) says what to do with each (h is nil when the call is gone):
// 'list' it, 'skip' it, or 'drop' the entry from the index. An entry
// idof cannot read (nil) is skipped: written by another version of
// toolgate during a rolling upgrade, it is that version's to list, and
// the index's bound ages it out; failing on it would stop the listing of
// every entry after it. ARGV[6] bounds the bytes of the calls listed
// (their stored values; negative: no bound), ARGV[7] '1' lets the first
// one listed pass it (Store.Unannounced). Dropped
// entries are left in place on a Cluster, where a script that reads
// calls it does not declare writes nothing on what it reads (a slot on
// the move may show a call as gone that is not): Expire drops the
// entries of calls gone there.
const luaWalk = `
local function walk(index, lo, hi, limit, idof, judge)
  local out, offset, bytes = {}, 0, 0
  local budget, first = tonumber(ARGV[6]), ARGV[7] == '1'
  while #out < 2 * limit do
    local es = call('ZRANGEBYSCORE', index, lo, hi, 'LIMIT', offset, limit)
    if #es == 0 then break end
    for _, e in ipairs(es) do
      local id, h, v = idof(e), nil, 'skip'
      if id then
        h = load(id)
        v = judge(h)
      end
      if v == 'drop' and not sharded then
        call('ZREM', index, e)
      else
        offset = offset + 1
        if v == 'list' and #out < 2 * limit then
          local val = value(h)
          bytes = bytes + #val
          if budget >= 0 and bytes > budget and not (first and #out == 0) then
            return out
          end
          out[#out + 1] = e
          out[#out + 1] = val
        end
      end
    end
  end
  return out
end
`

// unannouncedScript: ARGV[4] olderThan ms, [5] limit, [6] and [7] as for
// walk. Replies {id, call,
// …} for waiting calls parked at least olderThan ago by Redis' clock and
// not past their expiry, oldest first. Entries whose call is gone or no
// longer waiting are dropped on the way (move removes them, but a key can
// expire unswept).
var unannouncedScript = newScript(luaWalk + `
return walk(unannounced, '-inf', num(now - tonumber(ARGV[4])), tonumber(ARGV[5]),
  function(id) return id end,
  function(h)
    if not (h and h.st == 'waiting') then return 'drop' end
    if overdue(h) then return 'skip' end
    return 'list'
  end)
`)

// Announced implements [Store.Announced]: the calls leave their shards'
// unannounced indexes (unlist). Nothing else needs to change with them,
// so no script: removing a call that already left is harmless.
func (s *RedisStore) Announced(ctx context.Context, ids []string) error {
	if err := s.unlist(ctx, "unannounced", len(ids), func(i int) (string, string) { return ids[i], ids[i] }); err != nil {
		return fmt.Errorf("pending: marking %d calls announced: %w", len(ids), err)
	}
	return nil
}

// unlist removes n members from their shards' index (at(i) gives the
// call ID that places member i, and the member): one ZREM per shard, all
// in one pipeline (a Cluster client sends each to its node).
func (s *RedisStore) unlist(ctx context.Context, index string, n int, at func(i int) (id, member string)) error {
	if n == 0 {
		return nil
	}
	byBase := map[string][]any{}
	for i := range n {
		id, member := at(i)
		b := s.baseOf(id)
		byBase[b] = append(byBase[b], member)
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, members := range byBase {
			p.ZRem(ctx, b+index, members...)
		}
		return nil
	})
	return err
}

// Unannounced implements [Store.Unannounced] from the unannounced index;
// olderThan is measured on Redis' clock.
func (s *RedisStore) Unannounced(ctx context.Context, olderThan time.Duration, limit int, maxBytes int64) ([]Call, error) {
	out, err := collectBounded(s, limit, maxBytes, &s.unannouncedFrom, func(base string, left int, budget int64, first string) ([]any, error) {
		return s.run(ctx, unannouncedScript, base, []string{base + "unannounced"}, olderThan.Milliseconds(), left, budget, first)
	}, decodeList)
	if err != nil {
		return nil, fmt.Errorf("pending: listing unannounced calls: %w", err)
	}
	return out, nil
}
