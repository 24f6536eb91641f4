#!lua
-- Creates a consumer group on a stream (reading from the start; the stream too if it is missing)
-- unless the group exists. In a script, an existing group (BUSYGROUP) is an answer, not an error
-- reply, so ensuring a group that is there counts as no Redis error.
-- KEYS: stream
-- ARGV: group
-- RETURNS: created:int
-- Returns 1 created | 0 it existed
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
if type(created) == 'table' and created.err then
  if string.sub(created.err, 1, 9) == 'BUSYGROUP' then return 0 end
  return redis.error_reply(created.err)
end
return 1
