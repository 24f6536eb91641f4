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
-- The lean path, decided optimistically and undone on the rare paths (the script is atomic, so
-- nobody sees the intermediate state): the buyer's count is raised first (over the limit: lowered
-- again), then the stock taken (short: both given back), then the order record created only if
-- the order id is new (it existed: all undone, the recorded order replayed). Every outcome other
-- than reserved looks for the order id's record first, so a retry of a recorded order still
-- replays. Redis commands on that path:
--   a single reservation: five (HMGET meta, HINCRBY buyers, DECRBY stock, HSETNX orders, XADD);
--   a batch of n: n + 6 (HMGET meta; HMGET of the batch's buyers and of its order ids, then the
--     counts and records decided kept in Lua; DECRBY of the stock the rest of the batch asks for,
--     at the first request that takes stock, the units not sold given back with one INCRBY at the
--     end; one HSET of the new counts and one of the new records; an XADD per reservation).
--   Writes come in that order, the XADDs last: a command that fails midway (the script stops
--   there) leaves stock taken and unsold or a record without its intent, never an intent without
--   its count, stock and record.
-- Itemised stock: LPOP instead of DECRBY (the units the rest of the batch asks for, handed out in
-- order; the ones left over pushed back to the head in their order), and one LLEN per batch.
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
local n = #ARGV / W
-- Every request is checked before anything is written: a bad one refuses the whole call.
local qtys, nows, ttls, iks = {}, {}, {}, {}
for r = 1, n do
  local i = (r - 1) * W + 1
  local qty, now, ttl, slot = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]),
    tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  if not qty or qty < 1 or qty % 1 ~= 0 or not now or not ttl or not slot or slot % 1 ~= 0
      or slot < 0 or 6 + slot > #KEYS or (slot > 0) ~= (ttl > 0) then
    return redis.error_reply('ERR flashsale: quantity must be an integer >= 1, now_ms and '
      .. 'idem_ttl_ms numbers, idem_slot a declared key (with idem_ttl_ms > 0)')
  end
  qtys[r], nows[r], ttls[r], iks[r] = qty, now, ttl, 6 + slot
end

local reply = {}
local function answer(code, replayed, remaining, bought, id, items)
  local k = #reply
  reply[k + 1], reply[k + 2], reply[k + 3] = code, replayed, remaining
  reply[k + 4], reply[k + 5], reply[k + 6] = bought, id, items
end
local m = redis.call('HMGET', KEYS[1], 'state', 'start_ms', 'end_ms', 'limit', 'kind')
if not m[1] then
  for _ = 1, n do answer(-4, 0, 0, 0, '', '') end
  return reply
end
local open, start_ms, end_ms = m[1] == 'open', tonumber(m[2]), tonumber(m[3])
local limit, counted = tonumber(m[4]), m[5] == 'counted'
-- A batch keeps the buyers' counts and the order records in Lua (read once, written once); a
-- single reservation (or a batch too large to unpack at once) reads and writes them directly.
local bulk = n > 1 and n <= 1000

-- The buyers' counts. bulk: `held` (user -> count) as read, `held_new` what this call makes it.
local held, held_new
local function load_held()
  local users = {}
  for r = 1, n do users[r] = ARGV[(r - 1) * W + 2] end
  local got = redis.call('HMGET', KEYS[4], unpack(users))
  held, held_new = {}, {}
  for r = 1, n do
    local v = tonumber(got[r] or '0')
    held[users[r]], held_new[users[r]] = v, v
  end
end
-- Raises the user's count by qty; the count now.
local function hold(user, qty)
  if not bulk then return redis.call('HINCRBY', KEYS[4], user, qty) end
  if not held then load_held() end
  local now_held = held_new[user] + qty
  held_new[user] = now_held
  return now_held
end
-- Lowers it again (to nothing: the field goes, as if never raised).
local function unhold(user, qty, now_held)
  if bulk then
    held_new[user] = now_held - qty
  elseif now_held == qty then
    redis.call('HDEL', KEYS[4], user)
  else
    redis.call('HINCRBY', KEYS[4], user, -qty)
  end
end

-- The order records. bulk: `records` (order id -> record, false: none) as read plus the ones
-- this call creates, listed in `created`.
local records, created = nil, {}
local function record_of(id)
  if not bulk then return redis.call('HGET', KEYS[5], id) end
  if not records then
    local ids = {}
    for r = 1, n do ids[r] = ARGV[(r - 1) * W + 1] end
    local got = redis.call('HMGET', KEYS[5], unpack(ids))
    records = {}
    for r = 1, n do records[ids[r]] = got[r] end
  end
  local record = records[id]
  if record == nil then  -- an order id from an idempotency key, not one of the batch's
    record = redis.call('HGET', KEYS[5], id)
    records[id] = record
  end
  return record
end
-- Records the order unless its id exists; whether it was new.
local function create(id, record)
  if not bulk then return redis.call('HSETNX', KEYS[5], id, record) == 1 end
  if record_of(id) then return false end
  records[id] = record
  created[#created + 1] = id
  return true
end

-- The stock. `left`: the units left, once known (read once, then kept up to date here). The
-- first request that takes stock takes what the rest of the batch asks for (`taken`); `sold`
-- of it is sold; the rest goes back at the end. Itemised: `pool` holds the items taken, `used`
-- of them handed out.
local left, took, taken, sold, pool, used = nil, false, 0, 0, nil, 0
local function remaining()
  if not left then
    if counted then left = tonumber(redis.call('GET', KEYS[2]) or '0')
    else left = redis.call('LLEN', KEYS[3]) end
  end
  return left
end
-- Takes stock for requests r..n (once per call); afterwards `left` counts every unit.
local function take(r)
  local want = 0
  for k = r, n do want = want + qtys[k] end
  took, taken = true, want
  if counted then
    left = redis.call('DECRBY', KEYS[2], want) + want
  else
    pool = redis.call('LPOP', KEYS[3], want) or {}
    -- Fewer than asked: the list is empty now.
    left = #pool < want and #pool or #pool + redis.call('LLEN', KEYS[3])
  end
end
-- Gives back what was taken and not sold.
local function give_back()
  if taken == sold then return end
  if counted then
    redis.call('INCRBY', KEYS[2], taken - sold)
    return
  end
  -- LPUSH of the items left over, last first, so they are back at the head in their order;
  -- unpack() is bounded by the Lua stack: in chunks.
  local back = {}
  for k = #pool, used + 1, -1 do back[#back + 1] = pool[k] end
  for k = 1, #back, 1000 do
    redis.call('LPUSH', KEYS[3], unpack(back, k, math.min(k + 999, #back)))
  end
end

-- The reply for an order already recorded: the same reservation again (false: no such order).
local function replay(order_id, user)
  local record = record_of(order_id)
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

-- The intents of the reservations, appended to the stream after every other write.
local intents = {}
local function decide(r)
  local i = (r - 1) * W + 1
  local id, user, qty, ik, ttl, now = ARGV[i], ARGV[i + 1], qtys[r], iks[r], ttls[r], nows[r]
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
  local now_held = hold(user, qty)
  if now_held > limit then
    unhold(user, qty, now_held)
    return refuse(0, now_held - qty, id, user, ik, ttl)
  end
  if not took then take(r) end
  if left < qty then
    unhold(user, qty, now_held)
    return refuse(-1, now_held - qty, id, user, ik, ttl)
  end
  local item_list = ''
  if not counted then
    item_list = table.concat(pool, ' ', used + 1, used + qty)
  end
  local ts = ARGV[i + 3]
  if not create(id, 'R|' .. user .. '|' .. qty .. '|' .. ts .. '|' .. item_list) then
    unhold(user, qty, now_held)
    return replay(id, user)
  end
  left, sold = left - qty, sold + qty
  if not counted then used = used + qty end
  local k = #intents
  intents[k + 1], intents[k + 2], intents[k + 3], intents[k + 4] = id, user, qty, item_list
  intents[k + 5] = ts
  if ik > 6 then redis.call('SET', KEYS[ik], '1|0|' .. id, 'PX', ttl) end
  answer(1, 0, left, now_held, id, item_list)
end

for r = 1, n do decide(r) end
if held then
  local changed = {}
  for user, v in pairs(held_new) do
    if v ~= held[user] then
      changed[#changed + 1] = user
      changed[#changed + 1] = string.format('%d', v)  -- not '1e+15': an exact integer
    end
  end
  if #changed > 0 then redis.call('HSET', KEYS[4], unpack(changed)) end
end
if #created > 0 then
  local fields = {}
  for k = 1, #created do
    fields[2 * k - 1], fields[2 * k] = created[k], records[created[k]]
  end
  redis.call('HSET', KEYS[5], unpack(fields))
end
give_back()
-- `limit`: the per-user limit the order was sold under; the record decides with it (a limit
-- changed before the order is persisted does not change what the order was).
for k = 1, #intents, 5 do
  redis.call('XADD', KEYS[6], '*', 'order_id', intents[k], 'user_id', intents[k + 1],
    'quantity', intents[k + 2], 'items', intents[k + 3], 'ts', intents[k + 4], 'limit', m[4])
end
return reply
