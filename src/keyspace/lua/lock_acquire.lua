#!lua
-- Takes a lock for `ttl_ms` unless someone holds it (SET NX PX with the holder's unique token),
-- and gives the new holder a fencing token: the next value of a counter that only grows, so a
-- write checked against it can tell a stale holder (paused past its lease) from the current one.
-- KEYS: lock fence
-- ARGV: token ttl_ms
-- RETURNS: {acquired:int fence_or_ttl_ms:int}
-- Returns {1, fence} when taken; {0, ms until it expires} when another holder has it.
local ttl = tonumber(ARGV[2])
if not ttl or ttl < 1 then return redis.error_reply('ERR flashsale: ttl_ms must be >= 1') end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ttl) then
  return {0, redis.call('PTTL', KEYS[1])}
end
return {1, redis.call('INCR', KEYS[2])}
