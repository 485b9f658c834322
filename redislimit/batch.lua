
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
--          number of layers n, its next flag ("1" or ""), if inline its n
--          keys, then its 5n layer arguments as in script.lua.
--
-- Reply: the instant decided at (now, in µs), then m replies, each
-- either windows.lua's short reply of an admission (2, then its n
-- layers' Remainings: n + 1 integers; see fixedWindows), or script.lua's
-- reply to that decision (a table), or the error that decision raised (a
-- key holding another type; on a Cluster, a key the node does not hold):
-- an error fails its own decision, never the others of the batch. A
-- decision raises only before it writes (script.lua reads every key
-- first), so a failed decision changed nothing.
local out, ki, ai, ri = { now }, 1, 3, 1 -- ri: out's last index
for c = 1, tonumber(ARGV[2]) do
  local n, flag = numOf[ARGV[ai]], ARGV[ai + 1]
  if n == nil then n = tonumber(ARGV[ai]); numOf[ARGV[ai]] = n end
  ai = ai + 2
  local ko, ao = ki - 1, ai - 1 -- the decision's keys and layers: K[ko + i], ARGV[ao + ...]
  local K = KEYS
  if inline then K, ko, ao = ARGV, ai - 1, ai - 1 + n end
  -- Fixed windows first (windows.lua), on the arguments where they are;
  -- any other call (or one it leaves) as script.lua's decide, on tables
  -- of its own.
  local ok, r = true, nil
  if ARGV[ao + 1] == "2" then ok, r = pcall(fixedWindows, K, ko, ARGV, ao, n, flag == "1", out, ri) end
  if ok and r == nil then
    local ks, as = {}, { "" }
    for i = 1, n do ks[i] = K[ko + i] end
    for i = 1, 5 * n do as[i + 1] = ARGV[ao + i] end
    as[5 * n + 2] = flag
    skipWindows = true
    ok, r = pcall(decide, ks, as)
    skipWindows = false
  end
  if inline then ai = ai + n else ki = ki + n end
  ai = ai + 5 * n
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
