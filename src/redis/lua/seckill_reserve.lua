#!lua
-- Takes `quantity` units for a user and records the order intent, all or nothing (S0-2, S3-1):
-- state, window, per-user limit and stock are checked first; only when all pass does the script
-- write, and then it writes everything: stock, the buyer's count, the order record and the order
-- intent on the activity's stream (the outbox the order pipeline persists).
-- The order id makes the call idempotent: a retry with the same id (after a timeout whose fate
-- was unknown) returns the first call's result and takes nothing more.
-- KEYS: meta stock items buyers orders stream
-- ARGV: order_id user_id quantity now_ms
-- Returns {1, replayed, remaining, item...} reserved | {0, bought} limit reached | {-1} sold out |
-- {-2} not started | {-3} ended | {-4} unknown activity | {-5} closed | {-6} order id conflict
local m = redis.call('HMGET', KEYS[1], 'state', 'start_ms', 'end_ms', 'limit', 'kind')
if not m[1] then return {-4} end
local order_id, user = ARGV[1], ARGV[2]
local qty, now = tonumber(ARGV[3]), tonumber(ARGV[4])
if not qty or qty < 1 or qty % 1 ~= 0 or not now then
  return redis.error_reply('ERR flashsale: quantity must be an integer >= 1 and now_ms a number')
end
local counted = m[5] == 'counted'

local prior = redis.call('HGET', KEYS[5], order_id)
if prior then
  local who, items = string.match(prior, '^%a|([^|]*)|%d+|%d+|(.*)$')
  if who ~= user then return {-6} end
  local left
  if counted then left = tonumber(redis.call('GET', KEYS[2]) or '0')
  else left = redis.call('LLEN', KEYS[3]) end
  local reply = {1, 1, left}
  for item in string.gmatch(items, '%S+') do reply[#reply + 1] = item end
  return reply
end

if m[1] ~= 'open' then return {-5} end
if now < tonumber(m[2]) then return {-2} end
if now >= tonumber(m[3]) then return {-3} end
local bought = tonumber(redis.call('HGET', KEYS[4], user) or '0')
if bought + qty > tonumber(m[4]) then return {0, bought} end
local items, left
if counted then
  left = tonumber(redis.call('GET', KEYS[2]) or '0') - qty
  if left < 0 then return {-1} end
  redis.call('DECRBY', KEYS[2], qty)
else
  left = redis.call('LLEN', KEYS[3]) - qty
  if left < 0 then return {-1} end
  items = redis.call('LPOP', KEYS[3], qty)
end

local item_list = items and table.concat(items, ' ') or ''
redis.call('HINCRBY', KEYS[4], user, qty)
redis.call('HINCRBY', KEYS[1], 'reserved', qty)
redis.call('HSET', KEYS[5], order_id, 'R|' .. user .. '|' .. qty .. '|' .. ARGV[4] .. '|' .. item_list)
redis.call('XADD', KEYS[6], '*', 'order_id', order_id, 'user_id', user, 'quantity', qty,
  'items', item_list, 'ts', ARGV[4])
local reply = {1, 0, left}
if items then
  for i = 1, #items do reply[3 + i] = items[i] end
end
return reply
