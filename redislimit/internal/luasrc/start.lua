-- The start of every script of redislimit and redislimit/lease (see
-- luasrc.go): effects replication, the instant the script works at, and
-- the exact integer division every script's state maths uses.
--
-- ARGV[1]  "" to work at the server's clock (TIME); otherwise an instant
--          in microseconds. Only the packages' tests pass one (against a
--          manual clock); the Go API never does.
--
-- now is the instant, in integer µs. With a test instant, TTLs run on the
-- server's real clock while the decisions follow the test's, so ttlExtra
-- (ms) stretches every TTL by an hour: no key expires during a test that
-- its own clock still needs.

if redis.replicate_commands then redis.replicate_commands() end

local now, ttlExtra = nil, 0
if ARGV[1] ~= "" then
  now = tonumber(ARGV[1])
  ttlExtra = 3600000
else
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- divmod returns floor(n/d) and n mod d exactly, for 0 <= n, 0 < d and
-- n + d < 2^53: the quotient of the rounded division is off by at most one.
local function divmod(n, d)
  local q = math.floor(n / d)
  local r = n - q * d
  while r < 0 do q = q - 1; r = r + d end
  while r >= d do q = q + 1; r = r - d end
  return q, r
end

-- ceildiv returns ceil(n/d) exactly, under divmod's conditions.
local function ceildiv(n, d)
  local q, r = divmod(n, d)
  if r > 0 then q = q + 1 end
  return q
end

-- ttlMs returns the TTL, in ms, of a state that is fresh again in us µs:
-- us rounded up to a millisecond, plus ttlExtra.
local function ttlMs(us)
  return ceildiv(us, 1000) + ttlExtra
end
