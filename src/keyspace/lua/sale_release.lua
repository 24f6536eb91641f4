#!lua
-- Returns a reserved order's units (and item ids) to stock, exactly once: the order record moves
-- from R (reserved) to X (released) in the same call that gives the units back, so a second
-- release finds X and does nothing. The buyer's count drops, so they may buy again.
-- KEYS: meta stock items buyers orders
-- ARGV: order_id
-- RETURNS: {code:int [quantity:int]}
-- Returns {1, quantity} released now | {0} released before | {-1} no such order | {-4} the
-- activity is not loaded (its kind unknown: nothing is written, so a release never creates the
-- keys of an activity Redis lost, which a rebuild must find absent).
local kind = redis.call('HGET', KEYS[1], 'kind')
if not kind then return {-4} end
local rec = redis.call('HGET', KEYS[5], ARGV[1])
if not rec then return {-1} end
local state, user, qty, items = string.match(rec, '^(%a)|([^|]*)|(%d+)|%d+|(.*)$')
if not state then
  return redis.error_reply('ERR flashsale: unreadable order record for ' .. ARGV[1])
end
if state ~= 'R' then return {0} end
qty = tonumber(qty)
if kind == 'lottery' then
  return redis.error_reply('ERR flashsale: a lottery win is not released by this script')
end

redis.call('HSET', KEYS[5], ARGV[1], 'X' .. string.sub(rec, 2))
if kind == 'items' then
  local list = {}
  for item in string.gmatch(items, '%S+') do list[#list + 1] = item end
  redis.call('RPUSH', KEYS[3], unpack(list))
else
  redis.call('INCRBY', KEYS[2], qty)
end
if redis.call('HINCRBY', KEYS[4], user, -qty) <= 0 then
  redis.call('HDEL', KEYS[4], user)
end
redis.call('HINCRBY', KEYS[1], 'released', qty)
return {1, qty}
