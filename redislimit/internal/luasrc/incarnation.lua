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

-- incarnation returns the incarnation stored under ik (0 when absent) and
-- keeps it for at least ms more: as long as the state an admission is
-- being recorded in may owe it anything.
local function incarnation(ik, ms)
  local inc = tonumber(redis.call("GET", ik)) or 0
  if inc ~= 0 and redis.call("PTTL", ik) < ms then
    redis.call("PEXPIRE", ik, ms)
  end
  return inc
end

-- renew gives the state under key a new incarnation under ik, if anyone
-- may hold a record of the old one (the state or the incarnation exists):
-- every record of the old one is then owed nothing.
local function renew(key, ik)
  local p, q = redis.call("PTTL", key), redis.call("PTTL", ik)
  if p ~= -2 or q ~= -2 then
    local old = tonumber(redis.call("GET", ik)) or 0
    local t = redis.call("TIME")
    local inc = math.max(old + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
    local ttl = math.max(p, q, 1)
    if p == -1 or q == -1 then ttl = 86400000 end -- no TTL: keep a day
    redis.call("SET", ik, string.format("%.0f", inc), "PX", ttl)
  end
end

-- remove deletes the state under key and renews its incarnation.
local function remove(key, ik)
  renew(key, ik)
  redis.call("DEL", key)
end
