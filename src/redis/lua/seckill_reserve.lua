#!lua
-- Takes `quantity` units for a user and records the order intent, all or nothing (S0-2, S3-1):
-- state, window, per-user limit and stock are checked first; only when all pass does the script
-- write, and then it writes everything: stock, the buyer's count, the order record, the user's
-- order index and the order intent on the activity's stream (the outbox the order pipeline
-- persists).
-- Two ways to replay instead of deciding again:
--   the order id: a retry with the same id (after a reply that never came) returns the first
--     call's reservation and takes nothing more;
--   an idempotency key (idem_ttl_ms > 0): the outcome of the first call with that key (any
--     outcome the script decided) is kept for idem_ttl_ms and returned to every retry, with the
--     first call's order id.
-- KEYS: meta stock items buyers orders stream user_orders idem
-- ARGV: order_id user_id quantity now_ms idem_ttl_ms
-- RETURNS: {code:int replayed:int remaining:int bought:int order_id:str item:str...}
-- Returns {code, replayed, remaining, bought, order_id, item...}; code 1 reserved, 0 limit
-- reached (bought = units the user holds), -1 sold out, -2 not started, -3 ended, -4 unknown
-- activity, -5 closed, -6 order id used by another user.
local m = redis.call('HMGET', KEYS[1], 'state', 'start_ms', 'end_ms', 'limit', 'kind')
if not m[1] then return {-4, 0, 0, 0, ''} end
local order_id, user = ARGV[1], ARGV[2]
local qty, now, idem_ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not qty or qty < 1 or qty % 1 ~= 0 or not now or not idem_ttl then
  return redis.error_reply('ERR flashsale: quantity must be an integer >= 1, now_ms and '
    .. 'idem_ttl_ms numbers')
end
local counted = m[5] == 'counted'
local function remaining()
  if counted then return tonumber(redis.call('GET', KEYS[2]) or '0') end
  return redis.call('LLEN', KEYS[3])
end
-- The reply for an order already recorded: the same reservation again.
local function replay(id)
  local record = redis.call('HGET', KEYS[5], id)
  if not record then return nil end
  local who, items = string.match(record, '^%a|([^|]*)|%d+|%d+|(.*)$')
  if who ~= user then return {-6, 0, 0, 0, ''} end
  local reply = {1, 1, remaining(), 0, id}
  for item in string.gmatch(items, '%S+') do reply[#reply + 1] = item end
  return reply
end

if idem_ttl > 0 then
  local first = redis.call('GET', KEYS[8])
  if first then
    local code, bought, first_order = string.match(first, '^(-?%d+)|(%d+)|(.*)$')
    if tonumber(code) == 1 then return replay(first_order) end
    return {tonumber(code), 1, remaining(), tonumber(bought), first_order}
  end
end
local prior = replay(order_id)
if prior then return prior end

local function decided(code, bought)
  if idem_ttl > 0 then
    redis.call('SET', KEYS[8], code .. '|' .. bought .. '|' .. order_id, 'PX', idem_ttl)
  end
  return {code, 0, remaining(), bought, order_id}
end
if m[1] ~= 'open' then return decided(-5, 0) end
if now < tonumber(m[2]) then return decided(-2, 0) end
if now >= tonumber(m[3]) then return decided(-3, 0) end
local bought = tonumber(redis.call('HGET', KEYS[4], user) or '0')
if bought + qty > tonumber(m[4]) then return decided(0, bought) end
local items, left
if counted then
  left = tonumber(redis.call('GET', KEYS[2]) or '0') - qty
  if left < 0 then return decided(-1, bought) end
  redis.call('DECRBY', KEYS[2], qty)
else
  left = redis.call('LLEN', KEYS[3]) - qty
  if left < 0 then return decided(-1, bought) end
  items = redis.call('LPOP', KEYS[3], qty)
end

local item_list = items and table.concat(items, ' ') or ''
redis.call('HINCRBY', KEYS[4], user, qty)
redis.call('HINCRBY', KEYS[1], 'reserved', qty)
redis.call('HSET', KEYS[5], order_id, 'R|' .. user .. '|' .. qty .. '|' .. ARGV[4] .. '|' .. item_list)
local mine = redis.call('HGET', KEYS[7], user)
redis.call('HSET', KEYS[7], user, mine and (mine .. ' ' .. order_id) or order_id)
-- `limit`: the per-user limit the order was sold under; the record decides with it (a limit
-- changed before the order is persisted does not change what the order was).
redis.call('XADD', KEYS[6], '*', 'order_id', order_id, 'user_id', user, 'quantity', qty,
  'items', item_list, 'ts', ARGV[4], 'limit', m[4])
if idem_ttl > 0 then
  redis.call('SET', KEYS[8], '1|0|' .. order_id, 'PX', idem_ttl)
end
local reply = {1, 0, left, bought + qty, order_id}
if items then
  for i = 1, #items do reply[5 + i] = items[i] end
end
return reply
