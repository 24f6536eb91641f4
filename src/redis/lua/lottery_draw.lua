#!lua
-- A batch of draws of one lottery, decided in order, each exactly as a call with that draw alone
-- would decide it at that point (a single draw is a batch of one). One draw, all or nothing (S3-1): state, window and the user's draw limit are
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
-- passes its fencing token; if another holder has taken the lock since, the call is refused
-- (a FENCED error, for the whole batch) before anything is written. fence = 0: no check.
-- The lean path: the meta HMGET and the prizes' HMGET (the choice needs every prize's stock; once
-- per batch, then kept up to date by the script's own writes), HINCRBY
-- of the user's draws, HSETNX of the draw's record (a new order id only: it existed, the count is
-- lowered again and the draw replayed); a win adds HINCRBY of its prize and XADD: four commands
-- for a draw that wins nothing, six for a win. Decided optimistically as in seckill_reserve.lua:
-- the draw count is raised first and lowered again on the rare paths (the limit reached, every
-- prize gone, a replay), and every outcome but a draw looks for the order id's record first.
-- Not written: `meta.reserved` (derived, seckill_status.lua) and a per-user order index (a
-- user's wins not yet persisted are read from the stream, seckill_user_orders.lua).
-- KEYS: meta prizes buyers orders stream fence idem...
-- ARGV: request...
-- Each request is eight arguments: order_id user_id now_ms idem_ttl_ms pick fallback fence
-- idem_slot; idem_slot > 0 names the request's idempotency key (or ticket), KEYS[6 + idem_slot]
-- (idem_ttl_ms > 0 then), 0 none.
-- RETURNS: {(code:int replayed:int remaining:int draws:int order_id:str prize_id:str)...}
-- Returns one group per request, in order: {code, replayed, remaining, draws, order_id,
-- prize_id}; code 1 won, 2 no prize, 0 draw limit reached (draws = the user's draws so far),
-- -1 every prize gone, -2 not started, -3 ended, -4 unknown activity, -5 closed, -6 order id used
-- by another user.
local W = 8
if #ARGV % W ~= 0 then
  return redis.error_reply('ERR flashsale: requests of eight arguments expected')
end
local fenced
for i = 1, #ARGV, W do
  local now, ttl, pick, fallback, fence, slot = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]),
    tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7])
  if not now or not ttl or not pick or not fallback or pick < 0 or fallback < 0 or not fence
      or not slot or slot % 1 ~= 0 or slot < 0 or 6 + slot > #KEYS or (slot > 0) ~= (ttl > 0) then
    return redis.error_reply('ERR flashsale: now_ms, idem_ttl_ms, pick and fallback must be '
      .. 'numbers >= 0, idem_slot a declared key (with idem_ttl_ms > 0)')
  end
  if fence > 0 then
    fenced = fenced or tonumber(redis.call('GET', KEYS[6]) or '0')
    if fenced ~= fence then
      return redis.error_reply('FENCED flashsale: a newer holder of the queue lock exists')
    end
  end
end

local reply = {}
local function answer(code, replayed, remaining, draws, id, prize)
  local n = #reply
  reply[n + 1], reply[n + 2], reply[n + 3] = code, replayed, remaining
  reply[n + 4], reply[n + 5], reply[n + 6] = draws, id, prize
end
local m = redis.call('HMGET', KEYS[1], 'state', 'start_ms', 'end_ms', 'limit', 'kind', 'none',
  'weights')
if not m[1] or m[5] ~= 'lottery' then
  for _ = 1, #ARGV, W do answer(-4, 0, 0, 0, '', '') end
  return reply
end
local open, start_ms, end_ms, limit = m[1] == 'open', tonumber(m[2]), tonumber(m[3]),
  tonumber(m[4])
local none = tonumber(m[6])
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

-- The reply for a draw already recorded: the same draw again (false: no such order).
local function replay(id, user)
  local record = redis.call('HGET', KEYS[4], id)
  if not record then return false end
  local kind, who, prize = string.match(record, '^(%a)|([^|]*)|%d+|%d+|(.*)$')
  if who ~= user then
    answer(-6, 0, 0, 0, '', '')
  elseif kind == 'N' then
    answer(2, 1, remaining, 0, id, '')
  else
    answer(1, 1, remaining, 0, id, prize)
  end
  return true
end
-- An outcome, kept for the idempotency key KEYS[ik] (if any).
local function decided(code, draws, prize, id, user, ik, ttl)
  if ik > 6 then
    redis.call('SET', KEYS[ik], code .. '|' .. draws .. '|' .. id .. '|' .. user, 'PX', ttl)
  end
  answer(code, 0, remaining, draws, id, prize)
end
-- An outcome other than a draw: the order id's record first.
local function refuse(code, draws, id, user, ik, ttl)
  if replay(id, user) then return end
  decided(code, draws, '', id, user, ik, ttl)
end
-- Lowers the user's draw count again (to nothing: the field goes, as if never raised).
local function undraw(user, draws)
  if draws == 1 then
    redis.call('HDEL', KEYS[3], user)
  else
    redis.call('HINCRBY', KEYS[3], user, -1)
  end
end
-- The prize a draw wins (its index), or nil: no prize.
local function choose(pick, fallback)
  -- 1. By weight among "no prize" and every prize.
  local total = none
  for i = 1, #ids do total = total + weights[i] end
  local target, chosen = pick % total, nil
  if target < none then return nil end
  target = target - none
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
  return chosen
end

local function decide(id, user, ts, now, ttl, pick, fallback, ik)
  if ik > 6 then
    local first = redis.call('GET', KEYS[ik])
    if first and string.sub(first, 1, 2) == 'P|' then
      if string.sub(first, 3) ~= user then return answer(-6, 0, 0, 0, '', '') end
    elseif first then
      local code, draws, first_order = string.match(first, '^(-?%d+)|(%d+)|([^|]*)|')
      if not code then
        return redis.error_reply('ERR flashsale: unreadable idempotency record')
      end
      code = tonumber(code)
      if (code == 1 or code == 2) and replay(first_order, user) then return end
      return answer(code, 1, remaining, tonumber(draws), first_order, '')
    end
  end
  if not open then return refuse(-5, 0, id, user, ik, ttl) end
  if now < start_ms then return refuse(-2, 0, id, user, ik, ttl) end
  if now >= end_ms then return refuse(-3, 0, id, user, ik, ttl) end
  local draws = redis.call('HINCRBY', KEYS[3], user, 1)
  if draws > limit then
    undraw(user, draws)
    return refuse(0, draws - 1, id, user, ik, ttl)
  end
  if remaining == 0 then
    undraw(user, draws)
    return refuse(-1, draws - 1, id, user, ik, ttl)
  end
  local chosen = choose(pick, fallback)
  local prize = chosen and ids[chosen] or ''
  local record = (chosen and 'R|' or 'N|') .. user .. (chosen and '|1|' or '|0|') .. ts .. '|'
    .. prize
  if redis.call('HSETNX', KEYS[4], id, record) == 0 then
    undraw(user, draws)
    replay(id, user)
    return
  end
  if not chosen then return decided(2, draws, '', id, user, ik, ttl) end
  redis.call('HINCRBY', KEYS[2], prize, -1)
  stock[chosen] = stock[chosen] - 1
  remaining = remaining - 1
  redis.call('XADD', KEYS[5], '*', 'order_id', id, 'user_id', user, 'quantity', 1,
    'items', prize, 'ts', ts, 'draw', draws, 'limit', m[4])
  decided(1, draws, prize, id, user, ik, ttl)
end

for i = 1, #ARGV, W do
  local failed = decide(ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 2]),
    tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]), 6 + tonumber(ARGV[i + 7]))
  if failed then return failed end
end
return reply
