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
-- Replays, as in sale_reserve: a retry with the same order id returns the first draw; with
-- an idempotency key (idem_ttl_ms > 0) a draw made (won or no prize) is kept and returned, and a
-- refusal is not (it took nothing: a retry is decided again, and fresh keys cost Redis nothing);
-- a win replayed is reported as its record is now (1 won, -11 refused: dead-lettered, -10
-- released). A queued draw uses its ticket as that key: the ticket holds "P|user" until this
-- script decides it, then "code|draws|order_id|user", whatever the outcome (the ticket is
-- polled for it; the user's pending tickets are bounded by lottery_enqueue.lua).
-- Fencing: a draw by the holder of a lock (a strict first-come-first-served queue consumer)
-- passes its fencing token; if another holder has taken the lock since, the call is refused
-- (a FENCED error, for the whole batch) before anything is written. fence = 0: no check.
-- The lean path: the meta HMGET and the prizes' HMGET (the choice needs every prize's stock; once
-- per batch, then kept up to date by the script's own writes), HINCRBY
-- of the user's draws, HSETNX of the draw's record (a new order id only: it existed, the count is
-- lowered again and the draw replayed); a win adds HINCRBY of its prize and XADD: four commands
-- for a draw that wins nothing, six for a win. Decided optimistically as in sale_reserve.lua:
-- the draw count is raised first and lowered again on the rare paths (the limit reached, every
-- prize gone, a replay), and every outcome but a draw looks for the order id's record first.
-- The script defines no functions (as sale_reserve.lua: Redis would build every closure and
-- its upvalues again on each call): each draw is decided inline in one loop.
-- Not written: `meta.reserved` (derived, activity_status.lua) and a per-user order index (a
-- user's wins not yet persisted are read from the stream, activity_user_orders.lua).
-- The write sequence, as in sale_reserve.lua: floor_epoch and floor_seq are the lowest the
-- caller may find; a Redis behind them refuses the call before anything is written (every
-- request answers -20); a call that records a draw advances it once (HINCRBY meta wseq), and
-- each win's stream entry carries it (s = "wepoch.wseq").
-- KEYS: meta prizes buyers orders stream fence idem...
-- ARGV: floor_epoch floor_seq request...
-- Each request is eight arguments: order_id user_id now_ms idem_ttl_ms pick fallback fence
-- idem_slot; idem_slot > 0 names the request's idempotency key (or ticket), KEYS[6 + idem_slot]
-- (idem_ttl_ms > 0 then), 0 none.
-- RETURNS: {wepoch:int wseq:int
-- RETURNS:   (code:int replayed:int remaining:int draws:int order_id:str prize_id:str)...}
-- Returns the write sequence, then one group per request, in order: {code, replayed, remaining,
-- draws, order_id, prize_id}; code 1 won, 2 no prize, 0 draw limit reached (draws = the user's
-- draws so far), -1 every prize gone, -2 not started, -3 ended, -4 unknown activity, -5 closed,
-- -6 order id used by another user, -20 behind the floor (nothing written); a replayed win
-- (replayed = 1): 1 won, -11 refused, -10 released.
local W, A = 8, 3  -- A: the first request's first argument
local floor_epoch, floor_seq = tonumber(ARGV[1]), tonumber(ARGV[2])
if not floor_epoch or not floor_seq or (#ARGV - 2) % W ~= 0 then
  return redis.error_reply('ERR flashsale: floor_epoch floor_seq, then requests of eight '
    .. 'arguments expected')
end
local fenced
for i = A, #ARGV, W do
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

local m = redis.call('HMGET', KEYS[1], 'state', 'start_ms', 'end_ms', 'limit', 'kind', 'none',
  'weights', 'wepoch', 'wseq')
local wepoch, wseq = tonumber(m[8] or '0'), tonumber(m[9] or '0')
local reply, nr = {wepoch, wseq}, 2
local behind = wepoch < floor_epoch or (wepoch == floor_epoch and wseq < floor_seq)
if behind or not m[1] or m[5] ~= 'lottery' then
  local code = behind and -20 or -4
  for _ = A, #ARGV, W do
    reply[nr + 1], reply[nr + 2], reply[nr + 3] = code, 0, 0
    reply[nr + 4], reply[nr + 5], reply[nr + 6] = 0, '', ''
    nr = nr + 6
  end
  return reply
end
-- The sequence's text for the wins' entries, once the call has recorded a draw.
local seq_text
local open, start_ms, end_ms, limit = m[1] == 'open', tonumber(m[2]), tonumber(m[3]),
  tonumber(m[4])
local none = tonumber(m[6])
local ids, weights = {}, {}
for id, w in string.gmatch(m[7], '([^ :]+):(%d+)') do
  ids[#ids + 1] = id
  weights[#weights + 1] = tonumber(w)
end
local stock = redis.call('HMGET', KEYS[2], unpack(ids))
local remaining, total = 0, none
for k = 1, #ids do
  stock[k] = tonumber(stock[k] or '0')
  remaining = remaining + stock[k]
  total = total + weights[k]
end

for i = A, #ARGV, W do
  local id, user, ts = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local now, ttl, pick, fallback = tonumber(ts), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]),
    tonumber(ARGV[i + 5])
  local ik = 6 + tonumber(ARGV[i + 7])
  -- code: the outcome decided (nil: the order id was recorded before, a replay); held: the
  -- user's draws once raised; draws: what the reply says; prize: the prize won; conflict: a
  -- pending ticket of another user; first_code: the idempotency key's outcome (replayed, with
  -- first_draws and its order id in `look`); ticket: the key is a pending ticket of this user.
  local code, held, draws, prize, conflict = nil, nil, 0, '', false
  local look, first_code, first_draws, ticket = id, nil, nil, false
  repeat
    if ik > 6 then
      local first = redis.call('GET', KEYS[ik])
      if first and string.sub(first, 1, 2) == 'P|' then
        if string.sub(first, 3) ~= user then conflict = true break end
        ticket = true
      elseif first then
        local c, d, o = string.match(first, '^(-?%d+)|(%d+)|([^|]*)|')
        if not c then
          return redis.error_reply('ERR flashsale: unreadable idempotency record')
        end
        first_code, first_draws, look = tonumber(c), tonumber(d), o
        break
      end
    end
    if not open then code = -5 break end
    if now < start_ms then code = -2 break end
    if now >= end_ms then code = -3 break end
    held = redis.call('HINCRBY', KEYS[3], user, 1)
    if held > limit then code, draws = 0, held - 1 break end
    if remaining == 0 then code, draws = -1, held - 1 break end
    -- The choice: 1. by weight among "no prize" and every prize.
    local target, chosen = pick % total, nil
    if target >= none then
      target = target - none
      for k = 1, #ids do
        if target < weights[k] then chosen = k break end
        target = target - weights[k]
      end
      -- 2. Out of stock: fall through to the prizes left, by weight.
      if stock[chosen] == 0 then
        local left = 0
        for k = 1, #ids do if stock[k] > 0 then left = left + weights[k] end end
        target, chosen = fallback % left, nil
        for k = 1, #ids do
          if stock[k] > 0 then
            if target < weights[k] then chosen = k break end
            target = target - weights[k]
          end
        end
      end
    end
    prize = chosen and ids[chosen] or ''
    local record = (chosen and 'R|' or 'N|') .. user .. (chosen and '|1|' or '|0|') .. ts .. '|'
      .. prize
    if redis.call('HSETNX', KEYS[4], id, record) == 0 then break end
    if not seq_text then
      reply[2] = redis.call('HINCRBY', KEYS[1], 'wseq', 1)
      seq_text = wepoch .. '.' .. reply[2]
    end
    draws = held
    if not chosen then
      code = 2
    else
      code = 1
      redis.call('HINCRBY', KEYS[2], prize, -1)
      stock[chosen] = stock[chosen] - 1
      remaining = remaining - 1
      -- The packed intent, as sale_reserve.lua writes it, with the draw number.
      redis.call('XADD', KEYS[5], '*', 's', seq_text, 'o', id .. '|' .. user .. '|1|' .. ts .. '|'
        .. m[4] .. '|' .. held .. '|' .. prize)
    end
  until true
  if held and code ~= 1 and code ~= 2 then
    -- The draw count lowered again (to nothing: the field goes, as if never raised).
    if held == 1 then
      redis.call('HDEL', KEYS[3], user)
    else
      redis.call('HINCRBY', KEYS[3], user, -1)
    end
  end

  if conflict then
    reply[nr + 1], reply[nr + 2], reply[nr + 3] = -6, 0, 0
    reply[nr + 4], reply[nr + 5], reply[nr + 6] = 0, '', ''
  elseif code == 1 or code == 2 then
    if ik > 6 then
      redis.call('SET', KEYS[ik], code .. '|' .. draws .. '|' .. id .. '|' .. user, 'PX', ttl)
    end
    reply[nr + 1], reply[nr + 2], reply[nr + 3] = code, 0, remaining
    reply[nr + 4], reply[nr + 5], reply[nr + 6] = draws, id, prize
  else
    -- Any other outcome: the order id's record first (for an idempotency key's draw or win:
    -- that order's record), so a retry of a recorded draw replays.
    local record = (not first_code or first_code == 1 or first_code == 2)
      and redis.call('HGET', KEYS[4], look)
    if record then
      local kind, who, won = string.match(record, '^(%a)|([^|]*)|%d+|%d+|(.*)$')
      if who ~= user then
        reply[nr + 1], reply[nr + 2], reply[nr + 3] = -6, 0, 0
        reply[nr + 4], reply[nr + 5], reply[nr + 6] = 0, '', ''
      elseif kind == 'N' then
        reply[nr + 1], reply[nr + 2], reply[nr + 3] = 2, 1, remaining
        reply[nr + 4], reply[nr + 5], reply[nr + 6] = 0, look, ''
      else
        -- The win as it is now: R won, F refused, X released.
        reply[nr + 1] = (kind == 'R' and 1) or (kind == 'F' and -11) or -10
        reply[nr + 2], reply[nr + 3] = 1, remaining
        reply[nr + 4], reply[nr + 5], reply[nr + 6] = first_draws or 0, look, won
      end
    elseif first_code then
      reply[nr + 1], reply[nr + 2], reply[nr + 3] = first_code, 1, remaining
      reply[nr + 4], reply[nr + 5], reply[nr + 6] = first_draws, look, ''
    else
      if ticket then
        redis.call('SET', KEYS[ik], code .. '|' .. draws .. '|' .. id .. '|' .. user, 'PX', ttl)
      end
      reply[nr + 1], reply[nr + 2], reply[nr + 3] = code, 0, remaining
      reply[nr + 4], reply[nr + 5], reply[nr + 6] = draws, id, ''
    end
  end
  nr = nr + 6
end
return reply
