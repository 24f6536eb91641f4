#!lua
-- Deletes an activity's keys if it sold nothing: no buyer, no order, no intent on its stream, no
-- dead letter (every unit ever reserved left an order record); its waiting room goes with it. Atomic with the reserve and draw scripts, so no reservation slips in between the
-- check and the deletion; afterwards they answer unknown activity. Idempotency answers (keys
-- with a TTL) expire by themselves.
-- KEYS: meta stock items prizes buyers orders stream user_orders dead failures queue queue_lock queue_fence report room room_seq
-- ARGV:
-- RETURNS: outcome:int
-- Returns 1 deleted | 0 there was nothing to delete | -1 it sold something (nothing deleted)
if redis.call('HLEN', KEYS[5]) > 0 or redis.call('HLEN', KEYS[6]) > 0
    or redis.call('XLEN', KEYS[7]) > 0 or redis.call('XLEN', KEYS[9]) > 0 then
  return -1
end
local deleted = 0
for i = 1, #KEYS do deleted = deleted + redis.call('DEL', KEYS[i]) end
if deleted > 0 then return 1 end
return 0
