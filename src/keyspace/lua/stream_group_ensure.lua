#!lua
-- Creates a consumer group on an activity's stream (reading from the start; the stream too if it
-- is missing) unless the group exists, and only while the activity is there (its meta key): a
-- consumer still holding an activity that was just deleted must not make its stream again, a key
-- nothing would ever delete. In a script, an existing group (BUSYGROUP) is an answer, not an
-- error reply, so ensuring a group that is there counts as no Redis error.
-- KEYS: stream meta
-- ARGV: group
-- RETURNS: created:int
-- Returns 1 created | 0 it existed | -1 no such activity (nothing created)
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
if type(created) == 'table' and created.err then
  if string.sub(created.err, 1, 9) == 'BUSYGROUP' then return 0 end
  return redis.error_reply(created.err)
end
return 1
