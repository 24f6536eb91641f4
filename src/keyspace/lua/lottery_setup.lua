#!lua
-- Defines a lottery and loads its prize stock once, like sale_setup: a rerun updates the
-- definition (window, draw limit, state, weights) but never touches the prize stock, so it cannot
-- reset a lottery that is running (S3-8); with load = 0 it only updates a loaded lottery.
-- Every check comes before the first write.
-- KEYS: meta prizes
-- ARGV: start_ms end_ms per_user_limit state no_prize_weight load prizes...
-- RETURNS: {code:int version:int [held_total:int held_kind:str]}
-- `prizes` are triples: prize_id weight stock.
-- Returns {1, version} when the stock was loaded by this call, {0, version} when it was loaded
-- before, {-4, 0} when it is not loaded and load = 0.
local meta, prizes = KEYS[1], KEYS[2]
if not (tonumber(ARGV[1]) and tonumber(ARGV[2]) and tonumber(ARGV[3])) then
  return redis.error_reply('ERR flashsale: start_ms, end_ms and per_user_limit must be numbers')
end
if ARGV[4] ~= 'open' and ARGV[4] ~= 'closed' then
  return redis.error_reply('ERR flashsale: state must be open or closed')
end
local none, load = tonumber(ARGV[5]), ARGV[6]
if not none or none < 0 or (#ARGV - 6) % 3 ~= 0 or #ARGV == 6 then
  return redis.error_reply('ERR flashsale: no_prize_weight and prize triples expected')
end
local weights, stock, total = {}, {}, 0
for i = 7, #ARGV, 3 do
  local w, s = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if not w or w < 1 or not s or s < 0 or string.find(ARGV[i], '[ :]') then
    return redis.error_reply('ERR flashsale: prize ' .. ARGV[i] .. ': bad id, weight or stock')
  end
  weights[#weights + 1] = ARGV[i] .. ':' .. ARGV[i + 1]
  stock[#stock + 1] = ARGV[i]
  stock[#stock + 1] = ARGV[i + 2]
  total = total + s
end
local loaded_kind = redis.call('HGET', meta, 'kind')
-- load = 2 (a create): a lottery Redis holds with other prizes, or a sale, is not touched:
-- {-9, 0, total held, kind held}.
if loaded_kind and load == '2' then
  local held = tonumber(redis.call('HGET', meta, 'total') or '-1')
  local same = loaded_kind == 'lottery' and held == total and
    redis.call('HGET', meta, 'weights') == table.concat(weights, ' ')
  for i = 1, #stock, 2 do
    same = same and tonumber(redis.call('HGET', prizes, stock[i]) or '-1') == tonumber(stock[i + 1])
  end
  if not same then return {-9, 0, held, loaded_kind} end
end
if loaded_kind and loaded_kind ~= 'lottery' then
  return redis.error_reply('ERR flashsale: a loaded sale cannot become a lottery')
end
if not loaded_kind and load == '0' then return {-4, 0} end

redis.call('HSET', meta, 'start_ms', ARGV[1], 'end_ms', ARGV[2], 'limit', ARGV[3],
  'state', ARGV[4], 'none', ARGV[5], 'weights', table.concat(weights, ' '))
if loaded_kind then
  return {0, redis.call('HINCRBY', meta, 'version', 1)}
end
redis.call('DEL', prizes)
redis.call('HSET', prizes, unpack(stock))
redis.call('HSET', meta, 'kind', 'lottery', 'total', total, 'released', 0)
return {1, redis.call('HINCRBY', meta, 'version', 1)}
