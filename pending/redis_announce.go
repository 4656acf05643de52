package pending

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// unannouncedScript: ARGV[4] olderThan ms, [5] limit. Replies {id, call,
// …} for waiting calls parked at least olderThan ago by Redis' clock and
// not past their expiry, oldest first. Entries whose call is gone or no
// longer waiting are dropped on the way (move removes them, but a key can
// expire unswept), except on a Cluster.
var unannouncedScript = newScript(`
local older, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
local out, offset = {}, 0
while #out < 2 * limit do
  local ids = call('ZRANGEBYSCORE', unannounced, '-inf', num(now - older), 'LIMIT', offset, limit)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local h = load(id)
    local waiting = h and h.st == 'waiting'
    if not waiting and not sharded then
      call('ZREM', unannounced, id)
    else
      -- On a Cluster this script reads calls it does not declare, so it
      -- writes nothing on what it reads (a slot on the move may show a
      -- call as gone that is not): Expire drops the entries of calls gone.
      offset = offset + 1
      if waiting and #out < 2 * limit and not overdue(h) then
        out[#out + 1] = id
        out[#out + 1] = value(h)
      end
    end
  end
end
return out
`)

// Announced implements [Store.Announced]: the calls leave their shards'
// unannounced indexes, one ZREM per shard, all in one pipeline (a Cluster
// client sends each to its node). Nothing else needs to change with them,
// so no script: removing a call that already left is harmless.
func (s *RedisStore) Announced(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	byBase := map[string][]any{}
	for _, id := range ids {
		b := s.baseOf(id)
		byBase[b] = append(byBase[b], id)
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, members := range byBase {
			p.ZRem(ctx, b+"unannounced", members...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pending: marking %d calls announced: %w", len(ids), err)
	}
	return nil
}

// Unannounced implements [Store.Unannounced] from the unannounced index;
// olderThan is measured on Redis' clock.
func (s *RedisStore) Unannounced(ctx context.Context, olderThan time.Duration, limit int) ([]Call, error) {
	out, err := s.collect(ctx, limit, func(base string, left int) ([]any, error) {
		return s.run(ctx, unannouncedScript, base, []string{base + "unannounced"}, olderThan.Milliseconds(), left)
	})
	if err != nil {
		return nil, fmt.Errorf("pending: listing unannounced calls: %w", err)
	}
	return out, nil
}
