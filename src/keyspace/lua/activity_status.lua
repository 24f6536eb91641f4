#!lua flags=no-writes
-- One consistent snapshot of an activity's counters (a sale or a lottery), for admin status, reconciliation and tests.
-- KEYS: meta stock items buyers orders stream prizes
-- ARGV:
-- RETURNS: {code:int [state:str kind:str start_ms:int end_ms:int per_user_limit:int
-- RETURNS:   total:int reserved:int released:int version:int remaining:int stream_length:int
-- RETURNS:   orders:int buyers:int oversold:int wepoch:int wseq:int]}
-- Returns {-4} unknown activity, or {1, state, kind, start_ms, end_ms, per_user_limit, total,
-- reserved, released, version, remaining, stream_length, orders, buyers, oversold, wepoch,
-- wseq}; oversold: units the lost-write repair applied that were sold again
-- (activity_reapply_orders.lua); wepoch, wseq: the write sequence (sale_reserve.lua).
-- `reserved` (units ever reserved) is not kept, it is derived: every unit ever loaded or added is
-- either left, or was reserved and not given back, or was applied again by the lost-write repair
-- without being in stock, so reserved = total + released + oversold - remaining (every script
-- that moves units keeps that identity: reserve, release, add stock, dead letter, reapply).
local m = redis.call('HMGET', KEYS[1], 'state', 'kind', 'start_ms', 'end_ms', 'limit', 'total',
  'released', 'version', 'oversold', 'wepoch', 'wseq')
if not m[1] then return {-4} end
local remaining
if m[2] == 'counted' then remaining = tonumber(redis.call('GET', KEYS[2]) or '0')
elseif m[2] == 'lottery' then
  remaining = 0
  for _, left in ipairs(redis.call('HVALS', KEYS[7])) do remaining = remaining + tonumber(left) end
else remaining = redis.call('LLEN', KEYS[3]) end
local total, released, oversold = tonumber(m[6]), tonumber(m[7]), tonumber(m[9] or '0')
return {1, m[1], m[2], tonumber(m[3]), tonumber(m[4]), tonumber(m[5]), total,
  total + released + oversold - remaining, released, tonumber(m[8]), remaining,
  redis.call('XLEN', KEYS[6]), redis.call('HLEN', KEYS[5]), redis.call('HLEN', KEYS[4]), oversold,
  tonumber(m[10] or '0'), tonumber(m[11] or '0')}
