-- redislimit: one decision for one or more layers, all or nothing.
--
-- KEYS[i]  the state key of layer i.
-- ARGV[1]  "" to decide at the server's TIME; otherwise an instant in
--          microseconds (tests only; see internal/luasrc/start.lua).
-- ARGV[2+5(i-1) .. 6+5(i-1)], for layer i:
--          kind  1 token or leaky bucket (GCRA), 2 fixed window,
--                3 sliding window, 4 sliding log
--          a     T (emission interval) or W (window), µs
--          tau   Burst·T (or (Capacity+1)·T) for kind 1, else 0
--          limit Burst, Capacity+1 or Limit
--          cost
-- ARGV[2+5n] optional: "1" to report each layer's next unit (see Reply).
-- ARGV[3+5n] optional, one layer only (Limiter.AdmitN): the Redis key of
--          the key's incarnation (see ops.lua). The reply of an admission
--          then ends with the incarnation and the admission's mark: for
--          kind 1 the TAT it left, for kinds 2 and 3 the index of the
--          window it counted in, for kind 4 the instant it was logged at.
--
-- All arithmetic is on integers held in Lua numbers (doubles), exact below
-- 2^53: New bounds T, W, Burst·T and Limit by 2^50, and products that can
-- pass 2^53 go through muldiv, which never forms them.
--
-- State: kind 1 stores the theoretical arrival time (µs) as a decimal
-- string; kinds 2 and 3 store "k p q": the window index k = floor(t/W),
-- the previous window's count p (always 0 for kind 2) and the current
-- window's count q, except that kind 2 stores k and q packed in one
-- integer when it can (internal/luasrc/start.lua's windowState and
-- windowValue, which read both; windows.lua decides on it); kind 4 stores "last t1 c1 t2 c2 ...": the latest
-- instant it was written at, then each admitted instant that may still
-- count, oldest first, with how many units were admitted at it. A missing
-- key is a fresh state. Every write sets a TTL
-- of the time until the state is fresh again, in ms, rounded up.
--
-- Reply, admitted:  {1, rem_1, reset_1, ..., rem_n, reset_n}
-- Reply, denied:    {0, i, ok_1, rem_1, retry_1, reset_1, ..., ok_n, ...}
--   where i is the layer that denied (decided after the layers before it
--   consumed, as hotlimit.AllowLayers does), and every other layer j is
--   checked without consuming against its state as it was. retry -1 means
--   never (the cost is negative or above the limit). Durations in µs.
--   With ARGV[2+5n] = "1", each layer's values end with next_i: the wait
--   for a cost of rem_i+1 on the state rem_i describes (its next unit
--   back), or 0 when rem_i is the layer's limit (it is full).

-- This file is one decision for KEYS and ARGV at now, after the common
-- start (internal/luasrc/start.lua), which reads ARGV[1]. batch.lua wraps
-- it in a function of KEYS and ARGV, called once per decision of a batch
-- (see batch.go).
local wantNext = ARGV[2 + 5 * #KEYS] == "1"
local incKey = ARGV[3 + 5 * #KEYS] -- nil unless an admission is recorded

-- The common call: fixed windows (windows.lua), one DECRBY per layer.
if ARGV[2] == "2" and not incKey and not skipWindows then
  local r = fixedWindows(KEYS, 0, ARGV, 1, #KEYS, 5, wantNext)
  if r then return r end
end

-- Fast path: a single token-bucket layer, the common call. It is step
-- and the write below for that case, written out without closures or
-- tables: creating them (and collecting them) is most of the cost of a
-- script this small. Every other call takes the general path after it.
if #KEYS == 1 and ARGV[2] == "1" and not incKey then
  local key, T, tau, c = KEYS[1], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
  local base = tonumber(redis.call("GET", key)) or 0
  if base < now then base = now end -- a stale reading: no time has passed
  local debt = base - now
  local d, nx, retry = debt, nil, 0 -- d: the debt Remaining and ResetAfter report
  if c < 0 or c > tonumber(ARGV[5]) then
    retry = -1
  elseif c > 0 then
    nx = base + c * T
    if nx - now <= tau then d = nx - now else retry, nx = nx - tau - now, nil end
  end
  local rem = 0
  if d < tau then -- rem = floor((tau-d)/T), exactly (divmod, inlined)
    local m = tau - d
    rem = math.floor(m / T)
    local r = m - rem * T
    while r < 0 do rem = rem - 1; r = r + T end
    while r >= T do rem = rem + 1; r = r - T end
  end
  -- nxt: the wait for rem+1 units at debt d, or 0 when full.
  local nxt = 0
  if wantNext and rem < tonumber(ARGV[5]) then nxt = d + (rem + 1) * T - tau end
  if retry ~= 0 then
    if wantNext then return { 0, 1, 0, rem, retry, debt, nxt } end
    return { 0, 1, 0, rem, retry, debt }
  end
  if nx then
    -- TTL: d µs rounded up to a millisecond, exactly.
    local ms = math.floor(d / 1000)
    local r = d - ms * 1000
    while r < 0 do ms = ms - 1; r = r + 1000 end
    while r >= 1000 do ms = ms + 1; r = r - 1000 end
    if r > 0 then ms = ms + 1 end
    redis.call("SET", key, string.format("%.0f", nx), "PX", ms + ttlExtra)
  end
  if wantNext then return { 1, rem, d, nxt } end
  return { 1, rem, d }
end

-- uniform reports whether every layer is of kind k (ARGV's kind string)
-- and no two layers have one key: the layered fast paths below.
local function uniform(k)
  for i = 2, #KEYS do
    if ARGV[2 + 5 * (i - 1)] ~= k then return false end
    for j = 1, i - 1 do
      if KEYS[j] == KEYS[i] then return false end
    end
  end
  return true
end

-- Fast path for layers that are all token or leaky buckets on distinct
-- keys (the common layered call: per user, per IP, global): the general
-- path's decisions written out over flat arrays, with one helper instead
-- of the general path's closures and state tables.
if ARGV[2] == "1" and not incKey then
  local n, fast = #KEYS, uniform("1")
  if fast then
    -- remOf returns floor((tau-d)/T) for d < tau, else 0, exactly.
    local function remOf(d, T, tau)
      if d >= tau then return 0 end
      local m = tau - d
      local q = math.floor(m / T)
      local r = m - q * T
      while r < 0 do q = q - 1; r = r + T end
      while r >= T do q = q + 1; r = r - T end
      return q
    end
    local T, TAU, C, DEBT, REP, LIM = {}, {}, {}, {}, {}, {}
    local deny = 0
    local vals = redis.call("MGET", unpack(KEYS))
    for i = 1, n do
      local o = 2 + 5 * (i - 1)
      local Ti, tau, lim, c = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4])
      local base = tonumber(vals[i]) or 0
      if base < now then base = now end -- a stale reading: no time has passed
      local debt = base - now
      local ok, d, retry = 1, debt, 0
      if c < 0 or c > lim then
        ok, retry = 0, -1
      elseif c > 0 then
        local x = debt + c * Ti
        if x <= tau then d = x else ok, retry = 0, x - tau end
      end
      T[i], TAU[i], C[i], DEBT[i], LIM[i] = Ti, tau, c, debt, lim
      local k = 4 * i
      REP[k - 3], REP[k - 2], REP[k - 1], REP[k] = ok, remOf(d, Ti, tau), retry, d
      if ok == 0 and deny == 0 then deny = i end
    end
    -- nextOf: layer i's wait for rem+1 units at debt e, or 0 when full.
    local nextOf
    if wantNext then
      nextOf = function(i, rem, e)
        if rem >= LIM[i] then return 0 end
        return e + (rem + 1) * T[i] - TAU[i]
      end
    end
    if deny > 0 then
      -- Every layer reported on its state as it was: an admitting one
      -- with its current Remaining and ResetAfter.
      local out = { 0, deny }
      for i = 1, n do
        local k = 4 * i
        if REP[k - 3] == 1 then
          REP[k - 2], REP[k] = remOf(DEBT[i], T[i], TAU[i]), DEBT[i]
        end
        out[#out + 1] = REP[k - 3]
        out[#out + 1] = REP[k - 2]
        out[#out + 1] = REP[k - 1]
        out[#out + 1] = REP[k]
        if wantNext then out[#out + 1] = nextOf(i, REP[k - 2], REP[k]) end
      end
      return out
    end
    local out = { 1 }
    for i = 1, n do
      local k, d = 4 * i, REP[4 * i]
      if C[i] > 0 then
        local ms = math.floor(d / 1000)
        local r = d - ms * 1000
        while r < 0 do ms = ms - 1; r = r + 1000 end
        while r >= 1000 do ms = ms + 1; r = r - 1000 end
        if r > 0 then ms = ms + 1 end
        redis.call("SET", KEYS[i], string.format("%.0f", now + d), "PX", ms + ttlExtra)
      end
      out[#out + 1] = REP[k - 2]
      out[#out + 1] = d
      if wantNext then out[#out + 1] = nextOf(i, REP[k - 2], d) end
    end
    return out
  end
end

-- Fast path for layers that are all fixed windows on distinct keys that
-- fixedWindows (windows.lua) leaves (a Limit or window index out of its
-- range, or a key of the string layout): the
-- general path's view, windowStep, windowReset, windowRetry and nextOf
-- for kind 2 (no previous window's weight) written out over flat arrays,
-- without creating its closures and state tables per decision (decide
-- is called once per decision of a batch). Measured on a loaded machine
-- (64 callers, 18 alternating rounds), the server's CPU per decision fell
-- by a median 9% (1 layer) and 14% (3 layers), within that load's noise
-- (p = 0.23): most of a decision's cost in Redis is elsewhere (its
-- redis.call round trips into the server, the arguments' strings). Each
-- key is read with GET, as load does (a key of another type fails the
-- decision before anything is written).
if ARGV[2] == "2" and not incKey then
  local n, fast = #KEYS, uniform("2")
  if fast then
    -- Per layer: its window W, limit, cost, the view (k, e, p, q), its
    -- verdict (ok, rem, retry, reset) and, for an admitting layer, the
    -- Remaining and ResetAfter of its state as it was (cur, curReset).
    local W, LIM, C, K, E, P, Q = {}, {}, {}, {}, {}, {}, {}
    local OK, REM, RETRY, RESET, CUR, CURRESET = {}, {}, {}, {}, {}, {}
    local deny = 0
    for i = 1, n do
      local o = 2 + 5 * (i - 1)
      local w, lim, c = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4])
      local k, e = divmod(now, w)
      local p, q = 0, 0
      local sk, sp, sq = windowState(redis.call("GET", KEYS[i]))
      if sk then -- a state records its window whatever its counts, as hotlimit's word
        if sk > k then
          if ownWindow(KEYS[i], sk, w) then
            k, e = sk, 0 -- a stale reading
          end -- else counted in a shorter Window: carried into window k
          p, q = sp, sq
        elseif sk == k then
          p, q = sp, sq
        end
      end
      local cur, curReset = math.max(0, lim - q), 0
      if q > 0 or p > 0 then curReset = w - e end
      local ok, rem, retry, reset = 1, cur, 0, curReset
      if c < 0 or c > lim then
        ok, retry = 0, -1
      elseif c > 0 then
        if q + c <= lim then
          rem, reset = lim - q - c, w - e
        else
          ok, retry = 0, w - e
        end
      end
      W[i], LIM[i], C[i], K[i], E[i], P[i], Q[i] = w, lim, c, k, e, p, q
      OK[i], REM[i], RETRY[i], RESET[i], CUR[i], CURRESET[i] = ok, rem, retry, reset, cur, curReset
      if ok == 0 and deny == 0 then deny = i end
    end
    -- nextOf: the wait for rem+1 units, or 0 when rem is the limit: a
    -- cost of rem+1 is over what the window has left, so it waits for
    -- the window's end.
    local function nextOf(i, rem)
      if rem >= LIM[i] then return 0 end
      return W[i] - E[i]
    end
    if deny > 0 then
      local out = { 0, deny }
      for i = 1, n do
        local rem, reset = REM[i], RESET[i]
        if OK[i] == 1 then rem, reset = CUR[i], CURRESET[i] end
        out[#out + 1] = OK[i]
        out[#out + 1] = rem
        out[#out + 1] = RETRY[i]
        out[#out + 1] = reset
        if wantNext then out[#out + 1] = nextOf(i, rem) end
      end
      return out
    end
    local out = { 1 }
    for i = 1, n do
      if C[i] > 0 then
        local k, w = K[i], W[i]
        redis.call("SET", KEYS[i], windowValue(k, Q[i] + C[i], LIM[i]), "PX", ttlMs(k * w + E[i] + RESET[i] - now))
      end
      out[#out + 1] = REM[i]
      out[#out + 1] = RESET[i]
      if wantNext then out[#out + 1] = nextOf(i, REM[i]) end
    end
    return out
  end
end

local floor = math.floor

-- muldiv returns floor(a*b/d) and a*b mod d exactly, for 0 <= a, b < 2^53,
-- 0 < d < 2^52 and a quotient below 2^53, without forming a*b when it could
-- be inexact: shift-and-add over the bits of b, keeping quotient and
-- remainder separately (every remainder stays below 2d < 2^53).
local function muldiv(a, b, d)
  local ab = a * b
  if ab < 4503599627370496 then -- 2^52: the product is exact
    return divmod(ab, d)
  end
  local qa, ra = divmod(a, d)
  local bits, n = {}, 0
  while b > 0 do
    local h = floor(b / 2)
    n = n + 1
    bits[n] = b - 2 * h
    b = h
  end
  local q, r = 0, 0
  for i = n, 1, -1 do
    q, r = 2 * q, 2 * r
    if r >= d then q, r = q + 1, r - d end
    if bits[i] == 1 then
      q, r = q + qa, r + ra
      if r >= d then q, r = q + 1, r - d end
    end
  end
  return q, r
end

local n = #KEYS

-- Layer parameters.
local kind, A, TAU, LIMIT, COST = {}, {}, {}, {}, {}
for i = 1, n do
  local o = 2 + 5 * (i - 1)
  kind[i] = tonumber(ARGV[o])
  A[i] = tonumber(ARGV[o + 1])
  TAU[i] = tonumber(ARGV[o + 2])
  LIMIT[i] = tonumber(ARGV[o + 3])
  COST[i] = tonumber(ARGV[o + 4])
end

-- load returns the stored state of layer i as a table.
local function load(i)
  local v = redis.call("GET", KEYS[i])
  if kind[i] == 1 then
    return { tat = tonumber(v) or 0 }
  end
  if kind[i] == 4 then
    local st = { last = 0, ts = {}, cs = {} }
    if v and string.byte(v, 1) ~= 45 then -- "-": a packed window state, no log
      local j = 0
      for num in string.gmatch(v, "%d+") do
        if j == 0 then
          st.last = tonumber(num)
        elseif j % 2 == 1 then
          st.ts[#st.ts + 1] = tonumber(num)
        else
          st.cs[#st.cs + 1] = tonumber(num)
        end
        j = j + 1
      end
    end
    return st
  end
  local k, p, q = windowState(v)
  if not k then return { k = 0, p = 0, q = 0 } end
  return { k = k, p = p, q = q }
end

-- Token bucket (GCRA) ---------------------------------------------------

local function gcraRemaining(i, debt)
  if debt >= TAU[i] then return 0 end
  return (divmod(TAU[i] - debt, A[i]))
end

-- gcraStep decides cost c; it returns ok, rem, retry, reset, next state
-- (nil when nothing is to be written), ttl.
local function gcraStep(i, st, c)
  local T, tau = A[i], TAU[i]
  local base = math.max(st.tat, now) -- a stale reading: no time has passed
  local debt = base - now
  if c == 0 then return 1, gcraRemaining(i, debt), 0, debt end
  local nx = base + c * T
  if nx - now <= tau then
    return 1, gcraRemaining(i, nx - now), 0, nx - now, { tat = nx }, nx - now
  end
  return 0, gcraRemaining(i, debt), nx - tau - now, debt
end

-- Windows ----------------------------------------------------------------

-- view returns the window index k the decision is made in, the elapsed
-- time e into it, and the counts p (window k-1) and q (window k) then.
local function view(i, st)
  local W = A[i]
  local k, e = divmod(now, W)
  -- A state records its window whatever its counts (no state: k = 0).
  if st.k > k then
    -- A stale reading (internal/luasrc/start.lua's ownWindow), decided at
    -- the start of the state's window; else an index of a shorter Window,
    -- whose counts carry over into window k.
    if ownWindow(KEYS[i], st.k, W) then return st.k, 0, st.p, st.q end
    return k, e, st.p, st.q
  end
  local d = k - st.k
  if d == 0 then return k, e, st.p, st.q end
  if d == 1 and kind[i] == 3 then return k, e, st.q, 0 end
  return k, e, 0, 0
end

-- used returns ceil(p*(W-e)/W): the previous window's weight in units.
local function used(i, p, e)
  if p == 0 or kind[i] ~= 3 then return 0 end
  local q, r = muldiv(p, A[i] - e, A[i])
  if r > 0 then q = q + 1 end
  return q
end

local function windowReset(i, e, p, q)
  local W = A[i]
  if q > 0 and kind[i] == 3 then return 2 * W - e end
  if q > 0 or p > 0 then return W - e end
  return 0
end

local function windowRetry(i, e, p, q, c)
  local W, limit = A[i], LIMIT[i]
  if kind[i] == 2 then return W - e end
  -- Later in this window, while p's weight decays: admitted at e' iff
  -- p*(W-e') <= room*W, that is e' >= W - floor(room*W/p). Reached only
  -- when room < p, so the quotient is below W.
  local room = limit - q - c
  if room >= 0 and p > 0 then
    local at = W - (muldiv(room, W, p))
    if at < W then return at - e end
  end
  -- In the next window q becomes the previous count and decays.
  room = limit - c
  local at = 0
  if q > room then at = W - (muldiv(room, W, q)) end
  return W - e + at
end

local function windowStep(i, st, c)
  local k, e, p, q = view(i, st)
  local u = used(i, p, e)
  local limit = LIMIT[i]
  if c == 0 then
    return 1, math.max(0, limit - q - u), 0, windowReset(i, e, p, q)
  end
  if q + c + u <= limit then
    q = q + c
    local reset = windowReset(i, e, p, q)
    -- The decision instant k*W+e is never before now; the TTL runs from now.
    return 1, limit - q - u, 0, reset, { k = k, p = p, q = q }, k * A[i] + e + reset - now
  end
  return 0, math.max(0, limit - q - u), windowRetry(i, e, p, q, c), windowReset(i, e, p, q)
end

-- Sliding log -------------------------------------------------------------

-- logStep decides at t = max(now, last) (a reading older than the last
-- write: no time has passed); an instant s counts while t − s < W.
local function logStep(i, st, c)
  local W, limit = A[i], LIMIT[i]
  local t = math.max(now, st.last)
  local ts, cs = st.ts, st.cs
  local first = 1
  while first <= #ts and ts[first] + W <= t do first = first + 1 end
  local n = 0
  for j = first, #ts do n = n + cs[j] end
  local reset = 0
  if n > 0 then reset = ts[#ts] + W - t end
  if c == 0 then return 1, math.max(0, limit - n), 0, reset end
  if n + c <= limit then
    local nts, ncs = {}, {}
    for j = first, #ts do
      nts[#nts + 1] = ts[j]
      ncs[#ncs + 1] = cs[j]
    end
    if #nts > 0 and nts[#nts] == t then
      ncs[#ncs] = ncs[#ncs] + c
    else
      nts[#nts + 1] = t
      ncs[#ncs + 1] = c
    end
    return 1, limit - n - c, 0, W, { last = t, ts = nts, cs = ncs }, t + W - now
  end
  -- Denied: it fits once the (n + c − limit)-th oldest unit stops counting.
  local need, j = n + c - limit, first
  while need > cs[j] do
    need = need - cs[j]
    j = j + 1
  end
  return 0, math.max(0, limit - n), ts[j] + W - t, reset
end

local function step(i, st, c)
  if c < 0 or c > LIMIT[i] then
    local _, rem, _, reset = step(i, st, 0)
    return 0, rem, -1, reset
  end
  if kind[i] == 1 then return gcraStep(i, st, c) end
  if kind[i] == 4 then return logStep(i, st, c) end
  return windowStep(i, st, c)
end

-- nextOf returns layer i's wait for rem+1 units on state st, of which rem
-- is the Remaining, or 0 when rem is its limit (full).
local function nextOf(i, st, rem)
  if rem >= LIMIT[i] then return 0 end
  local _, _, retry = step(i, st, rem + 1)
  return retry
end

-- Decide the layers in order, each against the state the earlier layers
-- of this request would leave (the same key may appear twice).
local orig, pending, ttl = {}, {}, {}
local out = { 1 }
for i = 1, n do
  local key = KEYS[i]
  if orig[key] == nil then orig[key] = load(i) end
  local st = pending[key] or orig[key]
  local ok, rem, retry, reset, nx, t = step(i, st, COST[i])
  if ok == 0 then
    -- Denied by layer i: nothing is written. Report layer i's verdict and
    -- every other layer checked against its original state.
    local den = { 0, i }
    for j = 1, n do
      local ok2, rem2, retry2, reset2
      local sj = st
      if j == i then
        ok2, rem2, retry2, reset2 = ok, rem, retry, reset
      else
        sj = orig[KEYS[j]] or load(j)
        ok2, rem2, retry2, reset2 = step(j, sj, COST[j])
        if ok2 == 1 then
          -- Report the current state, not the state after an admission.
          local _
          _, rem2, _, reset2 = step(j, sj, 0)
        end
      end
      den[#den + 1] = ok2
      den[#den + 1] = rem2
      den[#den + 1] = retry2
      den[#den + 1] = reset2
      if wantNext then den[#den + 1] = nextOf(j, sj, rem2) end
    end
    return den
  end
  if nx then
    pending[key] = nx
    ttl[key] = t
  end
  out[#out + 1] = rem
  out[#out + 1] = reset
  if wantNext then out[#out + 1] = nextOf(i, nx or st, rem) end
end

-- Admitted by every layer: write each changed state once.
for i = 1, n do
  local key = KEYS[i]
  local st = pending[key]
  if st then
    local ms = ttlMs(ttl[key])
    if kind[i] == 1 then
      redis.call("SET", key, string.format("%.0f", st.tat), "PX", ms)
    elseif kind[i] == 4 then
      local parts = { string.format("%.0f", st.last) }
      for j = 1, #st.ts do
        parts[#parts + 1] = string.format("%.0f %.0f", st.ts[j], st.cs[j])
      end
      redis.call("SET", key, table.concat(parts, " "), "PX", ms)
    elseif kind[i] == 2 then
      redis.call("SET", key, windowValue(st.k, st.q, LIMIT[i]), "PX", ms)
    else
      redis.call("SET", key, string.format("%.0f %.0f %.0f", st.k, st.p, st.q), "PX", ms)
    end
    pending[key] = nil
    if incKey then
      -- The record of this admission (one layer): the incarnation, kept
      -- for as long as this state may owe the admission anything
      -- (internal/luasrc/incarnation.lua's incarnation and current,
      -- inline: this script does not start with that file).
      local iv = redis.call("GET", incKey) -- the incarnation, then any renewals
      local inc = iv and tonumber(string.match(iv, "^%d+")) or 0
      if inc ~= 0 and redis.call("PTTL", incKey) < ms then
        redis.call("PEXPIRE", incKey, ms)
      end
      local mark = st.tat or st.last or st.k
      out[#out + 1] = inc
      out[#out + 1] = mark
    end
  end
end
return out
