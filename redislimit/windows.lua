-- redislimit: the fixed windows' fast path, one DECRBY per layer.
--
-- fixedWindows(K, ko, A, ao, n, st, wantNext, R, ri) decides a call of
-- n layers that are all fixed windows (kind 2) on distinct keys, each of
-- a Limit of at most maxPacked and in a window whose index k has k + 2 <=
-- 2^32 (see the packed state below): layer i's key is K[ko + i] and its
-- st arguments are A[ao + st(i-1) + 1 .. ao + st·i]: with st = 5,
-- script.lua's five (kind, W, tau, limit, cost); with st = 3, a batch's
-- short form of a call whose layers are all fixed windows (W, limit,
-- cost: the kind is 2 and tau 0, so that Redis reads 2 strings a layer
-- fewer, about 1,000 instructions each). It returns script.lua's reply, or nil,
-- having changed nothing, for a call it does not decide: a layer of
-- another kind, two layers on one key, a limit or a window index out of
-- range, or a key holding a state of the string layout ("k p q", written
-- for a window of another range, or by an earlier version): script.lua's
-- general path then decides it (and writes the packed state when it
-- can). A key holding another type raises that error, having changed
-- nothing.
--
-- In a batch (batch.lua passes its reply R, whose last index is ri), the
-- common reply is shorter: an admission whose every layer was read in
-- its own window (not stale, below) goes into R itself as 2 and each
-- layer's Remaining, and fixedWindows returns R's new last index. Those
-- Remainings say the rest: a layer's ResetAfter and next unit are both
-- the time to its window's end (W - now mod W, R[1] holding the batch's
-- now) when its Remaining is under its Limit, else 0, as the full reply
-- gives them: with a Limit of 1 or more (redislimit's newSpec refuses 0),
-- Remaining < Limit exactly when the window has counted something. It
-- saves Redis a table and most of the integers of a reply per decision.
--
-- The packed state (start.lua's windowState and windowValue) is the
-- integer -((k + 1)·2^21 + q): the window index k and its count q in one
-- number, negative so that no bucket's TAT reads as one. A layer's cost c
-- goes on with DECRBY, whose reply is the state after it; a request over a
-- layer's limit, or denied by another layer, is undone with INCRBY (or a
-- DEL of a key that was absent), so that nothing of a denial stays.
-- Every DECRBY of a decision is made before any other write, so an error
-- of a later layer's key undoes the earlier ones first. A window's first
-- admission (the key absent, or holding an earlier window) SETs the
-- state with the TTL of the window's end; later ones in that window keep
-- it. With q <= Limit and c <= Limit < 2^20, q + c stays below 2^21: the
-- count never carries into the index, and every value stays below 2^53,
-- exact in Lua's doubles.
--
-- The decisions are script.lua's kind 2 ones, a stale reading included (a
-- state from a later window than now: decided at the start of that
-- window, e = 0, as hotlimit's window does).

-- skipWindows: batch.lua sets it around a decision fixedWindows left to
-- script.lua's general path, so that script.lua does not try it again.
local skipWindows = false

-- Per window length (its argument string) at now: the window index, the
-- elapsed time into it, the TTL (ms) until its end, or false when k is
-- out of the packed range. A batch decides at one instant, so each length
-- is divided once per script call.
local winW, winK, winE, winT = {}, {}, {}, {}

-- fwS: per layer, reused from decision to decision of a batch: 8 values
-- each (see below), sized for 8 layers so that it does not grow.
local fwS = {
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
}

-- The functions the fast path calls, as locals: no global lookups.
local rcall, rpcall, mmax, type = redis.call, redis.pcall, math.max, type

-- numOf: the number each argument string (a Limit, a cost, a layer count)
-- stands for, converted once a script call: a batch repeats a few.
local numOf = {}

-- undoWindows undoes the DECRBYs of layers 1..m, of st arguments each
-- (fwS holds each one's cost, and whether its key was absent before).
local function undoWindows(K, ko, A, ao, st, m)
  for i = 1, m do
    local s = 8 * (i - 1)
    local c = fwS[s + 5]
    if c > 0 and c <= fwS[s + 4] then
      if fwS[s + 8] then
        redis.call("DEL", K[ko + i])
      else
        redis.call("INCRBY", K[ko + i], A[ao + st * i])
      end
    end
  end
end

-- fwView returns a layer's Remaining and ResetAfter for its count q at
-- elapsed e of a window w with limit lim, and its next unit's wait (0
-- when it is full: nothing to wait for; else the window's end).
local function fwView(lim, q, w, e)
  local rem, reset, nxt = math.max(0, lim - q), 0, w - e
  if q > 0 then reset = w - e end
  if rem >= lim then nxt = 0 end
  return rem, reset, nxt
end

local function fixedWindows(K, ko, A, ao, n, st, wantNext, R, ri)
  -- Check and read the arguments; nothing is written before all pass.
  -- own: every layer is decided in its own window (no stale reading),
  -- so the batch's short reply holds. dw, dl: where a layer's W and
  -- limit are among its st arguments (its cost is the last).
  local own = R ~= nil
  local dw, dl = 2, 4
  if st == 3 then dw, dl = 1, 2 end
  for i = 1, n do
    local o = ao + st * (i - 1)
    if st == 5 and A[o + 1] ~= "2" then return nil end
    local key = K[ko + i]
    for j = 1, i - 1 do
      if K[ko + j] == key then return nil end
    end
    local ws = A[o + dw]
    local k = winK[ws]
    if k == nil then
      local w = tonumber(ws)
      local e
      k, e = divmod(now, w)
      if k > maxPackedIndex then k = false end
      winW[ws], winK[ws], winE[ws], winT[ws] = w, k, e, ttlMs(w - e)
    end
    local ls, cs = A[o + dl], A[o + st]
    local lim, c = numOf[ls], numOf[cs]
    if lim == nil then lim = tonumber(ls); numOf[ls] = lim end
    if c == nil then c = tonumber(cs); numOf[cs] = c end
    if not k or lim > maxPacked then return nil end
    -- fwS per layer: W, k, e, limit, cost, then the count q before the
    -- call, the window's first admission (SET), the key absent (DEL).
    local s = 8 * (i - 1)
    fwS[s + 1], fwS[s + 2], fwS[s + 3], fwS[s + 4], fwS[s + 5] = winW[ws], k, winE[ws], lim, c
  end
  -- Decide each layer on its state: DECRBY for a cost that can be
  -- admitted, else a read. Each layer's Remaining goes into R at once,
  -- for the short reply should every layer admit (o: its index of 2).
  local deny, anyFirst, o = 0, false, own and ri + 1
  for i = 1, n do
    local s = 8 * (i - 1)
    local key, k, lim, c = K[ko + i], fwS[s + 2], fwS[s + 4], fwS[s + 5]
    local q, first, absent = 0, false, false
    if c > 0 and c <= lim then
      local r = rpcall("DECRBY", key, A[ao + st * i])
      if type(r) == "table" then
        undoWindows(K, ko, A, ao, st, i - 1)
        if string.find(r.err, "not an integer", 1, true) then return nil end -- the string layout
        error(r)
      end
      local m = -r
      local sk = (m - m % packedBase) / packedBase - 1 -- floor(m / 2^21) - 1, exactly
      if sk < 0 then
        -- No state (DEL undoes it), or a value of no packed window (a
        -- bucket's TAT: INCRBY undoes it): fresh.
        first, absent = true, m == c
      elseif sk == k then
        q = m - (sk + 1) * packedBase - c
      elseif sk > k then
        q = m - (sk + 1) * packedBase - c
        if ownWindow(key, sk, fwS[s + 1]) then
          -- A stale reading: decided at the start of the state's window.
          fwS[s + 2], fwS[s + 3], own = sk, 0, false
        else
          -- Counted in a shorter Window: q carries into window k, which
          -- this admission SETs (start.lua's ownWindow).
          first = true
        end
      else
        first = true -- an earlier window's state: fresh
      end
      if q + c > lim then deny = deny > 0 and deny or i end
      if own then R[o + i] = lim - q - c end -- an admission's: q + c <= lim
    else
      local v = rpcall("GET", key)
      if type(v) == "table" then
        undoWindows(K, ko, A, ao, st, i - 1)
        error(v)
      end
      local sk, _, sq = windowState(v)
      if sk and sk >= k then
        if sk > k and ownWindow(key, sk, fwS[s + 1]) then fwS[s + 2], fwS[s + 3], own = sk, 0, false end
        q = sq
      end
      if c ~= 0 then deny = deny > 0 and deny or i end
      if own then R[o + i] = mmax(0, lim - q) end
    end
    fwS[s + 6], fwS[s + 7], fwS[s + 8] = q, first, absent
    if first then anyFirst = true end
  end
  if deny > 0 then
    undoWindows(K, ko, A, ao, st, n)
    -- Every layer reported on its state as it was.
    local out, j = { 0, deny }, 2
    for i = 1, n do
      local s = 8 * (i - 1)
      local w, e, lim, c, q = fwS[s + 1], fwS[s + 3], fwS[s + 4], fwS[s + 5], fwS[s + 6]
      local rem, reset, nxt = fwView(lim, q, w, e)
      local ok, retry = 1, 0
      if c < 0 or c > lim then
        ok, retry = 0, -1
      elseif q + c > lim then
        ok, retry = 0, w - e
      end
      out[j + 1], out[j + 2], out[j + 3], out[j + 4] = ok, rem, retry, reset
      if wantNext then out[j + 5] = nxt; j = j + 5 else j = j + 4 end
    end
    return out
  end
  if anyFirst then
    for i = 1, n do
      local s = 8 * (i - 1)
      if fwS[s + 7] then
        -- The window's first admission: its state, kept until the
        -- window's end (a Lua number goes to Redis exactly, as %.17g).
        -- The count before it is 0 but for counts carried over from a
        -- shorter Window.
        rcall("SET", K[ko + i], -((fwS[s + 2] + 1) * packedBase + fwS[s + 6] + fwS[s + 5]), "PX", winT[A[ao + st * (i - 1) + dw]])
      end
    end
  end
  if own then
    R[o] = 2
    return o + n
  end
  -- The full reply: alone, or with a stale reading.
  local out, j = { 1 }, 1
  for i = 1, n do
    local s = 8 * (i - 1)
    local w, e, lim, q = fwS[s + 1], fwS[s + 3], fwS[s + 4], fwS[s + 6] + fwS[s + 5]
    local rem = mmax(0, lim - q) -- fwView's, inline: the common reply
    out[j + 1], out[j + 2] = rem, q > 0 and w - e or 0
    if wantNext then
      out[j + 3] = rem < lim and w - e or 0
      j = j + 3
    else
      j = j + 2
    end
  end
  return out
end
