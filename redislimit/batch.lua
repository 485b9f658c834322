
-- redislimit: several decisions in one script call, decided in order at
-- one instant. batch.go puts this after the common start
-- (internal/luasrc/start.lua, which reads ARGV[1]) and script.lua's
-- decision wrapped as decide(KEYS, ARGV).
--
-- KEYS     every decision's keys, one decision after the other.
-- ARGV[1]  "" to decide at the server's TIME, else an instant in µs
--          (only the package's tests pass one), as in script.lua.
-- ARGV[2]  m, the number of decisions; then for each decision: its
--          number of layers n, its next flag ("1" or ""), then its 5n
--          layer arguments as in script.lua.
--
-- Reply: m replies, each script.lua's reply to that decision, or the
-- error that decision raised (a key holding another type): an error fails
-- its own decision, never the others of the batch. A decision raises only
-- before it writes (script.lua reads every key first), so a failed
-- decision changed nothing.
local out, ki, ai = {}, 1, 3
for c = 1, tonumber(ARGV[2]) do
  local n, flag = tonumber(ARGV[ai]), ARGV[ai + 1]
  ai = ai + 2
  local ks, as = {}, { "" }
  for i = 1, n do
    ks[i] = KEYS[ki]
    ki = ki + 1
  end
  for i = 1, 5 * n do
    as[i + 1] = ARGV[ai]
    ai = ai + 1
  end
  as[5 * n + 2] = flag
  local ok, r = pcall(decide, ks, as)
  if ok then
    out[c] = r
  elseif type(r) == "table" and r.err then
    out[c] = r
  else
    out[c] = redis.error_reply(tostring(r))
  end
end
return out
