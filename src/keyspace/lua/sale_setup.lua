#!lua
-- Defines a sale and loads its stock once. A rerun (prewarm again, a second instance
-- starting) updates the definition but never touches the stock, so it cannot reset a sale that is
-- running (S3-8). With load = 0 it never loads stock at all, only updates a loaded definition:
-- an activity missing from Redis might have sold units already (Redis lost its data), and
-- loading its full stock again would oversell; that case is for reconciliation to rebuild.
-- Every check comes before the first write.
-- KEYS: meta stock items
-- ARGV: start_ms end_ms per_user_limit state kind units load items...
-- RETURNS: {code:int version:int [held_total:int held_kind:str]}
-- With load = 2 (a create: the record has no such activity), an activity Redis holds already
-- with another kind or total (a create whose database insert failed, or a concurrent create) is
-- not touched: {-9, 0, total held, kind held}.
-- Returns {1, version} when the stock was loaded by this call, {0, version} when it was loaded
-- before (only the definition changed), {-4, 0} when it is not loaded and load = 0.
local meta, stock_key, items_key = KEYS[1], KEYS[2], KEYS[3]
local kind, units, load = ARGV[5], tonumber(ARGV[6]), ARGV[7]
if not (tonumber(ARGV[1]) and tonumber(ARGV[2]) and tonumber(ARGV[3])) then
  return redis.error_reply('ERR flashsale: start_ms, end_ms and per_user_limit must be numbers')
end
if ARGV[4] ~= 'open' and ARGV[4] ~= 'closed' then
  return redis.error_reply('ERR flashsale: state must be open or closed')
end
if kind ~= 'counted' and kind ~= 'items' then
  return redis.error_reply('ERR flashsale: kind must be counted or items')
end
if not units or units < 0 or (kind == 'items' and units ~= #ARGV - 7) then
  return redis.error_reply('ERR flashsale: units must match the stock given')
end
local loaded_kind = redis.call('HGET', meta, 'kind')
if loaded_kind and load == '2' then
  local held = tonumber(redis.call('HGET', meta, 'total') or '-1')
  if loaded_kind ~= kind or held ~= units then return {-9, 0, held, loaded_kind} end
end
if loaded_kind and loaded_kind ~= kind then
  return redis.error_reply('ERR flashsale: the stock kind of a loaded activity cannot change')
end
if not loaded_kind and load == '0' then return {-4, 0} end

redis.call('HSET', meta, 'start_ms', ARGV[1], 'end_ms', ARGV[2], 'limit', ARGV[3],
  'state', ARGV[4])
if loaded_kind then
  return {0, redis.call('HINCRBY', meta, 'version', 1)}
end
if kind == 'counted' then
  redis.call('SET', stock_key, units)
else
  redis.call('DEL', items_key)
  -- unpack() is bounded by the Lua stack: push in chunks.
  for i = 8, #ARGV, 1000 do
    redis.call('RPUSH', items_key, unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
end
redis.call('HSET', meta, 'kind', kind, 'total', units, 'released', 0)
return {1, redis.call('HINCRBY', meta, 'version', 1)}
