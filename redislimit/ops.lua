-- redislimit: the operations other than a decision, on one key.
--
-- KEYS[1]  the state key (see script.lua for its layouts).
-- KEYS[2]  the key's incarnation key (Limiter.incKey, in KEYS[1]'s slot).
-- ARGV[1]  "" to work at the server's TIME, else an instant in µs (tests;
--          see internal/luasrc/start.lua).
-- ARGV[2]  the operation:
--            "reserve"  Wait on a bucket: take the slot of cost units and
--                       reply how long until it starts
--            "refund"   give back what the state still owes to one
--                       admission (Admission.Refund)
--            "reset"    delete the state: the key is fresh
-- ARGV[3..6] kind, a, tau, limit, as for script.lua; ARGV[7] leaky ("1" or
--          "0"); ARGV[8] cost; ARGV[9] for "reserve": the longest wait
--          the caller accepts, µs; for "refund": the admission's
--          incarnation; ARGV[10] for "refund": its mark (script.lua).
--
-- Reply: "reserve" {1, wait, incarnation, TAT left} when the slot was
-- taken, {0, wait} when the wait would be longer than accepted (nothing is
-- written; wait -1: never); "refund" {1} when it gave something back, else
-- {0}; "reset" {1}. Durations in µs.
--
-- Incarnations: see internal/luasrc/incarnation.lua, which this script
-- starts with (after internal/luasrc/start.lua).

local key, op, incKey = KEYS[1], ARGV[2], KEYS[2]

if op == "reset" then
  remove(key, incKey)
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
  local ms = ttlMs(nx - now)
  redis.call("SET", key, string.format("%.0f", nx), "PX", ms)
  return { 1, wait, incarnation(incKey, ms), nx }
end

-- op == "refund": nothing unless the state is the admission's incarnation.
local mark = tonumber(ARGV[10])
if (tonumber(redis.call("GET", incKey)) or 0) ~= tonumber(ARGV[9]) then return { 0 } end
local v = redis.call("GET", key)
if not v then return { 0 } end
if kind == 1 then
  -- The part of c·T that has not drained: the TAT moves back by
  -- min(c·T, E − now), E the TAT the admission left, never below now.
  -- That bound holds while no unit below E was given back since the
  -- admission: then TAT = E + (later costs)·T. A give-back below the top
  -- (E < TAT) moves every later admission's units down by g, so their
  -- records' E would over-state what they are owed (A, B, B's give-back
  -- after A's and a refill: more than Burst at one instant): it renews
  -- the incarnation, and those records are owed nothing.
  local tat = tonumber(v) or 0
  local g = math.min(c * a, mark - now)
  if g <= 0 then return { 0 } end
  local nt = math.max(now, tat - g)
  if nt >= tat then return { 0 } end
  if nt <= now then
    remove(key, incKey)
  else
    redis.call("SET", key, string.format("%.0f", nt), "PX", ttlMs(nt - now))
    if mark < tat then renew(key, incKey) end
  end
  return { 1 }
end
if kind == 4 then
  -- Drop up to c of the newest admitted units logged no later than the
  -- admission's instant that still count.
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
  local gave = false
  for i = #ts, first, -1 do
    if c == 0 then break end
    if ts[i] <= mark and cs[i] > 0 then
      local take = math.min(c, cs[i])
      cs[i], c, gave = cs[i] - take, c - take, true
    end
  end
  if not gave then return { 0 } end
  local parts = { string.format("%.0f", t) }
  for i = first, #ts do
    if cs[i] > 0 then parts[#parts + 1] = string.format("%.0f %.0f", ts[i], cs[i]) end
  end
  if #parts == 1 then
    remove(key, incKey)
  else
    redis.call("SET", key, table.concat(parts, " "), "KEEPTTL")
  end
  return { 1 }
end
-- Windows: c off the count of the admission's window k while the state is
-- in it; for the sliding window, c off the previous count in the window
-- after it; nothing later.
local k, p, q = string.match(v, "^(%d+) (%d+) (%d+)$")
if not k then return { 0 } end
k, p, q = tonumber(k), tonumber(p), tonumber(q)
if k == mark and q > 0 then
  q = math.max(0, q - c)
elseif k == mark + 1 and kind == 3 and p > 0 then
  p = math.max(0, p - c)
else
  return { 0 }
end
if p == 0 and q == 0 then
  remove(key, incKey) -- fresh: removed, as a give-back that leaves a bucket full
else
  redis.call("SET", key, string.format("%.0f %.0f %.0f", k, p, q), "KEEPTTL")
end
return { 1 }
