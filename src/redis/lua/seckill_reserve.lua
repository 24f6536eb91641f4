#!lua
-- Decides a batch of reservations of one activity, in order, each exactly as a call with that
-- request alone would decide it at that point (a single reservation is a batch of one: there is
-- one copy of the rules). Each takes `quantity` units for a user and records the order intent,
-- all or nothing (S0-2, S3-1): state, window, per-user limit and stock; a reservation writes the
-- buyer's count, the stock, the order record and the order intent on the activity's stream (the
-- outbox the order pipeline persists).
-- Two ways to replay instead of deciding again:
--   the order id: a retry with the same id (after a reply that never came) returns the first
--     call's reservation and takes nothing more, whatever the sale's state is now (closed, sold
--     out, the user at the limit);
--   an idempotency key (idem_ttl_ms > 0): the outcome of the first call with that key (any
--     outcome the script decided) is kept for idem_ttl_ms and returned to every retry, with the
--     first call's order id.
-- The lean path: five Redis commands for a counted reservation without an idempotency key (the
-- meta HMGET once per batch, then HINCRBY buyers, DECRBY stock, HSETNX orders, XADD). It decides
-- optimistically and undoes on the rare paths; the script is atomic, so nobody sees the
-- intermediate state: the buyer's count is raised first (over the limit: lowered again), then the
-- stock taken (short: both given back), then the order record created only if the order id is
-- new (it existed: all undone, the recorded order replayed). Every outcome other than reserved
-- looks for the order id's record first, so a retry of a recorded order still replays. Itemised
-- stock: LPOP instead of DECRBY, and one LLEN per batch for the units left.
-- Not written (derived where read): `meta.reserved` (= total + released + oversold - remaining,
-- seckill_status.lua), and no per-user order index: a user's orders not yet persisted are read
-- from the stream's tail (seckill_user_orders.lua), which holds every intent until the order
-- pipeline has persisted it.
-- KEYS: meta stock items buyers orders stream idem...
-- ARGV: request...
-- Each request is six arguments: order_id user_id quantity now_ms idem_ttl_ms idem_slot;
-- idem_slot > 0 names the request's idempotency key, KEYS[6 + idem_slot] (idem_ttl_ms > 0
-- then), 0 none.
-- RETURNS: {(code:int replayed:int remaining:int bought:int order_id:str items:str)...}
-- Returns one group per request, in order: {code, replayed, remaining, bought, order_id, items};
-- items: the item ids taken (itemised stock), space-separated. code 1 reserved, 0 limit reached
-- (bought = units the user holds), -1 sold out, -2 not started, -3 ended, -4 unknown activity,
-- -5 closed, -6 order id used by another user.
local W = 6
if #ARGV % W ~= 0 then
  return redis.error_reply('ERR flashsale: requests of six arguments expected')
end
-- Every request is checked before anything is written: a bad one refuses the whole call.
for i = 1, #ARGV, W do
  local qty, now, ttl, slot = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]),
    tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  if not qty or qty < 1 or qty % 1 ~= 0 or not now or not ttl or not slot or slot % 1 ~= 0
      or slot < 0 or 6 + slot > #KEYS or (slot > 0) ~= (ttl > 0) then
    return redis.error_reply('ERR flashsale: quantity must be an integer >= 1, now_ms and '
      .. 'idem_ttl_ms numbers, idem_slot a declared key (with idem_ttl_ms > 0)')
  end
end

local reply = {}
local function answer(code, replayed, remaining, bought, id, items)
  local n = #reply
  reply[n + 1], reply[n + 2], reply[n + 3] = code, replayed, remaining
  reply[n + 4], reply[n + 5], reply[n + 6] = bought, id, items
end
local m = redis.call('HMGET', KEYS[1], 'state', 'start_ms', 'end_ms', 'limit', 'kind')
if not m[1] then
  for _ = 1, #ARGV, W do answer(-4, 0, 0, 0, '', '') end
  return reply
end
local open, start_ms, end_ms = m[1] == 'open', tonumber(m[2]), tonumber(m[3])
local limit, counted = tonumber(m[4]), m[5] == 'counted'

-- Units left, read once and then kept up to date by this script's own writes.
local left
local function remaining()
  if not left then
    if counted then left = tonumber(redis.call('GET', KEYS[2]) or '0')
    else left = redis.call('LLEN', KEYS[3]) end
  end
  return left
end
-- Gives popped items back to the head of the list, in their order.
local function unpop(items)
  local back = {}
  for k = #items, 1, -1 do back[#back + 1] = items[k] end
  redis.call('LPUSH', KEYS[3], unpack(back))
end

-- The reply for an order already recorded: the same reservation again (false: no such order).
local function replay(order_id, user)
  local record = redis.call('HGET', KEYS[5], order_id)
  if not record then return false end
  local who, items = string.match(record, '^%a|([^|]*)|%d+|%d+|(.*)$')
  if who ~= user then
    answer(-6, 0, 0, 0, '', '')
  else
    answer(1, 1, remaining(), 0, order_id, items)
  end
  return true
end
-- An outcome other than reserved: the order id's record first, then the outcome (kept for the
-- idempotency key KEYS[ik], if any).
local function refuse(code, bought, id, user, ik, ttl)
  if replay(id, user) then return end
  if ik > 6 then redis.call('SET', KEYS[ik], code .. '|' .. bought .. '|' .. id, 'PX', ttl) end
  answer(code, 0, remaining(), bought, id, '')
end
-- Lowers the buyer's count again (to nothing: the field goes, as if never raised).
local function unhold(user, qty, held)
  if held == qty then
    redis.call('HDEL', KEYS[4], user)
  else
    redis.call('HINCRBY', KEYS[4], user, -qty)
  end
end

local function decide(id, user, qty, ts, now, ttl, ik)
  if ik > 6 then
    local first = redis.call('GET', KEYS[ik])
    if first then
      local code, bought, first_order = string.match(first, '^(-?%d+)|(%d+)|(.*)$')
      if tonumber(code) == 1 and replay(first_order, user) then return end
      return answer(tonumber(code), 1, remaining(), tonumber(bought), first_order, '')
    end
  end
  if not open then return refuse(-5, 0, id, user, ik, ttl) end
  if now < start_ms then return refuse(-2, 0, id, user, ik, ttl) end
  if now >= end_ms then return refuse(-3, 0, id, user, ik, ttl) end
  local held = redis.call('HINCRBY', KEYS[4], user, qty)
  if held > limit then
    unhold(user, qty, held)
    return refuse(0, held - qty, id, user, ik, ttl)
  end
  local items
  if counted then
    left = redis.call('DECRBY', KEYS[2], qty)
    if left < 0 then
      left = redis.call('INCRBY', KEYS[2], qty)
      unhold(user, qty, held)
      return refuse(-1, held - qty, id, user, ik, ttl)
    end
  else
    items = redis.call('LPOP', KEYS[3], qty) or {}
    if #items < qty then
      if #items > 0 then unpop(items) end
      left = #items
      unhold(user, qty, held)
      return refuse(-1, held - qty, id, user, ik, ttl)
    end
    if left then left = left - qty else left = redis.call('LLEN', KEYS[3]) end
  end
  local item_list = items and table.concat(items, ' ') or ''
  local record = 'R|' .. user .. '|' .. qty .. '|' .. ts .. '|' .. item_list
  if redis.call('HSETNX', KEYS[5], id, record) == 0 then
    if counted then
      left = redis.call('INCRBY', KEYS[2], qty)
    else
      unpop(items)
      left = left + qty
    end
    unhold(user, qty, held)
    return replay(id, user)
  end
  -- `limit`: the per-user limit the order was sold under; the record decides with it (a limit
  -- changed before the order is persisted does not change what the order was).
  redis.call('XADD', KEYS[6], '*', 'order_id', id, 'user_id', user, 'quantity', qty,
    'items', item_list, 'ts', ts, 'limit', m[4])
  if ik > 6 then redis.call('SET', KEYS[ik], '1|0|' .. id, 'PX', ttl) end
  answer(1, 0, left, held, id, item_list)
end

for i = 1, #ARGV, W do
  decide(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], tonumber(ARGV[i + 3]),
    tonumber(ARGV[i + 4]), 6 + tonumber(ARGV[i + 5]))
end
return reply
