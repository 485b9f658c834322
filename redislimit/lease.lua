-- lease: take units from, or give units back to, a key's shared token
-- bucket or fixed window, atomically. The state is the one redislimit's
-- decision script keeps: kind 1 the theoretical arrival time (µs, decimal),
-- kind 2 the window index k and the units counted in window k, packed or
-- as the string "k 0 q" (redislimit/internal/luasrc/start.lua's
-- windowState and windowValue).
--
-- KEYS[1]  the key's state.
-- KEYS[2]  the key's incarnation (redislimit/internal/luasrc/incarnation.lua,
--          which this script starts with, after start.lua).
-- ARGV[1]  "" to work at the server's TIME, else an instant in µs (tests;
--          read by the common start, redislimit/internal/luasrc/start.lua).
-- ARGV[2]  "take" or "give"
-- ARGV[3]  kind: 1 token bucket, 2 fixed window
-- ARGV[4]  T (emission interval) or W (window), µs
-- ARGV[5]  tau = Burst·T (kind 1), else 0
-- ARGV[6]  the limit: Burst or Limit
-- take: ARGV[7] min, ARGV[8] want (1 <= min <= want <= limit)
--   Debits g = min(want, available) units if g >= min.
--   Reply {g, stamp, left, inc}: stamp is the TAT written (kind 1) or the
--   window index (kind 2); left is the µs until the state is fresh again:
--   the bucket full (kind 1), the window's end (kind 2); inc the state's
--   incarnation. Denied: {0, retry}, retry the µs until min would fit.
-- give: ARGV[7] units r, ARGV[8] stamp, ARGV[9] inc (what the giver's last
--   take replied). Nothing unless the state is still incarnation inc (not
--   deleted by a Reset since, nor left fresh by a give-back: a state
--   created again can look the same as the one taken from). Kind 1: only
--   if the stored TAT is still stamp (nothing was debited since), the TAT
--   moves back by r·T: an exact undo of r units of that take. Kind 2: only
--   if the stored window and the current one are both stamp, q drops by r.
--   Reply {1} when given back, else {0}.

local key, incKey, op, kind = KEYS[1], KEYS[2], ARGV[2], ARGV[3]
local A, tau, limit = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local x, y = tonumber(ARGV[7]), tonumber(ARGV[8])
if op == "give" and current(redis.call("GET", incKey)) ~= tonumber(ARGV[9]) then
  return { 0 }
end

if kind == "1" then
  local tat = tonumber(redis.call("GET", key)) or 0
  if op == "give" then
    if tat ~= y then return { 0 } end
    local nt = y - x * A
    if nt > now then
      redis.call("SET", key, string.format("%.0f", nt), "PX", ttlMs(nt - now))
    else
      remove(key, incKey)
    end
    return { 1 }
  end
  local base = math.max(tat, now) -- a stale reading: no time has passed
  local debt = base - now
  local avail = 0
  if debt < tau then avail = (divmod(tau - debt, A)) end
  local g = math.min(y, avail)
  if g < x then return { 0, base + x * A - tau - now } end
  local nx = base + g * A
  local ms = ttlMs(nx - now)
  redis.call("SET", key, string.format("%.0f", nx), "PX", ms)
  return { g, nx, nx - now, incarnation(incKey, ms) }
end

-- kind 2: the fixed window.
local k, e = divmod(now, A)
local sk, _, q = windowState(redis.call("GET", key))
if not sk then sk, q = 0, 0 end
-- rest: the µs until the state's window ends, which its TTL covers.
local rest, carried = A - e, false
if sk > k then
  if ownWindow(key, sk, A) then
    -- A stale reading: no time has passed, the state's window from its
    -- start; it still ends (sk+1)·A on the server's clock, later than a
    -- window from now.
    k, e, rest = sk, 0, (sk + 1) * A - now
  else
    carried = true -- counted in a shorter Window: q carries into window k
  end
end
if op == "give" then
  if carried or sk ~= y or k ~= y then return { 0 } end
  q = math.max(q - x, 0)
  redis.call("SET", key, windowValue(k, q, limit), "PX", ttlMs(rest))
  return { 1 }
end
if sk ~= k and not carried then q = 0 end
local g = math.min(y, limit - q)
if g < x then return { 0, A - e } end
local ms = ttlMs(rest)
redis.call("SET", key, windowValue(k, q + g, limit), "PX", ms)
return { g, k, A - e, incarnation(incKey, ms) }
