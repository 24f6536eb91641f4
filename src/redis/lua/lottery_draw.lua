#!lua
-- One draw of a lottery, all or nothing (S3-1): state, window and the user's draw limit are
-- checked first; then a prize is chosen by weight and, if it is won, its stock is decremented,
-- the win recorded and its intent appended to the activity's stream (the outbox the order
-- pipeline persists, unique on activity, user and draw number).
--
-- The choice (deterministic: the caller's CSPRNG supplies `pick` and `fallback`, integers in
-- [0, 2^52)):
--   1. pick % W chooses among "no prize" and every prize, by weight, as if every prize were in
--      stock (W = no-prize weight + all prize weights);
--   2. a prize chosen that is out falls through: fallback % W' chooses among the prizes still in
--      stock, by weight (W' = their weights). So the chance of winning something stays the same
--      while any prize is left, and the lottery answers -1 only when every prize is gone.
-- Replays, as in seckill_reserve: a retry with the same order id returns the first draw; with
-- an idempotency key (idem_ttl_ms > 0) the first outcome is kept and returned. A queued draw
-- uses its ticket as that key: the ticket holds "P|user" until this script decides it, then
-- "code|draws|order_id|user".
-- Fencing: a draw by the holder of a lock (a strict first-come-first-served queue consumer)
-- passes its fencing token; if another holder has taken the lock since, the draw is refused
-- before anything is written. fence = 0: no check.
-- The lean path: the meta HMGET, the prizes' HMGET (the choice needs every prize's stock), HINCRBY
-- of the user's draws, HSETNX of the draw's record (a new order id only: it existed, the count is
-- lowered again and the draw replayed); a win adds HINCRBY of its prize and XADD: four commands
-- for a draw that wins nothing, six for a win. Decided optimistically as in seckill_reserve.lua:
-- the draw count is raised first and lowered again on the rare paths (the limit reached, every
-- prize gone, a replay), and every outcome but a draw looks for the order id's record first.
-- Not written: `meta.reserved` (derived, seckill_status.lua) and a per-user order index (a
-- user's wins not yet persisted are read from the stream, seckill_user_orders.lua).
-- KEYS: meta prizes buyers orders stream idem fence
-- ARGV: order_id user_id now_ms idem_ttl_ms pick fallback fence
-- RETURNS: {code:int replayed:int remaining:int draws:int order_id:str prize_id:str}
-- Returns {code, replayed, remaining, draws, order_id, prize_id}; code 1 won, 2 no prize,
-- 0 draw limit reached (draws = the user's draws so far), -1 every prize gone, -2 not started,
-- -3 ended, -4 unknown activity, -5 closed, -6 order id used by another user.
local fence = tonumber(ARGV[7])
if fence and fence > 0 and tonumber(redis.call('GET', KEYS[7]) or '0') ~= fence then
  return redis.error_reply('FENCED flashsale: a newer holder of the queue lock exists')
end
local m = redis.call('HMGET', KEYS[1], 'state', 'start_ms', 'end_ms', 'limit', 'kind', 'none',
  'weights')
if not m[1] or m[5] ~= 'lottery' then return {-4, 0, 0, 0, '', ''} end
local order_id, user = ARGV[1], ARGV[2]
local now, idem_ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local pick, fallback = tonumber(ARGV[5]), tonumber(ARGV[6])
if not now or not idem_ttl or not pick or not fallback or pick < 0 or fallback < 0 then
  return redis.error_reply('ERR flashsale: now_ms, idem_ttl_ms, pick and fallback must be '
    .. 'numbers >= 0')
end
local ids, weights = {}, {}
for id, w in string.gmatch(m[7], '([^ :]+):(%d+)') do
  ids[#ids + 1] = id
  weights[#weights + 1] = tonumber(w)
end
local stock = redis.call('HMGET', KEYS[2], unpack(ids))
local remaining = 0
for i = 1, #ids do
  stock[i] = tonumber(stock[i] or '0')
  remaining = remaining + stock[i]
end

local function replay(id)
  local record = redis.call('HGET', KEYS[4], id)
  if not record then return nil end
  local kind, who, prize = string.match(record, '^(%a)|([^|]*)|%d+|%d+|(.*)$')
  if who ~= user then return {-6, 0, 0, 0, '', ''} end
  if kind == 'N' then return {2, 1, remaining, 0, id, ''} end
  return {1, 1, remaining, 0, id, prize}
end
if idem_ttl > 0 then
  local first = redis.call('GET', KEYS[6])
  if first and string.sub(first, 1, 2) == 'P|' then
    if string.sub(first, 3) ~= user then return {-6, 0, 0, 0, '', ''} end
  elseif first then
    local code, draws, first_order = string.match(first, '^(-?%d+)|(%d+)|([^|]*)|')
    if not code then return redis.error_reply('ERR flashsale: unreadable idempotency record') end
    code = tonumber(code)
    if code == 1 or code == 2 then
      local prior = replay(first_order)
      if prior then return prior end
    end
    return {code, 1, remaining, tonumber(draws), first_order, ''}
  end
end
local function decided(code, draws, prize)
  if idem_ttl > 0 then
    redis.call('SET', KEYS[6], code .. '|' .. draws .. '|' .. order_id .. '|' .. user, 'PX',
      idem_ttl)
  end
  return {code, 0, remaining, draws, order_id, prize}
end
-- An outcome other than a draw: the order id's record first.
local function refuse(code, draws)
  local prior = replay(order_id)
  if prior then return prior end
  return decided(code, draws, '')
end
if m[1] ~= 'open' then return refuse(-5, 0) end
if now < tonumber(m[2]) then return refuse(-2, 0) end
if now >= tonumber(m[3]) then return refuse(-3, 0) end
local draws = redis.call('HINCRBY', KEYS[3], user, 1)
local function undraw()
  if draws == 1 then
    redis.call('HDEL', KEYS[3], user)
  else
    redis.call('HINCRBY', KEYS[3], user, -1)
  end
end
if draws > tonumber(m[4]) then
  undraw()
  return refuse(0, draws - 1)
end
if remaining == 0 then
  undraw()
  return refuse(-1, draws - 1)
end

-- 1. By weight among "no prize" and every prize.
local total = tonumber(m[6])
for i = 1, #ids do total = total + weights[i] end
local target, chosen = pick % total, nil
if target >= tonumber(m[6]) then
  target = target - tonumber(m[6])
  for i = 1, #ids do
    if target < weights[i] then chosen = i break end
    target = target - weights[i]
  end
  -- 2. Out of stock: fall through to the prizes left, by weight.
  if stock[chosen] == 0 then
    local left = 0
    for i = 1, #ids do if stock[i] > 0 then left = left + weights[i] end end
    target, chosen = fallback % left, nil
    for i = 1, #ids do
      if stock[i] > 0 then
        if target < weights[i] then chosen = i break end
        target = target - weights[i]
      end
    end
  end
end

local prize = chosen and ids[chosen] or ''
local record = (chosen and 'R|' or 'N|') .. user .. (chosen and '|1|' or '|0|') .. ARGV[3] .. '|'
  .. prize
if redis.call('HSETNX', KEYS[4], order_id, record) == 0 then
  undraw()
  return replay(order_id)
end
if not chosen then return decided(2, draws, '') end
redis.call('HINCRBY', KEYS[2], prize, -1)
remaining = remaining - 1
redis.call('XADD', KEYS[5], '*', 'order_id', order_id, 'user_id', user, 'quantity', 1,
  'items', prize, 'ts', ARGV[3], 'draw', draws, 'limit', m[4])
return decided(1, draws, prize)
