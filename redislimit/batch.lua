
-- redislimit: several decisions in one script call, decided in order at
-- one instant. batch.go puts this after the common start
-- (internal/luasrc/start.lua, which reads ARGV[1]), script.lua's
-- decision wrapped as decide(KEYS, ARGV), and the line that sets inline:
-- false on one server, true on a Redis Cluster's node (where the script
-- has the allow-cross-slot-keys flag and KEYS is empty: see batch.go).
--
-- KEYS     unless inline, every decision's keys, one decision after the
--          other.
-- ARGV[1]  "" to decide at the server's TIME, else an instant in µs
--          (only the package's tests pass one), as in script.lua.
-- ARGV[2]  m, the number of decisions; then for each decision: its
--          head h = 4n + 2·next + s, for its n layers, next 1 to report
--          each layer's next unit (script.lua's "1" flag) else 0, and s
--          1 for the short form below else 0; if inline its n keys; then
--          its layers' arguments: script.lua's 5 a layer (kind, W, tau,
--          limit, cost), or in the short form, which the client sends
--          when every layer is a fixed window, 3 (W, limit, cost: kind 2,
--          tau 0). Each string Redis reads costs it about 1,000
--          instructions: a decision of 3 fixed windows takes 10 argument
--          strings in the short form, against 17 in script.lua's.
--
-- Reply: the instant decided at (now, in µs), then m replies, each
-- either windows.lua's short reply of an admission (2, then its n
-- layers' Remainings: n + 1 integers; see fixedWindows), or script.lua's
-- reply to that decision (a table), or the error that decision raised (a
-- key holding another type; on a Cluster, a key the node does not hold):
-- an error fails its own decision, never the others of the batch. A
-- decision raises only before it writes (script.lua reads every key
-- first), so a failed decision changed nothing.

-- A head's n, next flag and arguments a layer, read once a script call
-- (a batch repeats a few heads).
local headN, headNext, headSt = {}, {}, {}
local out, ki, ai, ri = { now }, 1, 3, 1 -- ri: out's last index
for c = 1, tonumber(ARGV[2]) do
  local hs = ARGV[ai]
  local n = headN[hs]
  if n == nil then
    local h = tonumber(hs)
    local s, x = h % 2, h % 4
    n = (h - x) / 4
    headN[hs], headNext[hs], headSt[hs] = n, x >= 2, s == 1 and 3 or 5
  end
  local wantNext, st = headNext[hs], headSt[hs]
  ai = ai + 1
  local ko, ao = ki - 1, ai - 1 -- the decision's keys and layers: K[ko + i], ARGV[ao + ...]
  local K = KEYS
  if inline then K, ko, ao = ARGV, ai - 1, ai - 1 + n end
  -- Fixed windows first (windows.lua), on the arguments where they are;
  -- any other call (or one it leaves) as script.lua's decide, on tables
  -- of its own, in script.lua's form.
  local ok, r = true, nil
  if st == 3 or ARGV[ao + 1] == "2" then ok, r = pcall(fixedWindows, K, ko, ARGV, ao, n, st, wantNext, out, ri) end
  if ok and r == nil then
    local ks, as = {}, { "" }
    for i = 1, n do ks[i] = K[ko + i] end
    if st == 5 then
      for i = 1, 5 * n do as[i + 1] = ARGV[ao + i] end
    else
      for i = 1, n do
        local o, p = ao + 3 * (i - 1), 5 * (i - 1) + 1
        as[p + 1], as[p + 2], as[p + 3], as[p + 4], as[p + 5] = "2", ARGV[o + 1], "0", ARGV[o + 2], ARGV[o + 3]
      end
    end
    as[5 * n + 2] = wantNext and "1" or ""
    skipWindows = true
    ok, r = pcall(decide, ks, as)
    skipWindows = false
  end
  if inline then ai = ai + n else ki = ki + n end
  ai = ai + st * n
  if ok and type(r) == "number" then
    ri = r -- the short reply, in out already
  else
    ri = ri + 1
    if ok or type(r) == "table" and r.err then
      out[ri] = r
    else
      out[ri] = redis.error_reply(tostring(r))
    end
  end
end
out[ri + 1] = nil -- the reply ends at ri, whatever a failed decision left past it
return out
