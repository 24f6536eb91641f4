#!lua
-- Adds stock to a loaded activity: a number of units (counted) or new item ids (items).
-- KEYS: meta stock items
-- ARGV: units items...
-- RETURNS: {code:int [remaining:int version:int]}
-- Returns {1, remaining, version} | {-4} unknown activity
local kind = redis.call('HGET', KEYS[1], 'kind')
if not kind then return {-4} end
if kind == 'lottery' then
  return redis.error_reply('ERR flashsale: a lottery\'s prize stock is set when it is created')
end
local units = tonumber(ARGV[1])
if not units or units < 1 or units % 1 ~= 0 then
  return redis.error_reply('ERR flashsale: units must be an integer >= 1')
end
if (kind == 'counted' and #ARGV ~= 1) or (kind == 'items' and #ARGV - 1 ~= units) then
  return redis.error_reply('ERR flashsale: ' .. kind .. ' stock takes '
    .. (kind == 'counted' and 'a number of units only' or 'one item id per unit'))
end

local remaining
if kind == 'counted' then
  remaining = redis.call('INCRBY', KEYS[2], units)
else
  for i = 2, #ARGV, 1000 do
    remaining = redis.call('RPUSH', KEYS[3], unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
end
redis.call('HINCRBY', KEYS[1], 'total', units)
return {1, remaining, redis.call('HINCRBY', KEYS[1], 'version', 1)}
