-- redislimit: the operations other than a decision, on one key.
--
-- KEYS[1]  the state key (see script.lua for its layouts).
-- ARGV[1]  "" to work at the server's TIME, else an instant in µs (tests;
--          see internal/luasrc/start.lua).
-- ARGV[2]  the operation:
--            "reserve"  Wait on a bucket: take the slot of cost units and
--                       reply how long until it starts
--            "refund"   give back cost units an admission consumed
--            "reset"    delete the state: the key is fresh
-- ARGV[3..6] kind, a, tau, limit, as for script.lua; ARGV[7] leaky ("1" or
--          "0"); ARGV[8] cost; ARGV[9] for "reserve": the longest wait
--          the caller accepts, µs.
--
-- Reply: "reserve" {1, wait} when the slot was taken, {0, wait} when the
-- wait would be longer than accepted (nothing is written; wait -1: never);
-- "refund" and "reset" {1}. Durations in µs.

local key, op = KEYS[1], ARGV[2]
if op == "reset" then
  redis.call("DEL", key)
  return { 1 }
end

local kind, a, tau, limit = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local leaky, c = ARGV[7] == "1", tonumber(ARGV[8])

if op == "reserve" then
  -- Only the buckets (kind 1) reserve: a window cannot hold a future slot.
  local maxWait = tonumber(ARGV[9])
  local base = math.max(tonumber(redis.call("GET", key)) or 0, now)
  local nx = base + c * a
  if nx - now > 1125899906842624 + tau then -- 2^50 µs past the burst
    return { 0, -1 }
  end
  local wait
  if leaky then
    wait = base - now -- its turn starts when everything ahead has left
  else
    wait = math.max(0, nx - tau - now)
  end
  if wait > maxWait then return { 0, wait } end
  redis.call("SET", key, string.format("%.0f", nx), "PX", ttlMs(nx - now))
  return { 1, wait }
end

-- op == "refund"
local v = redis.call("GET", key)
if not v then return { 1 } end
if kind == 1 then
  -- Move the TAT back by c·T, never below now (no fuller than full).
  local tat = tonumber(v) or 0
  local nt = math.max(now, tat - c * a)
  if nt >= tat then return { 1 } end
  if nt <= now then
    redis.call("DEL", key)
  else
    redis.call("SET", key, string.format("%.0f", nt), "PX", ttlMs(nt - now))
  end
  return { 1 }
end
if kind == 4 then
  -- Drop the c newest admitted units that still count.
  local last, ts, cs, j = 0, {}, {}, 0
  for num in string.gmatch(v, "%d+") do
    if j == 0 then
      last = tonumber(num)
    elseif j % 2 == 1 then
      ts[#ts + 1] = tonumber(num)
    else
      cs[#cs + 1] = tonumber(num)
    end
    j = j + 1
  end
  local t = math.max(now, last)
  local first = 1
  while first <= #ts and ts[first] + a <= t do first = first + 1 end
  local parts, n = {}, #ts
  while c > 0 and n >= first do
    local take = math.min(c, cs[n])
    cs[n] = cs[n] - take
    c = c - take
    if cs[n] == 0 then n = n - 1 end
  end
  if n < first then
    redis.call("DEL", key)
    return { 1 }
  end
  parts[1] = string.format("%.0f", t)
  for i = first, n do
    parts[#parts + 1] = string.format("%.0f %.0f", ts[i], cs[i])
  end
  redis.call("SET", key, table.concat(parts, " "), "KEEPTTL")
  return { 1 }
end
-- Windows: lower the count of the current window, or for the sliding
-- window the previous one when the stored window is one ahead of now.
local k, p, q = string.match(v, "^(%d+) (%d+) (%d+)$")
if not k then return { 1 } end
k, p, q = tonumber(k), tonumber(p), tonumber(q)
local ka = math.floor(now / a)
while ka * a > now do ka = ka - 1 end
while (ka + 1) * a <= now do ka = ka + 1 end
if k < ka then return { 1 } end
local d = k - ka
if d == 0 then
  q = math.max(0, q - c)
elseif d == 1 and kind == 3 then
  p = math.max(0, p - c)
else
  return { 1 }
end
redis.call("SET", key, string.format("%.0f %.0f %.0f", k, p, q), "KEEPTTL")
return { 1 }
