#!lua
-- Moves an order intent that keeps failing from the activity's stream to its dead-letter stream,
-- with the reason, in one step: the copy is added, the entry acknowledged and its failure count
-- dropped together, so an entry is never in neither place nor acknowledged without a copy.
-- KEYS: stream dead failures
-- ARGV: group entry_id error deliveries now_ms
-- RETURNS: moved:int
-- Returns 1 moved | 0 the entry is no longer in the stream (acknowledged anyway)
local entry = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #entry == 0 then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
  return 0
end
local fields = entry[1][2]
local copy = {'original_id', ARGV[2], 'error', ARGV[3], 'deliveries', ARGV[4], 'dead_ms', ARGV[5]}
for i = 1, #fields do copy[#copy + 1] = fields[i] end
redis.call('XADD', KEYS[2], '*', unpack(copy))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[2])
return 1
