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
--
-- Renewals (the buckets; the rule of hotlimit's shard.go, "Renewals",
-- which internal/refmodel models, kept here in Redis). Picture a bucket's
-- debt as its admissions' units stacked in TAT order, each admission
-- holding the time its admission added, [E − c·T, E). A give-back removes
-- what its admission still holds after now, and every unit above it moves
-- down by as much: another admission's, whose record (E) then no longer
-- says where its units are. So a give-back that leaves units above its
-- admission's (TAT > E) renews the state: a new incarnation, stored under
-- the incarnation key followed by the renewal, the incarnation it retired
-- and the time it removed, [at, at + span), the top of the admission's.
-- A record of an earlier incarnation is not void: its give-back replays
-- the renewals since its incarnation, the first being the one that
-- retired it; each that removed time below where the record now starts
-- (at < from) moved it back by span, one above did not touch it. The key
-- keeps the latest maxRenewals; the at of each one dropped goes into a
-- floor (the least, for the records from incarnation base on), and a
-- record older than those kept is taken as starting at min(from, floor,
-- the at of every renewal kept): still no later than its units, so it is
-- owed no more than they hold, and exact at one frozen instant. A floor a
-- bucket's length or more behind now starts afresh from the next renewal
-- dropped. So, as in process: give-backs in any order are exact while a
-- record has seen at most maxRenewals renewals, and never give back more
-- than the exact stack of each admission's time would. The incarnation
-- key's value is then
--   "inc fl base floor inc_1 at_1 span_1 ... inc_m at_m span_m"
-- (fl 1 once floored; m <= maxRenewals: at most about 0.7 KB of value,
-- 872 bytes of Redis memory on 7.0, TestRenewalsBounded), kept as
-- long as the state before the renewal and the incarnation key were: no
-- record of a renewed incarnation holds time past the TAT it saw, so none
-- is owed anything once both would have expired. A removal (Reset, a
-- give-back that leaves the state fresh) writes a new incarnation alone:
-- the records before it are owed nothing, and so are the renewals.

local maxRenewals = 16

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

-- op == "refund".
local mark, inc = tonumber(ARGV[10]), tonumber(ARGV[9])
if kind == 1 then
  -- Buckets: the admission held the time [from, to) = [E − c·T, E), E the
  -- TAT it left, and is owed what of it has not drained: the TAT moves
  -- back by min(c·T, E − now), never below now. A give-back below later
  -- admissions (the TAT is past its E) moves their units down by as much,
  -- which their records do not know: it renews the state, recording the
  -- incarnation it retires and the time it removed, and a record of an
  -- earlier incarnation is moved back as the renewals since moved its
  -- units (or from their floor): see Renewals below.
  local iv = redis.call("GET", incKey)
  local cur = current(iv)
  local from, to = mark - c * a, mark
  -- The renewals since the last removal, oldest first, as iv holds them
  -- after the incarnation: "fl base floor" (fl 1 when floored), then
  -- "inc at span" for each.
  local fl, base, floor, ev = 0, 0, 0, {}
  if iv then
    local j = -1
    for num in string.gmatch(iv, "%d+") do
      num = tonumber(num)
      if j == 0 then fl = num elseif j == 1 then base = num elseif j == 2 then floor = num
      elseif j > 2 then ev[#ev + 1] = num end
      j = j + 1
    end
  end
  if inc ~= cur then
    local found = false
    for e = 1, #ev, 3 do
      if ev[e] == inc then
        -- Replay: each renewal since, the first being the one that
        -- retired inc, moved the record back if it removed time below it.
        for f = e, #ev, 3 do
          if ev[f + 1] < from then from, to = from - ev[f + 2], to - ev[f + 2] end
        end
        found = true
        break
      end
    end
    if not found then
      -- Older than the renewals kept: from their floor, if it covers inc.
      if fl == 0 or inc < base or (#ev > 0 and inc >= ev[1]) then return { 0 } end
      local low = floor
      for e = 2, #ev, 3 do low = math.min(low, ev[e]) end
      if from > low then from, to = low, to - (from - low) end
    end
  end
  local v = redis.call("GET", key)
  if not v then return { 0 } end
  local tat = tonumber(v) or 0
  local owed = to - math.max(from, now)
  if owed <= 0 then return { 0 } end
  local nt = math.max(tat - owed, now)
  if nt >= tat then return { 0 } end
  if nt <= now then
    remove(key, incKey)
    return { 1 }
  end
  if tat > to then
    -- Below later admissions: renew, recording the time removed, the top
    -- x of the admission's (moved) time.
    local x = tat - nt
    if #ev == 3 * maxRenewals then
      -- Drop the oldest into the floor: a floor a bucket's length or more
      -- behind now, from which nothing can be given back, starts afresh.
      if fl == 0 or now - floor >= tau then
        fl, base, floor = 1, ev[1], ev[2]
      else
        floor = math.min(floor, ev[2])
      end
      table.remove(ev, 1); table.remove(ev, 1); table.remove(ev, 1)
    end
    ev[#ev + 1], ev[#ev + 2], ev[#ev + 3] = cur, to - x, x
    local parts = { string.format("%.0f %d %.0f %.0f", nextInc(cur), fl, base, floor) }
    for e = 1, #ev do parts[#parts + 1] = string.format("%.0f", ev[e]) end
    -- Kept as long as the state before this give-back (no record of it
    -- holds time past its TAT) and the incarnation before.
    redis.call("SET", incKey, table.concat(parts, " "), "PX", (keptFor(key, incKey)))
  end
  redis.call("SET", key, string.format("%.0f", nt), "PX", ttlMs(nt - now))
  return { 1 }
end
if current(redis.call("GET", incKey)) ~= inc then return { 0 } end
local v = redis.call("GET", key)
if not v then return { 0 } end
if kind == 4 then
  if string.byte(v, 1) == 45 then return { 0 } end -- "-": a packed window state, no log
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
local k, p, q = windowState(v)
if not k then return { 0 } end
if k == mark and q > 0 then
  q = math.max(0, q - c)
elseif k == mark + 1 and kind == 3 and p > 0 then
  p = math.max(0, p - c)
else
  return { 0 }
end
if p == 0 and q == 0 then
  remove(key, incKey) -- fresh: removed, as a give-back that leaves a bucket full
elseif kind == 2 then
  redis.call("SET", key, windowValue(k, q, limit), "KEEPTTL")
else
  redis.call("SET", key, string.format("%.0f %.0f %.0f", k, p, q), "KEEPTTL")
end
return { 1 }
