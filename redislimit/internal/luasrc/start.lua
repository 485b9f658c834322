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
-- its own clock still needs. For the same reason a test's clock set back
-- does not set back the clock keys expire by, so ownWindow below allows a
-- test's state to start up to leadExtra (µs, a year) after its key expires.

if redis.replicate_commands then redis.replicate_commands() end

local now, ttlExtra, leadExtra = nil, 0, 0
if ARGV[1] ~= "" then
  now = tonumber(ARGV[1])
  ttlExtra, leadExtra = 3600000, 31536000000000 -- an hour (ms), a year (µs)
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

-- Window states (kinds 2 and 3; see redislimit's script.lua). A fixed
-- window's state of a Limit up to maxPacked, in a window whose index k
-- has k <= maxPackedIndex, is packed: the integer -((k + 1)·packedBase + q),
-- which redislimit's windows.lua counts in with one DECRBY (negative, so
-- that no bucket's TAT reads as one). Every other window state is the
-- string "k p q" (p, the previous window's count, is 0 for a fixed
-- window), as every state was before the packed one: both are read.
local packedBase, maxPacked, maxPackedIndex = 2097152, 1048575, 4294967294 -- 2^21, 2^20-1, 2^32-2

-- windowState returns the window index, p and q that v (a GET's reply)
-- holds, or nil for no window state (absent, or of another kind).
local function windowState(v)
  if not v then return nil end
  local n = tonumber(v)
  if n then
    if n >= 0 then return nil end
    local m = -n
    local k1 = math.floor(m / packedBase)
    if k1 < 1 then return nil end
    return k1 - 1, 0, m - k1 * packedBase
  end
  local k, p, q = string.match(v, "^(%d+) (%d+) (%d+)$")
  if not k then return nil end
  return tonumber(k), tonumber(p), tonumber(q)
end

-- ownWindow reports whether the window state under key, of index sk in
-- windows of w µs, with sk·w > now (a window later than now's), is the
-- state's own window: the server's clock was set back since it was
-- written (a stale reading). Every write keeps a window state until its
-- window ends, and Redis expires keys on the clock TIME reads, so a state
-- of one's own window starts before the key expires (PTTL, with 2 ms for
-- the rounding to ms). One that starts later was counted in windows of
-- another, shorter length (a policy whose Window grew under the same
-- name): read with w, its index is a window decades ahead, which must not
-- be decided in, nor kept until; its counts carry over into now's window,
-- as hotlimit's SetPolicy carries them. A key without a TTL (PTTL -1) was
-- written by none of these scripts: its counts carry over too.
local function ownWindow(key, sk, w)
  return sk * w < now + (redis.call("PTTL", key) + 2) * 1000 + leadExtra
end

-- windowValue returns the value that stores a fixed window's state: count
-- q in window k, packed when it can be. q is at most limit, except after a
-- give-back (ops.lua's refund, lease.lua's give) on a count that a larger
-- Limit of the same name left: a q of 2^21 or more would carry into the
-- window index, so it is never packed.
local function windowValue(k, q, limit)
  if limit <= maxPacked and q <= maxPacked and k <= maxPackedIndex then
    return string.format("%.0f", -((k + 1) * packedBase + q))
  end
  return string.format("%.0f 0 %.0f", k, q)
end
