-- redislimit: the per-key concurrency limit (Concurrency), its permits
-- held as leases in a sorted set.
--
-- KEYS[1]  the key's set: one member per held permit, "n:id" (n units, a
--          random id), scored by the instant (µs) its lease ends.
-- ARGV[1]  "" to work at the server's TIME, else an instant in µs (tests;
--          see internal/luasrc/start.lua).
-- ARGV[2]  "acquire", "release" or "renew"
-- ARGV[3]  the member "n:id"; ARGV[4] n; ARGV[5] the limit; ARGV[6] the
--          lease, µs.
--
-- A lease that has ended no longer counts: its holder crashed or lost
-- touch, and the units are free again. Reply: "acquire" {1, in flight
-- after} or {0, in flight}; "release" and "renew" {1} when the permit was
-- held, else {0}.

local key, op, member = KEYS[1], ARGV[2], ARGV[3]
local n, limit, lease = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

-- Ended leases go first, so that neither "release" nor "renew" finds a
-- permit whose lease has ended (its units may be another holder's now).
redis.call("ZREMRANGEBYSCORE", key, "-inf", string.format("%.0f", now))

if op == "release" then
  return { redis.call("ZREM", key, member) }
end

-- keep makes the set live as long as its longest lease.
local function keep()
  local last = redis.call("ZRANGE", key, -1, -1, "WITHSCORES")
  if last[2] then
    local us = tonumber(last[2]) - now
    redis.call("PEXPIRE", key, ttlMs(us))
  end
end

if op == "renew" then
  if not redis.call("ZSCORE", key, member) then return { 0 } end
  redis.call("ZADD", key, "XX", string.format("%.0f", now + lease), member)
  keep()
  return { 1 }
end

-- op == "acquire"
local held = 0
for _, m in ipairs(redis.call("ZRANGE", key, 0, -1)) do
  held = held + tonumber(string.match(m, "^(%d+):"))
end
if held + n > limit then return { 0, held } end
redis.call("ZADD", key, string.format("%.0f", now + lease), member)
keep()
return { 1, held + n }
