#!lua
-- A buyer joins an activity's waiting room (issue 37, core/waiting_room.h): one place per user,
-- idempotent. The room is a sorted set in the activity's slot, user -> score, ordered by score:
-- a place taken before the start scores the random draw it came with (uniform in [0, 2^52)), so
-- the early places are in a uniformly random order once the start seals them; a place taken after
-- it scores 2^52 + an arrival counter, behind every early place in arrival order. The counter's
-- key existing is the seal: the first call at or after the start creates it (here or in
-- room_place.lua), and from then on every join is a late one, whatever the joining instance's
-- clock says, so the early order never changes once places are shown. O(log n).
-- KEYS: room seq
-- ARGV: user_id now_ms start_ms draw admitted max_waiting
-- RETURNS: {code:int rank:int size:int}
-- code 1 joined | 2 had joined before (nothing changed) | -8 the room is full (max_waiting places
-- not admitted yet). rank: the 0-based rank in the room (-1 when full); size: places taken.
local user = ARGV[1]
local now, start = tonumber(ARGV[2]), tonumber(ARGV[3])
local admitted, max_waiting = tonumber(ARGV[5]), tonumber(ARGV[6])
local rank = redis.call('ZRANK', KEYS[1], user)
if rank then return {2, rank, redis.call('ZCARD', KEYS[1])} end
local size = redis.call('ZCARD', KEYS[1])
if size - math.min(admitted, size) >= max_waiting then return {-8, -1, size} end
local score
if now < start and redis.call('EXISTS', KEYS[2]) == 0 then
  score = ARGV[4]
else
  score = string.format('%.0f', 4503599627370496 + redis.call('INCR', KEYS[2]))
end
redis.call('ZADD', KEYS[1], score, user)
return {1, redis.call('ZRANK', KEYS[1], user), size + 1}
