-- Incarnations of a key's state, for the scripts that record admissions
-- and give them back (redislimit's ops.lua, redislimit/lease's lease.lua;
-- script.lua keeps an incarnation as incarnation below does, inline).
--
-- A give-back must not give units to a state that does not owe them: a
-- state deleted (Reset, or a give-back that left it fresh) and created
-- again owes nothing to the admissions of the deleted one. Each removal
-- therefore gives the key a new incarnation: a number, greater than the
-- one before, stored under the key's incarnation key (absent: 0) for as
-- long as the removed state could still have owed an admission anything
-- (its TTL: the time until it would have been fresh, after which the
-- give-back rules owe nothing), and for as long as an admission recorded
-- with the new incarnation may be owed (incarnation below). A number is
-- the larger of the previous one + 1 and the server's clock in µs, so it
-- never repeats while that clock does not go back. A state that expires
-- was fresh: its admissions are owed nothing, and no removal is needed.

-- The incarnation key holds the incarnation, a decimal number; once a
-- give-back below later admissions renewed the state (redislimit's
-- ops.lua), the number is followed by the renewals since the state's last
-- removal, which ops.lua reads and writes: every reader takes the number
-- the value starts with (current), and a removal writes the number alone.

-- current returns the incarnation an incarnation key's value v (a GET's
-- reply) holds: 0 when the key is absent.
local function current(v)
  if not v then return 0 end
  return tonumber(string.match(v, "^%d+")) or 0
end

-- nextInc returns the incarnation after inc: greater than it, and than
-- every incarnation the server's clock has given before.
local function nextInc(inc)
  local t = redis.call("TIME")
  return math.max(inc + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
end

-- incarnation returns the incarnation stored under ik (0 when absent) and
-- keeps it for at least ms more: as long as the state an admission is
-- being recorded in may owe it anything.
local function incarnation(ik, ms)
  local inc = current(redis.call("GET", ik))
  if inc ~= 0 and redis.call("PTTL", ik) < ms then
    redis.call("PEXPIRE", ik, ms)
  end
  return inc
end

-- keptFor returns how long (ms) a new value of ik must be kept: as long
-- as the state under key and ik's value would have been (a day if either
-- has no TTL), so that it outlives every record either may still owe, and
-- whether either exists.
local function keptFor(key, ik)
  local p, q = redis.call("PTTL", key), redis.call("PTTL", ik)
  if p == -1 or q == -1 then return 86400000, true end -- no TTL: keep a day
  return math.max(p, q, 1), p ~= -2 or q ~= -2
end

-- renew gives the state under key a new incarnation under ik, if anyone
-- may hold a record of the old one (the state or the incarnation exists):
-- every record of the old one is then owed nothing, and the renewals ik
-- held are gone.
local function renew(key, ik)
  local ttl, held = keptFor(key, ik)
  if held then
    local inc = nextInc(current(redis.call("GET", ik)))
    redis.call("SET", ik, string.format("%.0f", inc), "PX", ttl)
  end
end

-- remove deletes the state under key and renews its incarnation.
local function remove(key, ik)
  renew(key, ik)
  redis.call("DEL", key)
end
