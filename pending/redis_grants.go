package pending

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var _ Grants = (*RedisStore)(nil)

// Remembered grants in Redis, under the store's hash tag like its calls
// (G is grantGen):
//
//	{toolgate}:grantG:<id>             hash: the grant (fields below), expires at ExpiresAt
//	{toolgate}:grantscopeG:<scope>     string: the ID of the scope's grant, expires with it
//	{toolgate}:grantsG                 sorted set of grant IDs by ExpiresAt (MaxGrants counts it)
//	{toolgate}:grantsG:created         sorted set of the same IDs by CreatedAt (Grants' order)
//	{toolgate}:grantrevokedG:<id>      hash: a revoked grant, kept a minute for a retried Revoke
//
// <scope> is grantScope: subject, upstream, tool and "=target" or "*"
// (any target), separated by NUL bytes. Every key has a TTL: a grant's
// keys expire with it, the indexes with their latest grant, so nothing
// outlives its grants if writes stop. Grant and Revoke trim the expired
// grants from both indexes, so they hold at most MaxGrants live grants and
// the expired ones since the last write.
//
// Each method is one script (redis_scripts.go's conventions: common
// arguments, Redis' clock): FindGrant reads the scope keys (the exact one
// only for a call that acts on nothing else) and the hash in one round
// trip and checks the expiry against TIME, so a grant stops applying at
// its ExpiresAt exactly, whether Redis has expired its keys yet or not.
//
// Hash fields: sb Subject, up Upstream, tl Tool, tg Target, an AnyTarget
// ("1"), ex Extras, by Approver, ci CallID, cm Comment, sl Seal, ca CreatedAt, ea
// ExpiresAt (ms), sc the scope; rv the revoking nonce (grantrevoked only).

// grantGen is the generation of the grants' key names. It changes when a
// grant comes to bind more than an older release checks (its seal, the
// headers and query its call sent): during a rolling upgrade an older
// replica sharing the store then finds none of the newer grants, and asks,
// rather than let through a call the grant's approver was not shown. The
// older generation's grants are not read either: they bind less, and
// expire with their lifetime. Generation 2: grants bind the query (and are
// sealed, with digests under a derived key).
const grantGen = "2"

func (s *RedisStore) grantKey(id string) string { return s.base + "grant" + grantGen + ":" + id }

func (s *RedisStore) grantScopeKey(scope string) string {
	return s.base + "grantscope" + grantGen + ":" + scope
}

// grantRevokedKey is where a revoked grant is kept a minute.
func (s *RedisStore) grantRevokedKey(id string) string {
	return s.base + "grantrevoked" + grantGen + ":" + id
}

// grantIndex and grantCreated are the grant indexes' keys.
func (s *RedisStore) grantIndex() string   { return s.base + "grants" + grantGen }
func (s *RedisStore) grantCreated() string { return s.base + "grants" + grantGen + ":created" }

// grantKeys returns the keys a grant script that writes declares: on a
// Cluster the grant indexes and keys (redis_declare.go), elsewhere keys[0]
// alone, which routes the script.
func (s *RedisStore) grantKeys(keys ...string) []string {
	if !s.cluster {
		return keys[:1]
	}
	return append(keys, s.grantIndex(), s.grantCreated())
}

// grantRevokedTTL is how long a revoked grant is kept for a retried
// Revoke to recognise (go-redis retries within seconds).
const grantRevokedTTL = time.Minute

// luaGrants are the helpers of the grant scripts, after luaPrelude.
const luaGrants = `
local grantsMessage = '` + grantsMessage + `'
local gindex, gcreated = base .. 'grants` + grantGen + `', base .. 'grants` + grantGen + `:created'
local function grantkey(id) return base .. 'grant` + grantGen + `:' .. id end
local function scopekey(sc) return base .. 'grantscope` + grantGen + `:' .. sc end
local function revokedkey(id) return base .. 'grantrevoked` + grantGen + `:' .. id end

-- field returns a field of an HGETALL reply, or nil.
local function field(flat, f)
  for i = 1, #flat, 2 do
    if flat[i] == f then return flat[i + 1] end
  end
  return nil
end

-- live reports whether an HGETALL reply is a grant that has not expired.
local function live(flat)
  local ea = field(flat, 'ea')
  return ea ~= nil and now < tonumber(ea)
end

-- trim drops the expired grants from both indexes; their keys expire by
-- themselves.
local function trim()
  for _, id in ipairs(call('ZRANGEBYSCORE', gindex, '-inf', nows)) do
    call('ZREM', gcreated, id)
  end
  call('ZREMRANGEBYSCORE', gindex, '-inf', nows)
end

-- unindex removes a grant from the indexes and its scope's lookup.
local function unindex(id, sc)
  call('ZREM', gindex, id)
  call('ZREM', gcreated, id)
  if sc and call('GET', scopekey(sc)) == id then call('DEL', scopekey(sc)) end
end

-- lasts makes key k last at least until at.
local function lasts(k, at)
  local left = call('PTTL', k)
  if left < 0 or now + left < at then call('PEXPIREAT', k, num(at)) end
end
`

func newGrantScript(body string) *redis.Script {
	return redis.NewScript(luaPrelude + luaSetup + luaGrants + body)
}

// grantScript: KEYS[1] the grant's key, ARGV[4] id, [5] lifetime ms, [6]
// scope, [7] MaxGrants, [8…] field, value pairs. Replies {'ok', grant} or
// {'toomany'}. A live grant of the same scope is replaced (deleted), and a
// replacement does not count against the cap.
var grantScript = newGrantScript(`
local id, life, sc, maxg = ARGV[4], tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local k = grantkey(id)
-- a retried grant (its reply was lost) answers as the first time
if call('EXISTS', k) == 1 then return {'ok', call('HGETALL', k)} end
trim()
local old = call('GET', scopekey(sc))
if old and call('ZSCORE', gindex, old) then
  -- With declared keys, the store reads the scope's grant just before:
  -- if another grant replaced it since, the one replaced here is left to
  -- expire, out of the indexes, where nothing finds it (redis_declare.go).
  if not undeclared({grantkey(old)}) then call('DEL', grantkey(old)) end
  unindex(old, sc)
elseif call('ZCARD', gindex) >= maxg then
  return {'toomany'}
end
local f = {}
for i = 8, #ARGV do f[#f + 1] = ARGV[i] end
local ea = now + life
call('HSET', k, 'ca', nows, 'ea', num(ea), 'sc', sc, unpack(f))
call('PEXPIREAT', k, num(ea))
call('SET', scopekey(sc), id)
call('PEXPIREAT', scopekey(sc), num(ea))
call('ZADD', gindex, num(ea), id)
call('ZADD', gcreated, nows, id)
lasts(gindex, ea)
lasts(gcreated, ea)
publish(grantsMessage, 'granted')
return {'ok', call('HGETALL', k)}
`)

// findGrantScript (read-only): KEYS[1] the key of the first scope to look
// up, ARGV[4…] the scopes in order: the exact scope then the any-target
// one, or the any-target one alone for a call with more than one target.
// Replies {id, grant} for the first live grant of them, or {n}: none, and n
// live grants in all (FindGrant remembers when there are none,
// redis_nogrants.go). It runs for every ask that a grant could cover, so
// it is a function of the library (redis_functions.go): as an EVAL
// script, Redis would run the whole prelude first at every lookup.
var findGrantScript = newFunction("findgrant", luaGrants+`
for i = 4, #ARGV do
  local id = call('GET', scopekey(ARGV[i]))
  if id then
    local flat = call('HGETALL', grantkey(id))
    if live(flat) then return {id, flat} end
  end
end
return {call('ZCOUNT', gindex, '(' .. nows, '+inf')}
`)

// listGrantsScript (read-only): ARGV[4] limit. Replies {id, grant, …},
// newest first, skipping grants that expired but are still indexed.
var listGrantsScript = newGrantScript(`
local limit = tonumber(ARGV[4])
local out, offset = {}, 0
while #out < 2 * limit do
  local ids = call('ZREVRANGE', gcreated, offset, offset + limit - 1)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    if #out >= 2 * limit then break end
    local flat = call('HGETALL', grantkey(id))
    if live(flat) then
      out[#out + 1] = id
      out[#out + 1] = flat
    end
  end
  offset = offset + limit
end
return out
`)

// revokeGrantScript: KEYS[1] the grant's key, ARGV[4] id, [5] nonce, [6]
// how long the revoked grant is kept (ms). Replies {'ok', grant} or
// {'notfound'}. The grant's key is renamed to grantrevoked:<id> with the
// nonce, so that a retry of this Revoke answers as the first run did.
var revokeGrantScript = newGrantScript(`
local id, nonce, keep = ARGV[4], ARGV[5], ARGV[6]
local k, rk = grantkey(id), revokedkey(id)
local flat = call('HGETALL', k)
-- with declared keys, its scope's is one (redis_declare.go)
local sc = field(flat, 'sc')
local r = sc and undeclared({scopekey(sc)})
if r then return r end
trim()
if not live(flat) or not call('ZSCORE', gindex, id) then
  if #flat > 0 then
    -- expired, or replaced (see grantScript), its key not yet gone
    call('DEL', k)
    unindex(id, sc)
  end
  if call('HGET', rk, 'rv') == nonce then return {'ok', call('HGETALL', rk)} end
  return {'notfound'}
end
unindex(id, sc)
call('RENAME', k, rk)
call('HSET', rk, 'rv', nonce)
call('PEXPIRE', rk, keep)
return {'ok', flat}
`)

// Grant implements [Grants.Grant].
func (s *RedisStore) Grant(ctx context.Context, g Grant, lifetime time.Duration) (Grant, error) {
	if err := CheckGrant(g, lifetime); err != nil {
		return Grant{}, err
	}
	id := g.ID
	if id == "" {
		id = rand.Text()
	}
	scope := grantScope(g.Subject, g.Upstream, g.Tool, g.Target, g.AnyTarget)
	args := []any{id, max(lifetime.Milliseconds(), 1), scope, MaxGrants}
	for _, f := range [...]struct{ name, v string }{
		{"sb", g.Subject},
		{"up", g.Upstream},
		{"tl", g.Tool},
		{"tg", g.Target},
		{"ex", g.Extras},
		{"by", g.Approver},
		{"ci", g.CallID},
		{"cm", g.Comment},
		{"sl", g.Seal},
	} {
		if f.v != "" {
			args = append(args, f.name, f.v)
		}
	}
	if g.AnyTarget {
		args = append(args, "an", "1")
	}
	keys := s.grantKeys(s.grantKey(id), s.grantScopeKey(scope))
	if s.cluster {
		// the grant this one replaces, if any (grantScript)
		old, err := s.rdb.Get(ctx, s.grantScopeKey(scope)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return Grant{}, fmt.Errorf("pending: granting %s on %s: %w", g.Tool, g.Subject, err)
		}
		if old != "" {
			keys = append(keys, s.grantKey(old))
		}
	}
	v, _, err := s.runDeclaring(ctx, grantScript, false, keys, s.scriptArgs(s.base, "", args))
	if err != nil {
		return Grant{}, fmt.Errorf("pending: granting %s on %s: %w", g.Tool, g.Subject, err)
	}
	s.granted() // before its message is heard
	code, got, err := grantReply(id, v)
	switch {
	case err != nil:
		return Grant{}, fmt.Errorf("pending: granting %s on %s: %w", g.Tool, g.Subject, err)
	case code == "toomany":
		return Grant{}, tooManyGrants()
	case code != "ok":
		return Grant{}, fmt.Errorf("pending: granting %s on %s: unexpected reply %q", g.Tool, g.Subject, code)
	}
	return got, nil
}

// FindGrant implements [Grants.FindGrant] with one script: no replica's
// clock is involved, and the grant found is one that has not expired by
// Redis' clock.
func (s *RedisStore) FindGrant(ctx context.Context, q GrantQuery) (Grant, error) {
	if !findable(q) {
		return Grant{}, noGrantFor(q)
	}
	if s.noGrantsKnown() {
		return Grant{}, noGrantFor(q)
	}
	mark, live := s.markHeard()
	// The exact scope only when its grant may cover the call.
	anyTarget := grantScope(q.Subject, q.Upstream, q.Tool, "", true)
	first, scopes := anyTarget, []any{anyTarget}
	if q.SoleTarget {
		exact := grantScope(q.Subject, q.Upstream, q.Tool, q.Target, false)
		first, scopes = exact, []any{exact, anyTarget}
	}
	v, err := s.run(ctx, findGrantScript, s.base, []string{s.grantScopeKey(first)}, scopes...)
	if err != nil {
		return Grant{}, fmt.Errorf("pending: finding a grant: %w", err)
	}
	if len(v) <= 1 {
		if len(v) == 1 && v[0] == int64(0) && live {
			s.noGrantsSince(mark)
		}
		return Grant{}, noGrantFor(q)
	}
	gs, err := decodeGrants(v)
	if err != nil {
		return Grant{}, fmt.Errorf("pending: finding a grant: %w", err)
	}
	return gs[0], nil
}

// Grants implements [Grants.Grants].
func (s *RedisStore) Grants(ctx context.Context, limit int) ([]Grant, error) {
	if limit <= 0 {
		return nil, nil
	}
	v, err := s.run(ctx, listGrantsScript, s.base, []string{s.grantCreated()}, limit)
	if err != nil {
		return nil, fmt.Errorf("pending: listing grants: %w", err)
	}
	gs, err := decodeGrants(v)
	if err != nil {
		return nil, fmt.Errorf("pending: listing grants: %w", err)
	}
	return gs, nil
}

// Revoke implements [Grants.Revoke]. The grant's keys and index entries
// go in one script, so from its reply on no replica finds the grant.
func (s *RedisStore) Revoke(ctx context.Context, id string) (Grant, error) {
	if id == "" || len(id) > MaxGrantFieldBytes {
		return Grant{}, noGrant(id) // no grant has such an ID
	}
	keys := s.grantKeys(s.grantKey(id), s.grantRevokedKey(id))
	v, _, err := s.runDeclaring(ctx, revokeGrantScript, false, keys, s.scriptArgs(s.base, "", []any{id, nonce(), grantRevokedTTL.Milliseconds()}))
	if err != nil {
		return Grant{}, fmt.Errorf("pending: revoking grant %s: %w", id, err)
	}
	code, g, err := grantReply(id, v)
	switch {
	case err != nil:
		return Grant{}, fmt.Errorf("pending: revoking grant %s: %w", id, err)
	case code == "notfound":
		return Grant{}, noGrant(id)
	case code != "ok":
		return Grant{}, fmt.Errorf("pending: revoking grant %s: unexpected reply %q", id, code)
	}
	return g, nil
}

// grantReply splits a {code, grant} reply.
func grantReply(id string, v []any) (code string, g Grant, err error) {
	if len(v) == 0 {
		return "", Grant{}, errors.New("pending: empty reply from Redis")
	}
	code, _ = v[0].(string)
	if len(v) > 1 {
		g, err = decodeGrant(id, v[1])
	}
	return code, g, err
}

// decodeGrants decodes a reply {id, grant, id, grant, …}.
func decodeGrants(v []any) ([]Grant, error) { return decodePairs(v, "grant list", decodeGrant) }

// decodeGrant decodes a grant's HGETALL reply (field, value, …).
func decodeGrant(id string, v any) (Grant, error) {
	flat, ok := v.([]any)
	if !ok || len(flat)%2 != 0 {
		return Grant{}, fmt.Errorf("pending: unexpected grant encoding %T", v)
	}
	g := Grant{ID: id}
	var err error
	ms := func(v string) time.Time {
		n, e := strconv.ParseInt(v, 10, 64)
		err = cmpErr(err, e)
		return time.UnixMilli(n)
	}
	for i := 0; i < len(flat); i += 2 {
		f, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		switch f {
		case "sb":
			g.Subject = v
		case "up":
			g.Upstream = v
		case "tl":
			g.Tool = v
		case "tg":
			g.Target = v
		case "an":
			g.AnyTarget = v == "1"
		case "ex":
			g.Extras = v
		case "by":
			g.Approver = v
		case "ci":
			g.CallID = v
		case "cm":
			g.Comment = v
		case "sl":
			g.Seal = v
		case "ca":
			g.CreatedAt = ms(v)
		case "ea":
			g.ExpiresAt = ms(v)
		}
	}
	if err != nil {
		return Grant{}, fmt.Errorf("pending: decoding grant %s: %w", id, err)
	}
	return g, nil
}
