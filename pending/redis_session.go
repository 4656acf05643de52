package pending

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// MCP session bindings in Redis: one string key per session,
//
//	{toolgate}:session:<id>    string: the owner (principal, and a note after a NUL), with the binding's TTL
//
// Each method is one command or one script on that key alone (declared in
// KEYS, no other key touched), so it is atomic and, in a Cluster, served
// by whichever node holds the key's slot. The key's TTL is the binding's
// expiry. A new binding is first counted in its principal's sorted set,
//
//	{toolgate}:sessionsof:<principal>    zset: session IDs by expiry
//
// which bounds the sessions one caller can hold (MaxSessionsPerPrincipal);
// each touch renews the session's entry there as it renews the binding (in
// the same script on one node, a second step on a Cluster, where the set
// is on another node), so a session kept in use stays counted.

func (s *RedisStore) sessionKey(id string) string {
	return s.bases[hash32(id)%uint32(len(s.bases))] + "session:" + id
}

// principalLua is SplitOwner's principal, in Lua.
const principalLua = `
local function principal(s)
  local i = string.find(s, '\0', 1, true)
  if i then return string.sub(s, 1, i - 1) end
  return s
end
`

// bindSessionScript: KEYS[1] the session key, ARGV[1] owner, ARGV[2] ttl
// ms. SET NX, and PEXPIRE when the caller is the owner's principal;
// replies the owner. A retried run answers the same.
var bindSessionScript = redis.NewScript(principalLua + `
local owner = redis.call('GET', KEYS[1])
if not owner then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
if principal(owner) == principal(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return owner
`)

// touchSessionScript: as bindSessionScript, but a missing key stays
// missing (nil reply). With KEYS[2], the owner's sessionsOfKey (given
// where both keys are on one node: not a Cluster), the session's entry
// there is renewed too (ZADD XX GT), so that a session kept in use stays
// counted against its principal's cap.
var touchSessionScript = redis.NewScript(principalLua + renewCountLua + `
if redis.replicate_commands then redis.replicate_commands() end
local owner = redis.call('GET', KEYS[1])
if not owner then return false end
if principal(owner) == principal(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if KEYS[2] then renewCount(KEYS[2], ARGV[3], tonumber(ARGV[2])) end
end
return owner
`)

// renewCountLua renews a session's entry in its principal's sessionsOfKey
// (when there is one) to expire ttl ms from now, by Redis' clock.
const renewCountLua = `
local function renewCount(key, id, ttl)
  local t = redis.call('TIME')
  local expiry = t[1] * 1000 + math.floor(t[2] / 1000) + ttl
  if redis.call('ZADD', key, 'XX', 'GT', 'CH', expiry, id) == 1 and redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
end
`

// sessionsOfKey is the sorted set of principal's session IDs, scored by
// when each binding was last made to expire (in the principal's shard: on
// a Cluster apart from the session keys, so the count and the binding are
// two steps).
func (s *RedisStore) sessionsOfKey(principal string) string {
	return s.bases[hash32(principal)%uint32(len(s.bases))] + "sessionsof:" + principal
}

// countSessionScript: KEYS[1] the principal's sessionsOfKey, ARGV[1] the
// session ID, ARGV[2] ttl ms, ARGV[3] the cap, ARGV[4] the principal.
// Drops the entries past their expiry (by Redis' clock), then counts the ID
// in, or replies 0 when the principal already has the cap of others; the
// key lasts as long as its latest entry. With KEYS[2], the session key
// (given where both keys are on one node), an ID another principal holds
// is not counted: it replies 2, and the binding that follows is refused.
var countSessionScript = redis.NewScript(principalLua + `
if redis.replicate_commands then redis.replicate_commands() end
if KEYS[2] then
  local owner = redis.call('GET', KEYS[2])
  if owner and principal(owner) ~= ARGV[4] then return 2 end
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
`)

// sessionRoomScript: KEYS[1] the principal's sessionsOfKey, ARGV[1] the
// cap. Replies 1 when fewer entries than the cap are still to expire (by
// Redis' clock), else 0; it writes nothing.
var sessionRoomScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') < tonumber(ARGV[1]) then return 1 end
return 0
`)

// SessionRoom implements [Store.SessionRoom].
func (s *RedisStore) SessionRoom(ctx context.Context, principal string) (bool, error) {
	ok, err := sessionRoomScript.Run(ctx, s.rdb, []string{s.sessionsOfKey(principal)}, s.maxSessionsPer).Int()
	if err != nil {
		return false, fmt.Errorf("pending: counting the sessions of %s: %w", principal, err)
	}
	return ok == 1, nil
}

// BindSession implements [Store.BindSession]. The binding is first counted
// against its principal's cap (Options.MaxSessionsPerPrincipal).
func (s *RedisStore) BindSession(ctx context.Context, id, principal string, ttl time.Duration) (string, error) {
	if err := checkSession(id, principal, ttl); err != nil {
		return "", err
	}
	p, _ := SplitOwner(principal)
	keys := []string{s.sessionsOfKey(p)}
	if !s.cluster {
		keys = append(keys, s.sessionKey(id))
	} else if owner, err := s.rdb.Get(ctx, s.sessionKey(id)).Result(); err == nil {
		// On a Cluster the session key is on another node: an ID another
		// principal holds is looked up first, and not counted (a binding
		// racing this look-up may still be).
		if o, _ := SplitOwner(owner); o != p {
			return owner, nil
		}
	} else if !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("pending: binding session %s: %w", id, err)
	}
	ok, err := countSessionScript.Run(ctx, s.rdb, keys, id, max(ttl.Milliseconds(), 1), s.maxSessionsPer, p).Int()
	if err != nil {
		return "", fmt.Errorf("pending: counting session %s: %w", id, err)
	}
	switch ok {
	case 0:
		return "", &SessionCapError{Principal: p, Max: s.maxSessionsPer}
	case 2:
		// Another principal's, and not counted: not bound either, as
		// the binding may have gone since (it would be bound uncounted).
		owner, err := s.rdb.Get(ctx, s.sessionKey(id)).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return "", fmt.Errorf("pending: binding session %s: its owner's binding ended as it was bound; retry", id)
		case err != nil:
			return "", fmt.Errorf("pending: binding session %s: %w", id, err)
		}
		return owner, nil
	}
	owner, err := bindSessionScript.Run(ctx, s.rdb, []string{s.sessionKey(id)}, principal, max(ttl.Milliseconds(), 1)).Text()
	if err != nil {
		return "", fmt.Errorf("pending: binding session %s: %w", id, err)
	}
	return owner, nil
}

// TouchSession implements [Store.TouchSession].
func (s *RedisStore) TouchSession(ctx context.Context, id, principal string, ttl time.Duration) (string, error) {
	if err := checkSession(id, principal, ttl); err != nil {
		return "", err
	}
	p, _ := SplitOwner(principal)
	keys := []string{s.sessionKey(id)}
	if !s.cluster {
		// One node: the count is renewed in the same step.
		keys = append(keys, s.sessionsOfKey(p))
	}
	owner, err := touchSessionScript.Run(ctx, s.rdb, keys, principal, max(ttl.Milliseconds(), 1), id).Text()
	if errors.Is(err, redis.Nil) {
		return "", noSession(id)
	}
	if err != nil {
		return "", fmt.Errorf("pending: touching session %s: %w", id, err)
	}
	if o, _ := SplitOwner(owner); s.cluster && o == p {
		// On a Cluster the count's key is on another node: a second step.
		err := renewSessionCountScript.Run(ctx, s.rdb, []string{s.sessionsOfKey(p)}, id, max(ttl.Milliseconds(), 1)).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", fmt.Errorf("pending: renewing the count of session %s: %w", id, err)
		}
	}
	return owner, nil
}

// renewSessionCountScript: KEYS[1] a principal's sessionsOfKey, ARGV[1]
// the session ID, ARGV[2] ttl ms: the entry, when there is one, is to
// expire ttl from now (touchSessionScript's second half, for a Cluster).
var renewSessionCountScript = redis.NewScript(renewCountLua + `
if redis.replicate_commands then redis.replicate_commands() end
renewCount(KEYS[1], ARGV[1], tonumber(ARGV[2]))
return 1
`)

// endSessionScript: KEYS[1] the session key, ARGV[1] the principal.
// Deletes the binding when the principal owns it; replies 1 then, else 0.
var endSessionScript = redis.NewScript(principalLua + `
local owner = redis.call('GET', KEYS[1])
if owner and principal(owner) == principal(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// EndSession implements [Store.EndSession]: the binding goes first, so the
// session is no longer usable whatever happens next; then its entry in
// the principal's count (on a Cluster, another slot), which, if that step
// fails, only keeps counting it until it would have expired.
func (s *RedisStore) EndSession(ctx context.Context, id, principal string) error {
	if err := checkSessionID(id); err != nil {
		return err
	}
	p, _ := SplitOwner(principal)
	ended, err := endSessionScript.Run(ctx, s.rdb, []string{s.sessionKey(id)}, p).Int()
	if err != nil {
		return fmt.Errorf("pending: ending session %s: %w", id, err)
	}
	if ended == 0 {
		return nil
	}
	if err := s.rdb.ZRem(ctx, s.sessionsOfKey(p), id).Err(); err != nil {
		return fmt.Errorf("pending: uncounting session %s: %w", id, err)
	}
	return nil
}

// SessionOwner implements [Store.SessionOwner] with GET.
func (s *RedisStore) SessionOwner(ctx context.Context, id string) (string, error) {
	if err := checkSessionID(id); err != nil {
		return "", err
	}
	owner, err := s.rdb.Get(ctx, s.sessionKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", noSession(id)
	}
	if err != nil {
		return "", fmt.Errorf("pending: reading session %s: %w", id, err)
	}
	return owner, nil
}
