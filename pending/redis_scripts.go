package pending

import "github.com/redis/go-redis/v9"

// The Lua scripts of RedisStore. Each transition is one script, so it is one
// atomic step on the Redis server: the state is compared and set, the
// indexes, TTLs and attach key are updated, and the wake-up is published,
// with nothing in between. Redis runs a script to the end before any other
// command, which is what makes "first decision wins" and "exactly one claim"
// hold across replicas.
//
// Arguments common to every script (the prelude reads them):
//
//	KEYS     a key of the store (routes the script to the store's slot),
//	         or every key the script may touch (on a Redis Cluster; see
//	         "Declared keys" in the prelude and redis_declare.go)
//	ARGV[1]  key base "{tag}:"   ARGV[2] ResultTTL in ms   ARGV[3] pub/sub channel
//
// Script-specific arguments start at ARGV[4]. Keys are built from the base
// inside the script: they carry the same hash tag as KEYS[1], so they are
// in the same Redis Cluster slot.
//
// Times are milliseconds since the epoch from Redis' TIME, never from the
// replica that runs the script: expiry and leases mean the same on every
// replica whatever their clocks say. Scripts that call TIME and then write
// are replicated by their effects (the default since Redis 5, the only mode
// since 7).
//
// One string key per call, call:<id>, holding its fields (an empty field
// is not stored by Park; see decode and encode for the encoding: a line
// of its state and lengths, the short fields packed, then bf, in, rq and
// rb, the large ones, so that a list reads the short ones and the Brief
// with GETRANGE alone):
//
//	st state        ak AttachKey   ag ArgsKey      ad ArgsDigest
//	aa "1": AttachKey is ArgsKey (ak is not stored: the usual call has no
//	   Idempotency-Key, and one digest is enough)
//	ak, ag, ad and rd, digests of 64 hex digits, are stored as their 32
//	bytes behind a 0 byte (packDigest)
//	sb Subject      up Upstream    tl Tool         rq Request
//	rd RequestDigest               in Info
//	pr Principal    bf Brief (small; what ListBrief reads instead of rq, in)
//	ca CreatedAt    ea ExpiresAt   by DecidedBy    cm Comment   da DecidedAt
//	qm Quorum ("2,1")              ap Approvals (JSON list of {b, t, c, n})
//	fe Fence        lu LeaseUntil  rs Result.Status (present = has a result)
//	rh Result.Header (JSON)        rb Result.Body  rt Result.Truncated ("1")
//	dl Delivered ("1")             op the last writer's nonce (see retried)
//
// Field names are two characters because they are stored in every call.
// Scripts read a call into a Lua table (load), change the table and write
// it back whole (save): a call is ~2 KB, and one key instead of a hash and
// a body key saves the second key's name, keyspace and expiry entries and
// the hash's per-field overhead (~250 B a call). A call an earlier release
// stored as a hash and a body key is read as well (earlier) and rewritten
// as one key by its next transition.
//
// Indexes (sorted sets, member = call ID):
//
//	state:waiting  score = ExpiresAt: the order of List and ListBrief
//	               (with one pending.ttl, the order the calls were
//	               parked in), Expire's work list for waiting calls and,
//	               with due, what Options.MaxParked counts
//	state:<state>  any other state: score = when the call entered it (the
//	               order of List and ListBrief; for state:approved it is
//	               DecidedAt, Approved's grace)
//	due            approved calls by ExpiresAt (Expire's work list for
//	               them, and what MaxParked counts beside state:waiting)
//	leases         executing calls by LeaseUntil (Expire's work list for
//	               them)
//	parked:<principal>  the calls of one Call.Principal waiting or
//	               approved, score = ExpiresAt: what
//	               Options.MaxParkedPerPrincipal counts
//	ended:<principal>  the ended calls of one Call.Principal, score =
//	               when each ended: park forgets the oldest past
//	               Options.MaxParkedPerPrincipal (memory_ended.go says why)
//	unresolved     "<state>:<id>" for each end (ends.go) not yet marked
//	               Resolved, score = when the call reached it
//	               (Unresolved's work list): move adds it, Resolved
//	               removes it, and entries older than EndsKept (or
//	               ResultTTL, if shorter) are trimmed on insert; its
//	               TTL is its latest entry's + that
//	unannounced    waiting calls not yet marked Announced, score =
//	               CreatedAt (Unannounced's work list): park adds the
//	               call, Announced and move out of waiting remove it; its
//	               TTL is at least its latest entry's ExpiresAt + ResultTTL
//
// A waiting call has one entry in a deadline index (state:waiting), not
// two: a parked call's index entries are most of what it costs Redis
// beyond its data (~128 B each in a large sorted set).
//
// Every index key has a TTL of at least its latest entry's retention, and
// at most an eighth more (last; unresolved's is exact). move keeps the
// counted indexes, so every way out of waiting and approved (a decision, a
// cancel, a claim, an expiry) leaves the counts. A call past its expiry no
// longer counts even before it is moved: the caps count the entries whose
// score (ExpiresAt) is still ahead. Each of these keys has a TTL of at
// least its latest entry's ExpiresAt + ResultTTL, so a principal's key
// goes away with its calls.
//
// Retried writes: go-redis retries a command whose reply was lost although
// the server ran it (docs/security.md, R02 and R16). Every write carries a
// random nonce stored in "op"; a script that finds the call already moved
// by the same nonce answers as if it had just done it, so a retry neither
// fails nor repeats the step.
const luaPrelude = `
-- What a script call is about, set by setup (at the end of the prelude)
-- from the common arguments and Redis' clock; everything else here is
-- functions and constants, made once where the scripts run as a function
-- library (redis_functions.go).
local base, rttl, channel, sharded, declared, now, nows
local due, leases, unannounced, unresolved, endsKept, deadlines
-- On a Cluster the channel comes as '{' .. channel (a prefix never holds
-- '{'): publish on the shard's own channel, which stays on the shard's
-- nodes (SPUBLISH, Redis 7), and on the global one where SPUBLISH is not.
-- The message is the call's ID and, after a space, the state it moved to
-- (a hint: see redis_wait.go).
local function publish(id, st)
  local m = id .. ' ' .. st
  if not (sharded and pcall(redis.call, 'SPUBLISH', base .. 'events', m)) then
    redis.call('PUBLISH', channel, m)
  end
end
-- Declared keys. A script given one key (KEYS[1], which routes it to its
-- slot) may touch any key of its slot: the way on one Redis node and for
-- the read-only scripts. A script given more declares every key it may
-- touch, the way on a Redis Cluster, where a slot that is moving to another
-- node (a reshard) holds some of its keys on each side: Redis then checks
-- the declared keys before the script runs (ASK, TRYAGAIN), never half-way
-- through it. Such a script first works out the keys its call needs (pr,
-- attach keys, another call it attaches to) and replies {'declare', k, …}
-- with the ones not declared, before it writes anything; the store runs it
-- again with them (redis_declare.go). call refuses an undeclared key
-- outright: a script that touched one would be a bug that a reshard turns
-- into keys split between two nodes.
local function call(cmd, k, ...)
  if declared and not declared[k] then error('toolgate: undeclared key ' .. tostring(k) .. ' in ' .. cmd) end
  return redis.call(cmd, k, ...)
end
-- undeclared returns {'declare', k, …} for the keys of ks not declared, or
-- nil (always nil for a script that declares one key).
local function undeclared(ks)
  if not declared then return nil end
  local out = nil
  for _, k in ipairs(ks) do
    if not declared[k] then
      out = out or {'declare'}
      out[#out + 1] = k
    end
  end
  return out
end
-- the moves approvers are told of by a "resolved" notification (ends.go)
local ends = {approved = true, rejected = true, cancelled = true, expired = true, unknown = true}
local terminal = {executed = true, rejected = true, expired = true, failed = true, unknown = true, cancelled = true}
local terminals = {'executed', 'rejected', 'expired', 'failed', 'unknown', 'cancelled'}

-- num formats a time or a count. Every number a script writes is a whole
-- number of milliseconds (or a count), so '%d' formats it: the
-- floating-point formatting of '%.0f' (or of a number handed to
-- redis.call, '%.17g') takes Redis several times as long.
local function num(n) return string.format('%d', n) end
local function callkey(id) return base .. 'call:' .. id end
local function statekey(st) return base .. 'state:' .. st end
local function attachkey(ak) return base .. 'attach:' .. ak end

-- A call is one string key, call:<id> (see the comment above): a line
-- "<st> <header> <bf> <in> <rq> <rb>\n" (its state, then lengths), the
-- header (every other short field, a MessagePack map packed by cmsgpack:
-- parsed in C, not field by field in Lua), then the large fields Brief,
-- Info, Request and Result.Body in that order. One key, not a hash and a
-- body key: a key's own cost (its name, its entries in the keyspace and
-- the expiries) is paid once per call.
--
-- In a script a call is a table h of its short fields (and rb), with the
-- stored value it was read as or last written as (h._val), where Brief,
-- Info and Request lie in it (h._t0, h._t1) and their lengths (h._lens,
-- "<bf> <in> <rq>"): those three never change after park, so they are
-- neither split nor copied until the call is written again, and a reply
-- is the stored value itself (value), which the store decodes in Go. The
-- table's own entries have names of more than two characters.

-- line parses a value's first line: the state, the lengths, where the
-- header starts (1-based), and the lengths of Brief, Info and Request as
-- they are written ("<bf> <in> <rq>", which h._lens keeps without
-- formatting the numbers again); nil for a value that is not a call's.
local function line(v)
  local st, hl, lens, bf, inl, rq, rb, at = string.match(v, '^(%a+) (%d+) ((%d+) (%d+) (%d+)) (%d+)\n()')
  if not st then return nil end
  -- digits, coerced by '+ 0' (tonumber would convert each twice)
  return st, hl + 0, {bf + 0, inl + 0, rq + 0, rb + 0}, at, lens
end

-- unpackheader reads a call's header; nil when it is not one.
local function unpackheader(b)
  local ok, h = pcall(cmsgpack.unpack, b)
  if ok and type(h) == 'table' then return h end
  return nil
end

-- decode returns the call stored as v, or nil for a damaged value (which
-- Go reads as ErrDamaged): a script treats it as gone rather than fail,
-- so one damaged key cannot stop the lists and sweeps of its whole shard,
-- nor leave a sweep's moves done but unreported (Redis keeps a failed
-- script's writes).
local function decode(v)
  local st, hl, n, at, lens = line(v)
  if not st or at + hl + n[1] + n[2] + n[3] + n[4] - 1 ~= #v then return nil end
  local h = unpackheader(string.sub(v, at, at + hl - 1))
  if not h then return nil end
  h.st, h._val, h._lens = st, v, lens
  h._t0 = at + hl
  h._t1 = h._t0 + n[1] + n[2] + n[3] - 1
  if n[4] > 0 then h.rb = string.sub(v, h._t1 + 1, h._t1 + n[4]) end
  return h
end

local function bodykey(id) return base .. 'body:' .. id end

-- earlier returns a call stored as an earlier release did: a hash, and
-- Brief, Info and Request in a body key, "<bf> <in> <rq>\n" then the
-- three. Its next save rewrites it as one key (h._old: and deletes the
-- body key).
local function earlier(id)
  local hash = call('HGETALL', callkey(id))
  if #hash == 0 then return nil end
  local h = {_old = true, _lens = '0 0 0', _tail = ''}
  for i = 1, #hash, 2 do h[hash[i]] = hash[i + 1] end
  local b = call('GET', bodykey(id))
  if b then
    local nl = string.find(b, '\n', 1, true)
    h._lens, h._tail = string.sub(b, 1, nl - 1), string.sub(b, nl + 1)
  end
  return h
end

local function load(id)
  local ok, v = pcall(call, 'GET', callkey(id))
  local h
  if not ok then
    h = earlier(id) -- WRONGTYPE: a hash
  elseif v then
    h = decode(v)
  end
  if h and h.aa then h.ak = h.ag end
  return h
end

-- encode returns the value that stores h, and where its Brief, Info and
-- Request lie in it. Every value is a string (cmsgpack would pack a Lua
-- number as a number).
-- header packs h's short fields but those of omit (nil: none): every
-- field of two characters but st and rb, which have their own places.
local function header(h, omit)
  local t = {}
  for f, x in pairs(h) do
    if #f == 2 and f ~= 'st' and f ~= 'rb' and not (f == 'ak' and h.aa) and not (omit and omit[f]) then t[f] = x end
  end
  return cmsgpack.pack(t)
end

local function encode(h)
  local hd = header(h)
  local tail = h._tail or string.sub(h._val, h._t0, h._t1)
  local rb = h.rb or ''
  local ln = h.st .. ' ' .. #hd .. ' ' .. h._lens .. ' ' .. #rb .. '\n'
  local t0 = #ln + #hd + 1
  return ln .. hd .. tail .. rb, t0, t0 + #tail - 1
end

-- save writes h as the call's key, keeping its expiry (or setting it to
-- at). Every write of a call goes through h and save; the first one of an
-- earlier release's call deletes its body key.
local function save(id, h, at)
  local v, t0, t1 = encode(h)
  if at then
    call('SET', callkey(id), v, 'PXAT', num(at))
  else
    call('SET', callkey(id), v, 'KEEPTTL')
  end
  h._val, h._t0, h._t1, h._tail = v, t0, t1, nil
  if h._old then
    call('DEL', bodykey(id))
    h._old = nil
  end
end

-- again answers r to a retry of a write that ran already (its nonce
-- found), after a write of its own. Where replicas must confirm writes,
-- the WAIT sent after the retry waits, on Redis 7.2 and later, for the
-- last write of the retry's own connection, and the first run may have
-- written on another one: a retry that wrote nothing would be confirmed
-- at once, whether or not the replicas have the first run's write.
-- Setting the call key's expiry to what it is moves the replication
-- offset past the first run's write.
local function again(id, r)
  local k = callkey(id)
  local pt = call('PTTL', k)
  if pt > 0 then call('PEXPIRE', k, pt) end
  return r
end

-- droprequest leaves Request out of h's next save: its Brief and Info
-- stay where they lie, and its length becomes 0.
local function droprequest(h)
  local bf, inl, rq = string.match(h._lens, '^(%d+) (%d+) (%d+)$')
  if not rq or rq == '0' then return end
  local tail = h._tail or string.sub(h._val, h._t0, h._t1)
  h._tail = string.sub(tail, 1, tonumber(bf) + tonumber(inl))
  h._lens = bf .. ' ' .. inl .. ' 0'
end

-- value is what a script replies for a call: its stored value, as it
-- was just read or written (an earlier release's call, encoded).
local function value(h)
  if h._old then return (encode(h)) end
  return h._val
end

-- lean is what a script replies for a call to a caller that has some of
-- it already: the call's value (value) without its Request and
-- Result.Body (rq and rb, the large fields: such a caller holds them, or
-- never reads them); when omit names some (a set of field names),
-- without those header fields either (the header is packed again for
-- that, nothing else is); and when short, without Brief and Info too.
-- It is laid out as a stored value, with the lengths left out 0, so the
-- store decodes it as one. A reply copies its bytes out of Redis and the
-- store decodes them again: a request or a result sent back to the
-- replica that just sent it was a large part of what an ask cost both.
local function lean(h, omit, short)
  local v = value(h)
  local st, hl, n, at = line(v)
  local hd = omit and header(h, omit) or string.sub(v, at, at + hl - 1)
  if short then return st .. ' ' .. #hd .. ' 0 0 0 0\n' .. hd end
  local t0 = at + hl
  return st .. ' ' .. #hd .. ' ' .. n[1] .. ' ' .. n[2] .. ' 0 0\n' .. hd .. string.sub(v, t0, t0 + n[1] + n[2] - 1)
end

-- head returns a call's header fields without its large fields, and its
-- Brief when withBrief: two GETRANGEs, so a list copies no request or
-- result however large. nil when the call is gone.
local function head(id, withBrief)
  local k = callkey(id)
  local ok, v = pcall(call, 'GETRANGE', k, 0, 63)
  if not ok then
    -- an earlier release's hash
    local h = earlier(id)
    if not h then return nil end
    local n = tonumber(string.match(h._lens, '^%d+'))
    if withBrief and n > 0 then h.bf = string.sub(h._tail, 1, n) end
    h.rb = nil
    return h
  end
  if v == '' then return nil end
  local st, hl, n, at = line(v)
  if not st then return nil end -- damaged (decode)
  local len = hl
  if withBrief then len = len + n[1] end
  local hb = call('GETRANGE', k, at - 1, at + len - 2)
  local h = unpackheader(string.sub(hb, 1, hl))
  if not h then return nil end
  h.st = st
  if withBrief and n[1] > 0 then h.bf = string.sub(hb, hl + 1) end
  return h
end

-- storedstate returns the state a call's key names (the first word of its
-- value, as storedState reads it in Go), reading its first bytes alone; nil
-- when the key is gone, an earlier release's hash, or unreadable.
local function storedstate(id)
  local ok, v = pcall(call, 'GETRANGE', callkey(id), 0, 15)
  return ok and string.match(v, '^(%a+) ') or nil
end

-- forget drops a vanished call from the live indexes.
local function forget(id)
  call('ZREM', due, id)
  call('ZREM', leases, id)
  call('ZREM', statekey('waiting'), id)
  call('ZREM', statekey('approved'), id)
  call('ZREM', statekey('executing'), id)
  call('ZREM', unannounced, id)
end

-- attachname is the name of an attach key: the hex digest, stored in a
-- call as its 32 bytes behind a 0 byte (packDigest in Go). One format
-- of 32 bytes: a loop over them would cost Redis more time. The format
-- is a constant of the script, not made at every call.
local function attachname(d)
  if #d == 33 and string.byte(d, 1) == 0 then return string.format('` + hex32 + `', string.byte(d, 2, 33)) end
  return d
end

-- attachkeys returns the call's attach keys: AttachKey and ArgsKey, once
-- when they are the same (a call without an Idempotency-Key).
local function attachkeys(h)
  local ak, ag = attachname(h.ak or ''), attachname(h.ag or '')
  if ak == ag then return {ak} end
  return {ak, ag}
end

-- needed returns {'declare', k, …} for the keys a transition of call id may
-- touch beyond its shard's own that the script has not declared: the
-- call's own, its principal's count and its attach keys. nil when all are
-- declared, or when the script declares one key.
local function needed(id, h)
  if not declared then return nil end
  local ks = {callkey(id), bodykey(id)}
  if h.pr and h.pr ~= '' then
    ks[#ks + 1] = base .. 'parked:' .. h.pr
    ks[#ks + 1] = base .. 'ended:' .. h.pr
  end
  for _, ak in ipairs(attachkeys(h)) do
    if ak ~= '' then ks[#ks + 1] = attachkey(ak) end
  end
  return undeclared(ks)
end

-- unattach deletes the call's attach keys that still name it.
local function unattach(id, h)
  for _, ak in ipairs(attachkeys(h)) do
    if ak ~= '' then
      local k = attachkey(ak)
      if call('GET', k) == id then call('DEL', k) end
    end
  end
end

-- attached makes the call's attach keys that name it last until at.
local function attached(id, h, at)
  for _, ak in ipairs(attachkeys(h)) do
    if ak ~= '' then
      local k = attachkey(ak)
      if call('GET', k) == id then call('PEXPIREAT', k, num(at)) end
    end
  end
end

-- overdue returns the state a call past its deadline moves to, or nil.
local function overdue(h)
  if (h.st == 'waiting' or h.st == 'approved') and now >= tonumber(h.ea) then return 'expired' end
  if h.st == 'executing' and now >= tonumber(h.lu) then return 'unknown' end
  return nil
end

-- attachable reports whether retries attach to the call (pending's
-- attachable, in Lua): live, or executed, rejected or expired and not yet
-- delivered. A call past its deadline counts as what it moves to.
local function attachable(h)
  local st = overdue(h) or h.st
  if st == 'waiting' or st == 'approved' or st == 'executing' then return true end
  return (st == 'executed' or st == 'rejected' or st == 'expired') and h.dl ~= '1'
end

-- last makes index key k live at least until at: every index has a TTL of
-- at least its latest entry's retention, so an index whose calls are all
-- gone goes away with them, even if no sweeper ever trims it. An expiry
-- it extends goes an eighth further than asked (unless exact, for an
-- index whose TTL is a bound): each call asks for a little later than the
-- last, so a busy index was given a PEXPIREAT by every call that touched
-- it; now it gets one per eighth of its retention, and outlives its
-- latest entry by that eighth at most.
local function last(k, at, exact)
  local left = call('PTTL', k)
  if left >= 0 then -- an expiry to extend, or one late enough already
    if now + left >= at then return end
    if not exact then at = at + math.floor((at - now) / 8) end
  end
  call('PEXPIREAT', k, num(at))
end

-- count adds the call to its principal's index until ea (waiting,
-- approved), or removes it (any other state).
local function count(id, h, st, ea)
  if not h.pr or h.pr == '' then return end
  local counted = h.st == 'waiting' or h.st == 'approved'
  local k = base .. 'parked:' .. h.pr
  if st == 'waiting' or st == 'approved' then
    -- an approval that keeps the expiry keeps the entry park made, and
    -- the key's TTL that park made last for it
    if counted and ea == tonumber(h.ea) then return end
    call('ZADD', k, num(ea), id)
    last(k, ea + rttl)
  elseif counted then
    -- (a call that left them before has left the index already)
    call('ZREM', k, id)
  end
end

-- parked counts the calls waiting or approved whose expiry is ahead (the
-- count MaxParked caps): entries past it count no more, moved or not.
local function parked()
  local ahead = '(' .. nows
  return call('ZCOUNT', statekey('waiting'), ahead, '+inf') + call('ZCOUNT', due, ahead, '+inf')
end

-- move is the one place a call changes state: the state, its indexes,
-- its retention, its attach key and the wake-up, together. A call never
-- moves to waiting (only park puts it there): deadline is the new
-- ExpiresAt (approved) or LeaseUntil (executing), nil for a terminal state;
-- at, when given, the call's new retention (its attach keys' too), set in
-- the same write (a terminal call's is now + ResultTTL).
-- owe records the end 'to' of call id: it owes its notification until
-- Resolved, for endsKept at most.
local function owe(id, to)
  call('ZADD', unresolved, nows, to .. ':' .. id)
  call('ZREMRANGEBYSCORE', unresolved, '-inf', '(' .. num(now - endsKept))
  last(unresolved, now + endsKept, true) -- its TTL bounds how long an end is owed
end

local function move(id, h, to, fields, deadline, at)
  call('ZREM', statekey(h.st), id)
  if h.st == 'waiting' then call('ZREM', unannounced, id) end
  call('ZADD', statekey(to), nows, id)
  last(statekey(to), (deadline or now) + rttl)
  -- out of the deadline index of the state it leaves (waiting's is its
  -- state index, left above)
  if h.st == 'approved' or h.st == 'executing' then call('ZREM', deadlines[h.st], id) end
  if deadline then
    local d = deadlines[to]
    call('ZADD', d, num(deadline), id)
    last(d, deadline + rttl)
  end
  count(id, h, to, deadline)
  -- an end owes its notification until Resolved (an executor's own finish
  -- is quiet: not an end), for endsKept at most
  if ends[to] and not h._quiet then owe(id, to) end
  h.st = to
  for i = 1, #fields, 2 do h[fields[i]] = fields[i + 1] end
  if terminal[to] then
    droprequest(h) -- never sent now (Call.Request)
    save(id, h, now + rttl) -- a terminal call lasts ResultTTL
    -- terminal index entries live as long as their calls: trim on insert
    call('ZREMRANGEBYSCORE', statekey(to), '-inf', '(' .. num(now - rttl))
    if h.pr and h.pr ~= '' then
      -- scored by when it ended, after the latest entry: calls that end
      -- in one millisecond stay in the order they ended (ZRANGE would
      -- order equal scores by ID), and park forgets the first of them
      local ek = base .. 'ended:' .. h.pr
      local top = call('ZREVRANGE', ek, 0, 0, 'WITHSCORES')
      call('ZADD', ek, num(math.max(now, (tonumber(top[2]) or 0) + 1)), id)
      call('ZREMRANGEBYSCORE', ek, '-inf', '(' .. num(now - rttl))
      last(ek, now + rttl)
    end
    if attachable(h) then
      attached(id, h, now + rttl) -- its result or refusal attaches retries until delivered
    else
      unattach(id, h)
    end
  else
    save(id, h, at)
    if at then attached(id, h, at) end
  end
  publish(id, to)
end

-- setup begins every script call: the common arguments (see the comment
-- above), the keys declared, and the time.
local function setup(KEYS, ARGV)
  if redis.replicate_commands then redis.replicate_commands() end
  base, rttl, channel = ARGV[1], tonumber(ARGV[2]), ARGV[3]
  sharded = string.sub(channel, 1, 1) == '{'
  if sharded then channel = string.sub(channel, 2) end
  declared = nil
  if #KEYS > 1 then
    declared = {}
    for _, k in ipairs(KEYS) do declared[k] = true end
  end
  local t = redis.call('TIME')
  -- (TIME's digits, coerced by the arithmetic: tonumber would convert each twice)
  now = t[1] * 1000 + math.floor(t[2] / 1000)
  nows = num(now) -- now as a command argument: most scripts write it
  due, leases = base .. 'due', base .. 'leases'
  unannounced, unresolved = base .. 'unannounced', base .. 'unresolved'
  -- how long an end is owed at most (ends.go, EndsKept): ResultTTL when shorter
  endsKept = math.min(rttl, ` + endsKeptMS + `)
  -- the index of a state's deadlines (the one Expire walks)
  deadlines = {waiting = statekey('waiting'), approved = due, executing = leases}
end
`

// luaSetup is what an EVAL script runs after the prelude, before anything
// else: a function of the library runs it first too.
const luaSetup = "\nsetup(KEYS, ARGV)\n"

// hex32 formats 32 bytes as 64 hex digits (attachname).
const (
	hex8  = "%02x%02x%02x%02x%02x%02x%02x%02x"
	hex32 = hex8 + hex8 + hex8 + hex8
)

func newScript(body string) *redis.Script { return redis.NewScript(luaPrelude + luaSetup + body) }

// parkScript: ARGV[4] id, [5] ttl ms, [6] RequestDigest, [7] AttachKey,
// [8] Principal, [9] MaxParked, [10] MaxParkedPerPrincipal (0: no cap),
// [11] ArgsKey, [12] the calls parked in the other shards (MaxParked
// counts them too), [13] the lengths of Brief, Info and Request
// ("<bf> <in> <rq>"), [14] the three one after another, [15] ParkEvery
// in ms (0: no rate), [16] ParkBurst, [17…] field, value pairs. Replies
// {'new', CreatedAt, ExpiresAt} (in ms) for a call it parked, {'ok',
// call} for a retried park (the call as it stands), {'attached', call,
// id}, {'taken'}, {'toomany', 'principal'
// or 'all'} when a new call would pass a cap, or {'toomany', 'rate', ms}
// when the principal parks too often (rate.go), with the ms until its next
// new call would be let in. Only AttachKey is looked up; a new call
// is recorded under AttachKey and under ArgsKey, unless ArgsKey names
// another attachable call already.
var parkScript = newFunction("park", `
local id, ttl, digest, ak = ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7]
local pr, maxall, maxpr, ag, others = ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10]), ARGV[11], tonumber(ARGV[12])
-- Index entries of calls whose keys expired while no sweeper ran: drop a
-- few at every park, so the indexes stay bounded by the live calls. With
-- declared keys, the calls are not known in advance: Expire drops them.
if not declared then
  for _, list in ipairs({statekey('waiting'), due}) do
    for _, old in ipairs(call('ZRANGEBYSCORE', list, '-inf', '(' .. num(now - rttl), 'LIMIT', 0, 8)) do
      if call('EXISTS', callkey(old)) == 0 then forget(old) end
    end
  end
end
-- A call its replica gave up on (abandon.go) is never parked: the agent
-- was told it was not.
if call('EXISTS', base .. 'abandoned:' .. id) == 1 then return {'abandoned'} end
local h = load(id)
if h then
  -- the same request again is a retried park (docs/security.md, R02): answer as the first time
  if (h.rd or '') == digest then return again(id, {'ok', value(h)}) end
  return {'taken'}
end
-- The calls the attach keys name, read once before anything is written:
-- other may be attached to (or moved first, if overdue), cur is only read.
-- With declared keys, their keys are declared first (and other's for a
-- move), in at most two 'declare' replies.
local other = ak ~= '' and call('GET', attachkey(ak))
local cur = ag ~= '' and ag ~= ak and call('GET', attachkey(ag))
if declared then
  local ks = {}
  for _, x in ipairs({other or '', cur or ''}) do
    if x ~= '' then
      ks[#ks + 1] = callkey(x)
      ks[#ks + 1] = bodykey(x)
    end
  end
  local r = undeclared(ks)
  if r then return r end
  local o = other and load(other)
  r = o and needed(other, o)
  if r then return r end
end
-- The principal's ended calls past its cap, oldest first: forgotten below,
-- once the new call is let in (memory_ended.go says why). Their keys are
-- declared before anything is written. Attach keys that still name one are
-- left to expire: a call that is gone attaches nothing.
local ek, gone = pr ~= '' and maxpr > 0 and base .. 'ended:' .. pr, {}
if ek then
  local n = call('ZCARD', ek)
  if n > maxpr then gone = call('ZRANGE', ek, 0, n - maxpr - 1) end
  if declared and #gone > 0 then
    local ks = {}
    for _, x in ipairs(gone) do
      ks[#ks + 1] = callkey(x)
      ks[#ks + 1] = bodykey(x)
    end
    local r = undeclared(ks)
    if r then return r end
  end
end
if other then
  local o = load(other)
  if o then
    local to = overdue(o)
    if to then move(other, o, to, {}, nil) end
    if attachable(o) then return {'attached', value(o), other} end
  end
end
-- The caps count the calls waiting or approved whose expiry has not
-- passed, whether or not the calls past it were moved to expired yet: the
-- principal's entries past it are trimmed first.
if pr ~= '' then
  local pk = base .. 'parked:' .. pr
  call('ZREMRANGEBYSCORE', pk, '-inf', nows)
  if maxpr > 0 and call('ZCARD', pk) >= maxpr then return {'toomany', 'principal'} end
end
if maxall > 0 and parked() + others >= maxall then return {'toomany', 'all'} end
-- The rate of new calls of the principal (rate.go): its arrival time is
-- read here and moved once the call is let in.
local every, burst = tonumber(ARGV[15]), tonumber(ARGV[16])
local rk, tat = pr ~= '' and every > 0 and base .. 'rate:' .. pr
if rk then
  tat = math.max(tonumber(call('GET', rk) or 0) or 0, now)
  local ahead = tat - now - (burst - 1) * every
  if ahead > 0 then return {'toomany', 'rate', num(ahead)} end
end
for _, x in ipairs(gone) do
  call('ZREM', ek, x)
  -- out of its state's index (two commands, not six), or out of every
  -- terminal one when its key does not name one
  local st = storedstate(x)
  if st and terminal[st] then
    call('ZREM', statekey(st), x)
  else
    for _, s in ipairs(terminals) do call('ZREM', statekey(s), x) end
  end
  -- and the ends it owes: the caps bound the unresolved index too
  local owed = {}
  for st in pairs(ends) do owed[#owed + 1] = st .. ':' .. x end
  call('ZREM', unresolved, unpack(owed))
  call('DEL', callkey(x), bodykey(x))
end
local fields = {}
for i = 17, #ARGV do fields[#fields + 1] = ARGV[i] end
local expires = now + ttl
h = {st = 'waiting', ca = nows, ea = num(expires)}
for i = 1, #fields, 2 do h[fields[i]] = fields[i + 1] end
h._lens, h._tail = ARGV[13], ARGV[14]
save(id, h, expires + rttl)
call('ZADD', statekey('waiting'), num(expires), id)
call('ZADD', unannounced, nows, id)
for _, k in ipairs({statekey('waiting'), unannounced}) do last(k, expires + rttl) end
count(id, {pr = pr}, 'waiting', expires)
if rk then call('SET', rk, num(tat + every), 'PX', num(tat + every - now)) end
if ak ~= '' then call('SET', attachkey(ak), id, 'PX', num(ttl + rttl)) end
if ag ~= '' and ag ~= ak then
  -- the first identical call stays the one a keyless retry finds (cur,
  -- as it stands now: a move of other above may have ended it)
  local o = cur and load(cur)
  if not (o and attachable(o)) then call('SET', attachkey(ag), id, 'PX', num(ttl + rttl)) end
end
-- The call is the caller's, stored as it sent it (waiting, no fence):
-- only its times, from Redis' clock, are news to it. Its request and
-- information are not sent back.
return {'new', h.ca, h.ea}
`)

// fromWaitingScript moves a waiting call to ARGV[5] (approved, rejected,
// cancelled): ARGV[4] id, [6] by, [7] comment, [8] nonce, [9] the
// approved window in ms (an approval keeps the call at least that long),
// [10] the Quorum entries the approval counts towards ("0,2"), [11] the
// lease in ms of a claim made with an approval that moves the call
// (Decision.Claim; 0: none).
// Replies {'ok', call} (without Request; whole once claimed), {'conflict', call},
// {'ended', call} or {'notfound'}. An approval is
// first added to the call's approvals (once per approver); the call moves
// only when they meet its quorum, all in this one step, so two approvers on
// two replicas are both counted, once each.
var fromWaitingScript = newFunction("decide", `
-- met reports whether the approvals aps meet the quorum qm ("2,1": entry
-- i needs that many approvals counting towards i); no quorum: any one.
local function met(qm, aps)
  if not qm or qm == '' then return #aps > 0 end
  local i = 0
  for need in string.gmatch(qm, '%d+') do
    local n = 0
    for _, a in ipairs(aps) do
      for c in string.gmatch(a.n or '', '%d+') do
        if tonumber(c) == i then n = n + 1; break end
      end
    end
    if n < tonumber(need) then return false end
    i = i + 1
  end
  return true
end
-- An 'ok' replies the call lean, without its request: a decision's
-- callers show and report the call, and the executor's Claim reads the
-- request. A conflict replies the call as it stands.
local id, to, by, comment, nonce = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local window = tonumber(ARGV[9]) or 0
local counts = ARGV[10] or ''
local claim = tonumber(ARGV[11]) or 0
if to ~= 'approved' then claim = 0 end
local h = load(id)
if not h then return {'notfound'} end
local r = needed(id, h)
if r then return r end
if h.st ~= 'waiting' then
  -- a retry of this very write, if nothing has moved the call since
  if h.op == nonce and h.st == to then return again(id, {'ok', lean(h)}) end
  if h.op == nonce and claim > 0 and h.st == 'executing' then return again(id, {'ok', value(h)}) end
  return {'conflict', value(h)}
end
-- past its expiry the call is expired, swept or not (docs/security.md, R14);
-- 'ended': this write ended it, and its caller reports the end
if overdue(h) then
  move(id, h, 'expired', {}, nil)
  return {'ended', value(h)}
end
local f = {'da', nows, 'op', nonce}
if to == 'approved' then
  local aps = {}
  if h.ap and h.ap ~= '' and h.ap ~= '{}' then aps = cjson.decode(h.ap) end
  -- counted once (or a retry), by name ignoring ASCII case; and at most
  -- maxApprover approvals per call
  if #aps >= 64 then return {'ok', lean(h)} end
  for _, a in ipairs(aps) do
    if string.lower(a.b) == string.lower(by) then return {'ok', lean(h)} end
  end
  aps[#aps + 1] = {b = by, t = nows, c = comment, n = counts}
  local ap = cjson.encode(aps)
  if not met(h.qm, aps) then
    h.ap, h.op = ap, nonce
    save(id, h)
    return {'ok', lean(h)}
  end
  f[#f + 1] = 'ap'; f[#f + 1] = ap
end
if by ~= '' then f[#f + 1] = 'by'; f[#f + 1] = by end
if comment ~= '' then f[#f + 1] = 'cm'; f[#f + 1] = comment end
local deadline, at = nil, nil
if to == 'approved' then
  -- an approval just before the expiry must still run: the call stays
  -- claimable for the approved window
  deadline = math.max(tonumber(h.ea), now + window)
  if deadline > tonumber(h.ea) then
    f[#f + 1] = 'ea'; f[#f + 1] = num(deadline)
    at = deadline + rttl
  end
end
if claim > 0 then
  -- approved and claimed in one step: the call passes through approved
  -- without entering its indexes, but its approval is an end all the
  -- same (its approvers hear of it), and the claim is the claim script's
  owe(id, 'approved')
  for i = 1, #f, 2 do h[f[i]] = f[i + 1] end
  local lu = now + claim
  h.fe = num((tonumber(h.fe) or 0) + 1)
  move(id, h, 'executing', {'lu', num(lu)}, lu, math.max(tonumber(h.ea), lu) + rttl)
  return {'ok', value(h)}
end
move(id, h, to, f, deadline, at)
return {'ok', lean(h)}
`)

// claimScript: ARGV[4] id, [5] lease ms, [6] nonce. Replies {'ok', call},
// {'conflict', call}, {'ended', call} (it was overdue: now expired) or
// {'notfound'}. The fence increases at every claim.
var claimScript = newFunction("claim", `
local id, lease, nonce = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local h = load(id)
if not h then return {'notfound'} end
local r = needed(id, h)
if r then return r end
if h.st ~= 'approved' then
  if h.op == nonce and h.st == 'executing' then return again(id, {'ok', value(h)}) end
  -- left as it stands even when overdue: ending it here would hide its
  -- end from Expire and from the executor's finish
  return {'conflict', value(h)}
end
if overdue(h) then
  move(id, h, 'expired', {}, nil)
  return {'ended', value(h)}
end
local lu = now + lease
h.fe = num((tonumber(h.fe) or 0) + 1)
move(id, h, 'executing', {'lu', num(lu), 'op', nonce}, lu, math.max(tonumber(h.ea), lu) + rttl)
return {'ok', value(h)}
`)

// finishScript: ARGV[4] id, [5] fence, [6] state, [7] nonce, [8…] result
// field, value pairs. Replies {'ok', call} (lean: its short fields but
// the result: the caller sent the result, and holds Brief and Info from
// its claim), {'fenced'}, {'lapsed', call} or {'notfound'}. A
// finish with the fence after the lease ran out is refused and the call
// becomes unknown, swept or not: others may have given it up already;
// 'lapsed' says this finish is what made it unknown. A stale fence never
// moves the call.
var finishScript = newFunction("finish", `
-- what an 'ok' leaves out beside the large fields: the rest of the
-- result (the finish's caller sent it, and puts it back in the call it
-- returns) and the nonce (read by no caller)
local sent = {rs = true, rh = true, rt = true, op = true}
local id, fence, to, nonce = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local h = load(id)
if not h then return {'notfound'} end
local r = needed(id, h)
if r then return r end
if h.st ~= 'executing' or h.fe ~= fence then
  -- a retry of this very finish: the result stored is the one it sends
  if h.op == nonce and h.st == to then return again(id, {'ok', lean(h, sent, true)}) end
  -- a retry of the finish that made the call unknown answers as it did
  if h.op == nonce .. ':lapsed' and h.st == 'unknown' then return again(id, {'lapsed', value(h)}) end
  -- left as it stands even when overdue: its end is for the fence
  -- holder's finish or for Expire to report. No call: a fenced finish
  -- returns none.
  return {'fenced'}
end
if overdue(h) then
  move(id, h, 'unknown', {'op', nonce .. ':lapsed'}, nil)
  return {'lapsed', value(h)}
end
local f = {'op', nonce}
for i = 8, #ARGV do f[#f + 1] = ARGV[i] end
h._quiet = true -- the executor's own outcome: its decision was the end
move(id, h, to, f, nil)
return {'ok', lean(h, sent, true)}
`)

// deliverScript: ARGV[4] id, [5] nonce. Replies {'first', call}, {'again',
// call}, {'conflict', call} or {'notfound'}.
var deliverScript = newFunction("deliver", `
local id, nonce = ARGV[4], ARGV[5]
local h = load(id)
if not h then return {'notfound'} end
local r = needed(id, h)
if r then return r end
if not terminal[h.st] then return {'conflict', value(h)} end
if h.dl == '1' then
  if h.op == nonce then return again(id, {'first', value(h)}) end
  return {'again', value(h)}
end
h.dl, h.op = '1', nonce
save(id, h)
unattach(id, h)
return {'first', value(h)}
`)

// expireScript: ARGV[4] limit. Replies {id, call, id, call, …} for the
// calls it moved. It walks the deadline indexes (state:waiting, due,
// leases), at most limit entries in all. It touches calls it finds in the
// indexes: on a Redis Cluster, Expire runs dueScript and expireOneScript
// instead.
var expireScript = newScript(luaSweep + `
local out = {}
eachdue(tonumber(ARGV[4]), function(list, id)
  local h = load(id)
  if sweep(id, list, h) then
    out[#out + 1] = id
    out[#out + 1] = value(h)
  end
end)
trim()
return out
`)

// dueScript, with the shard's own keys declared: ARGV[4] limit. Replies
// {list, id, list, id, …} for the entries of the deadline indexes that
// are due, at most limit in all, for expireOneScript to handle one by one.
var dueScript = newScript(luaSweep + `
local out = {}
eachdue(tonumber(ARGV[4]), function(list, id)
  out[#out + 1] = list
  out[#out + 1] = id
end)
trim()
return out
`)

// expireOneScript: ARGV[4] id, [5] the deadline index it was due in.
// Replies {'moved', call}, {'ok'} (nothing to move: another sweep or a
// transition came first) or {'declare', …}.
var expireOneScript = newScript(luaSweep + `
local id, list = ARGV[4], ARGV[5]
local h = load(id)
if h then
  local r = needed(id, h)
  if r then return r end
end
if sweep(id, list, h) then return {'moved', value(h)} end
return {'ok'}
`)

// luaSweep is what Expire's scripts share.
const luaSweep = `
-- sweep handles call id's entry in deadline index list (h: the call, nil
-- when gone): it forgets a call gone, moves an overdue one (and returns
-- true), and scores an entry out of place by its deadline, or drops it.
local function sweep(id, list, h)
  if not h then
    forget(id)
    return false
  end
  local to = overdue(h)
  if to then
    move(id, h, to, {}, nil)
    return true
  end
  if deadlines[h.st] == list then
    -- not due after all: an entry an earlier release scored by the
    -- time the call entered waiting; score it by its deadline
    call('ZADD', list, h.st == 'executing' and h.lu or h.ea, id)
  else
    -- an entry of a state the call has left (or, from an earlier
    -- release, a waiting call in due)
    call('ZREM', list, id)
  end
  return false
end

-- eachdue calls f(list, id) for the due entries of the deadline indexes
-- (state:waiting, due, leases), at most limit in all.
local function eachdue(limit, f)
  local seen = 0
  for _, list in ipairs({statekey('waiting'), due, leases}) do
    if seen >= limit then return end
    for _, id in ipairs(call('ZRANGEBYSCORE', list, '-inf', nows, 'LIMIT', 0, limit - seen)) do
      seen = seen + 1
      f(list, id)
    end
  end
end

-- trim drops terminal index entries older than their calls.
local function trim()
  for _, st in ipairs(terminals) do
    call('ZREMRANGEBYSCORE', statekey(st), '-inf', '(' .. num(now - rttl))
  end
end
`

// approvedScript (read-only): ARGV[4] grace ms, [5] limit. Replies {id,
// fields, …} for calls approved at least grace ago by Redis' clock, with
// only what the sweeper reads before it claims a call (state, expiry,
// upstream, decision and creation times) and what its claim declares on
// a Cluster (principal, attach keys): the claim returns the whole call. Whole calls, requests and results included, were most of what a
// sweep of many approved calls moved.
var approvedScript = newScript(`
local grace, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
local fields = {'st', 'ea', 'up', 'da', 'ca', 'pr', 'ak', 'ag', 'aa'}
local out = {}
for _, id in ipairs(call('ZRANGEBYSCORE', statekey('approved'), '-inf', num(now - grace), 'LIMIT', 0, limit)) do
  local h = head(id, false)
  if h and h.st then
    local f = {}
    for _, k in ipairs(fields) do
      if h[k] then
        f[#f + 1] = k
        f[#f + 1] = h[k]
      end
    end
    out[#out + 1] = id
    out[#out + 1] = f
  end
end
return out
`)

// listScript (read-only): ARGV[4] state, [5] limit. Replies {id, score,
// call, …}, longest in the state first, skipping index entries whose call
// is gone; the score (when the call entered the state) orders the merge of
// the shards' lists.
var listScript = newScript(`
local st, limit = ARGV[4], tonumber(ARGV[5])
local out, offset = {}, 0
while #out < 3 * limit do
  local ids = call('ZRANGE', statekey(st), offset, offset + limit - 1, 'WITHSCORES')
  if #ids == 0 then break end
  for i = 1, #ids, 2 do
    if #out >= 3 * limit then break end
    local id = ids[i]
    local h = load(id)
    if h then
      out[#out + 1] = id
      out[#out + 1] = ids[i + 1]
      out[#out + 1] = value(h)
    end
  end
  offset = offset + limit
end
return out
`)

// listBriefScript (read-only): ARGV[4] state, [5] limit. Replies {id,
// score, fields, …} with the fields listed in fields below (field, value, …), latest to
// enter the state first. It reads a call's header and Brief alone (head:
// GETRANGE), so neither its request, its info nor its result is copied
// however large: a list's cost does not grow with what the calls carry. Index
// entries whose call is gone, or not in the state, and calls past their
// deadline are skipped (not moved: the script only reads).
var listBriefScript = newScript(`
local st, limit = ARGV[4], tonumber(ARGV[5])
local fields = {'st', 'ea', 'sb', 'pr', 'up', 'tl', 'ca', 'qm', 'ap', 'by', 'bf'}
local out, offset = {}, 0
while #out < 3 * limit do
  local ids = call('ZREVRANGE', statekey(st), offset, offset + limit - 1, 'WITHSCORES')
  if #ids == 0 then break end
  for j = 1, #ids, 2 do
    if #out >= 3 * limit then break end
    local id = ids[j]
    local h = head(id, true)
    if h and h.st == st and h.ea and not overdue({st = h.st, ea = h.ea, lu = h.lu or '0'}) then
      local f = {}
      for _, k in ipairs(fields) do
        if h[k] then
          f[#f + 1] = k
          f[#f + 1] = h[k]
        end
      end
      out[#out + 1] = id
      out[#out + 1] = ids[j + 1]
      out[#out + 1] = f
    end
  end
  offset = offset + limit
end
return out
`)
