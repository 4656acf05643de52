package pending

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// unresolvedScript: ARGV[4] olderThan ms, [5] limit, [6] and [7] as for
// walk. Replies {entry,
// call, …} for the ends reached at least olderThan ago and at most
// EndsKept (or ResultTTL, if shorter) ago, oldest first, entry being
// "<state>:<id>". Entries whose call is gone are dropped on the way; an
// entry of a state that is not an End (the prelude's ends) is skipped.
var unresolvedScript = newScript(luaWalk + `
return walk(unresolved, num(now - endsKept), num(now - tonumber(ARGV[4])), tonumber(ARGV[5]),
  function(e)
    local st, id = string.match(e, '^(%l+):(.+)$')
    if ends[st] then return id end
  end,
  function(h) return h and 'list' or 'drop' end)
`)

// endEntry is an End's member of the unresolved index.
func endEntry(e End) string { return string(e.State) + ":" + e.ID }

// Resolved implements [Store.Resolved]: the entries leave their shards'
// unresolved indexes (unlist); removing one that already left is
// harmless, so no script.
func (s *RedisStore) Resolved(ctx context.Context, ends []End) error {
	if err := s.unlist(ctx, "unresolved", len(ends), func(i int) (string, string) { return ends[i].ID, endEntry(ends[i]) }); err != nil {
		return fmt.Errorf("pending: marking %d ends resolved: %w", len(ends), err)
	}
	return nil
}

// Unresolved implements [Store.Unresolved] from the unresolved index;
// olderThan is measured on Redis' clock.
func (s *RedisStore) Unresolved(ctx context.Context, olderThan time.Duration, limit int, maxBytes int64) ([]Owed, error) {
	out, err := collectBounded(s, limit, maxBytes, &s.unresolvedFrom, func(base string, left int, budget int64, first string) ([]any, error) {
		return s.run(ctx, unresolvedScript, base, []string{base + "unresolved"}, olderThan.Milliseconds(), left, budget, first)
	}, func(v []any) ([]Owed, error) { return decodePairs(v, "unresolved", decodeOwed) })
	if err != nil {
		return nil, fmt.Errorf("pending: listing unresolved ends: %w", err)
	}
	return out, nil
}

// decodeOwed decodes one entry of unresolvedScript's reply.
func decodeOwed(entry string, v any) (Owed, error) {
	st, id, ok := strings.Cut(entry, ":")
	if !ok || !announcedEnd(State(st)) {
		return Owed{}, fmt.Errorf("pending: unexpected unresolved entry %q", entry)
	}
	c, err := decodeRecord(id, v)
	if err != nil {
		return Owed{}, err
	}
	return Owed{End: End{ID: id, State: State(st)}, Call: c}, nil
}
