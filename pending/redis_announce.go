package pending

import (
	"context"
	"fmt"
	"time"
)

// announcedScript: ARGV[4] id. Replies {'ok'} or {'notfound'}; the call
// leaves the unannounced index (it may have left it already).
var announcedScript = newScript(`
local id = ARGV[4]
if call('EXISTS', callkey(id)) == 0 then
  call('ZREM', unannounced, id)
  return {'notfound'}
end
call('ZREM', unannounced, id)
return {'ok'}
`)

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

// Announced implements [Store.Announced]: the call leaves the
// unannounced index.
func (s *RedisStore) Announced(ctx context.Context, id string) error {
	v, err := s.runOn(ctx, announcedScript, id)
	if err != nil {
		return fmt.Errorf("pending: marking %s announced: %w", id, err)
	}
	if len(v) == 1 && v[0] == "notfound" {
		return notFound(id)
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
