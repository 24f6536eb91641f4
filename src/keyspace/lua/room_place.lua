#!lua
-- A buyer's place in an activity's waiting room (room_join.lua) and the units left: what a poll of
-- the room reads, O(log n). At or after the start it seals the early places (creates the arrival
-- counter) if no join did yet, so none is added before them afterwards.
-- KEYS: room seq meta stock items
-- ARGV: user_id now_ms start_ms
-- RETURNS: {rank:int size:int remaining:int}
-- rank: the user's 0-based rank, -1 not in the room; size: places taken; remaining: units left
-- (-1: the activity is not loaded).
if tonumber(ARGV[2]) >= tonumber(ARGV[3]) and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('SET', KEYS[2], '0')
end
local rank = redis.call('ZRANK', KEYS[1], ARGV[1]) or -1
local kind = redis.call('HGET', KEYS[3], 'kind')
local remaining = -1
if kind == 'counted' then remaining = tonumber(redis.call('GET', KEYS[4]) or '0')
elseif kind then remaining = redis.call('LLEN', KEYS[5]) end
return {rank, redis.call('ZCARD', KEYS[1]), remaining}
