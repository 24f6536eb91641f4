#!lua flags=no-writes
-- A user's orders in one activity, as recorded by the reserve script (reserved or released).
-- KEYS: orders user_orders
-- ARGV: user_id
-- RETURNS: {(order_id:str record:str)...}
-- Returns {order_id, record, order_id, record, ...}; a record is "R|user|quantity|ts|items"
-- (R reserved, X released).
local ids = redis.call('HGET', KEYS[2], ARGV[1])
local reply = {}
if not ids then return reply end
for id in string.gmatch(ids, '%S+') do
  local record = redis.call('HGET', KEYS[1], id)
  if record then
    reply[#reply + 1] = id
    reply[#reply + 1] = record
  end
end
return reply
