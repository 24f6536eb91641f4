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
--   an idempotency key (idem_ttl_ms > 0): a reservation made with that key is kept under it for
--     idem_ttl_ms ("1|0|order_id|quantity") and returned to every retry, with the first call's
--     order id; a request with the key and another quantity is another request under a used
--     key, refused (-12), nothing taken (the service checks the activity and the action). A
--     refusal is not kept: it took nothing, and a retry is decided again (what Redis decided once
--     it decides the same way while nothing changed), so a client sending fresh keys costs Redis
--     no memory; keys are kept only for reservations, at most the per-user limit's worth per user
--     at a time. (A refusal an earlier version kept is still replayed until it expires.)
--   A replayed order is reported as it is now, from its record: 1 reserved, -10 cancelled
--   (released: expired unpaid, or given back), -11 refused (dead-lettered), with its own units
--   and items.
-- The lean path, decided optimistically and undone on the rare paths (the script is atomic, so
-- nobody sees the intermediate state): the buyer's count is raised first (over the limit: lowered
-- again), then the stock taken (short: both given back), then the order record created only if
-- the order id is new (it existed: all undone, the recorded order replayed). Every outcome other
-- than reserved looks for the order id's record first, so a retry of a recorded order still
-- replays. Redis commands on that path:
--   a single reservation: five (HMGET meta, HINCRBY buyers, DECRBY stock, HSETNX orders, XADD);
--   a batch of n: seven (HMGET meta; HMGET of the batch's buyers and of its order ids, then the
--     counts and records decided kept in Lua; DECRBY of the stock the rest of the batch asks for,
--     at the first request that takes stock, the units not sold given back with one INCRBY at the
--     end; one HSET of the new counts and one of the new records; one XADD of every intent).
--   Writes come in that order, the XADDs then the reservations' idempotency keys last: a command
--   that fails midway (the script stops there) leaves stock taken and unsold or a record without
--   its intent, never an intent without its count, stock and record, nor a key that replays a
--   reservation without its record and intent.
-- The script defines no functions: Redis runs it as a new call each time, and every closure it
-- made would be built again per call with its upvalues (microseconds per call, more than a
-- Redis command), so each request is decided inline in one loop.
-- Itemised stock: LPOP instead of DECRBY (the units the rest of the batch asks for, handed out in
-- order; the ones left over pushed back to the head in their order), and one LLEN per batch.
-- Not written (derived where read): `meta.reserved` (= total + released + oversold - remaining,
-- activity_status.lua), and no per-user order index: a user's orders not yet persisted are read
-- from the stream's tail (activity_user_orders.lua), which holds every intent until the order
-- pipeline has persisted it.
-- The write sequence (docs/durability.md, "Lost writes caught from the data"): the activity's
-- meta holds `wepoch` and `wseq`, advanced (HINCRBY wseq) by every call that records an order,
-- and carried by the call's stream entry (field s = "wepoch.wseq"). The caller passes the lowest
-- sequence it may find (floor_epoch, floor_seq: the highest it saw acknowledged, at least what the
-- record persisted); a Redis that holds less lost writes it acknowledged (an older snapshot or AOF,
-- a replica promoted without them, an activity wiped), and the call is refused before anything is
-- written: every request answers -20 (behind). The reply starts with the sequence as Redis holds
-- it after the call. The lost-write repair re-bases it (activity_write_rebase.lua).
-- KEYS: meta stock items buyers orders stream idem...
-- ARGV: floor_epoch floor_seq now_ms request...
-- Each request is three arguments: order_id user_id options. options is '' for the usual request
-- (one unit, at the call's now_ms, no idempotency key: nothing more to send, nothing to parse),
-- else "quantity,now_ms,idem_slot,idem_ttl_ms", any field empty for its default (1, the call's
-- now_ms, 0, 0); idem_slot > 0 names the request's idempotency key, KEYS[6 + idem_slot]
-- (idem_ttl_ms > 0 then), 0 none.
-- RETURNS: {wepoch:int wseq:int left:int row:int|str...}
-- Returns the write sequence, the units left before the call's first request took any (0: not
-- read: nothing was decided against the stock), then one row per request, in order. What the
-- service knows (the request's order id and quantity) is not sent back, and each request's
-- `remaining` is derived from `left` (less the units it and the call's earlier requests
-- reserved; 0 for -4, -6, -12, -20), so the usual row is one integer:
--   bought * 64 + code + 32: the request's own outcome (its order id, not replayed, no items),
--     bought: the units the user holds (after this reservation, if reserved);
--   "code|replayed|bought|order_id|items": a replayed order (replayed 1; bought its units, 0: not
--     known, a key's record without its order's) and a reservation of itemised stock (replayed
--     0), items the item ids taken, space-separated.
-- code 1 reserved, 0 limit reached (bought = units the user holds), -1 sold out, -2 not started,
-- -3 ended, -4 unknown activity, -5 closed, -6 order id used by another user, -12 the
-- idempotency key was used with another quantity, -20 behind the floor (nothing written); a
-- replayed order: 1 reserved, -10 cancelled, -11 refused.
local W, A = 3, 4  -- A: the first request's first argument
local floor_epoch, floor_seq = tonumber(ARGV[1]), tonumber(ARGV[2])
local call_ts = ARGV[3]
local call_now = tonumber(call_ts)
if not floor_epoch or not floor_seq or not call_now or (#ARGV - 3) % W ~= 0 then
  return redis.error_reply('ERR flashsale: floor_epoch floor_seq now_ms, then requests of three '
    .. 'arguments expected')
end
local n = (#ARGV - 3) / W
-- Every request is checked before anything is written: a bad one refuses the whole call. The
-- quantity is written as given (into the record and the intent), so it must be canonical. The
-- options of the requests that have any, by request: quantity (number and text), time (number and
-- text), idempotency ttl and key index.
local o_qty, o_qs, o_now, o_ts, o_ttl, o_ik = {}, {}, {}, {}, {}, {}
for r = 1, n do
  local o = ARGV[(r - 1) * W + A + 2]
  if o ~= '' then
    local qs, ts, slot_s, ttl_s = string.match(o, '^([^,]*),([^,]*),([^,]*),([^,]*)$')
    if not qs or qs == '' then qs = '1' end
    if not ts or ts == '' then ts = call_ts end
    local now, slot, ttl = tonumber(ts), tonumber(slot_s ~= '' and slot_s or '0'),
      tonumber(ttl_s ~= '' and ttl_s or '0')
    if not slot_s or not string.find(qs, '^[1-9]%d*$') or not now or not ttl or not slot
        or slot % 1 ~= 0 or slot < 0 or 6 + slot > #KEYS or (slot > 0) ~= (ttl > 0) then
      return redis.error_reply('ERR flashsale: options must be "quantity,now_ms,idem_slot,'
        .. 'idem_ttl_ms": quantity an integer >= 1, now_ms and idem_ttl_ms numbers, idem_slot a '
        .. 'declared key (with idem_ttl_ms > 0)')
    end
    o_qty[r], o_qs[r], o_now[r], o_ts[r], o_ttl[r], o_ik[r] = tonumber(qs), qs, now, ts, ttl,
      6 + slot
  end
end

local m = redis.call('HMGET', KEYS[1], 'state', 'start_ms', 'end_ms', 'limit', 'kind', 'wepoch',
  'wseq')
local wepoch, wseq = tonumber(m[6] or '0'), tonumber(m[7] or '0')
local reply, nr = {wepoch, wseq, 0}, 3
-- Behind the floor (an activity lost whole is behind any floor above zero), or not loaded.
local behind = wepoch < floor_epoch or (wepoch == floor_epoch and wseq < floor_seq)
if behind or not m[1] then
  local code = behind and -20 or -4
  for r = 1, n do reply[nr + r] = code + 32 end
  return reply
end
local open, start_ms, end_ms = m[1] == 'open', tonumber(m[2]), tonumber(m[3])
local limit, counted = tonumber(m[4]), m[5] == 'counted'
-- A batch keeps the buyers' counts and the order records in Lua (read once, written once); a
-- single reservation (or a batch too large to unpack at once) reads and writes them directly.
local bulk = n > 1 and n <= 1000
-- bulk: `held` the users' counts as read, `held_new` as this call leaves them; `records` the
-- order records (order id -> record, false: none) as read plus those this call creates, listed
-- in `created`.
local held, held_new, records, created = nil, nil, nil, {}
-- The stock. `left`: the units left, once known (read once, then kept up to date here). The
-- first request that takes stock takes what the rest of the batch asks for (`taken`); `sold` of
-- it is sold, the rest goes back at the end. Itemised: `pool` holds the items taken, `used` of
-- them handed out.
local left, took, taken, sold, pool, used = nil, false, 0, 0, nil, 0
-- The reservations' intents (five values each), appended to the stream after every other write.
local intents, ni = {}, 0
-- The idempotency keys of reservations, set after the intents (a key that replays a reservation
-- is never left without the order's record and intent by a command failing midway): the key's
-- value by key name (what a later request of the batch with the same key replays), and the keys
-- (their KEYS index) in order with their ttl.
local idem_value, idem_keys, idem_ttls = {}, {}, {}

for r = 1, n do
  local i = (r - 1) * W + A
  local id, user = ARGV[i], ARGV[i + 1]
  local qty, qty_s, now, ts, ttl, ik = 1, '1', call_now, call_ts, 0, 6
  if o_qty[r] then
    qty, qty_s, now, ts, ttl, ik = o_qty[r], o_qs[r], o_now[r], o_ts[r], o_ttl[r], o_ik[r]
  end
  -- code: the outcome decided (nil: the order id was recorded before, a replay); first: the
  -- idempotency key's record (its outcome is replayed); raised: the user's count was raised.
  local code, bought, first, raised, now_held, item_list = nil, 0, nil, false, 0, ''
  repeat
    if ik > 6 then
      first = idem_value[KEYS[ik]] or redis.call('GET', KEYS[ik])
      if first then break end
    end
    if not open then code = -5 break end
    if now < start_ms then code = -2 break end
    if now >= end_ms then code = -3 break end
    -- The buyer's count, raised first (lowered again below unless reserved).
    if bulk then
      if not held then
        local users = {}
        for k = 1, n do users[k] = ARGV[(k - 1) * W + A + 1] end
        local got = redis.call('HMGET', KEYS[4], unpack(users))
        held, held_new = {}, {}
        for k = 1, n do
          local v = tonumber(got[k] or '0')
          held[users[k]], held_new[users[k]] = v, v
        end
      end
      now_held = held_new[user] + qty
      held_new[user] = now_held
    else
      now_held = redis.call('HINCRBY', KEYS[4], user, qty)
    end
    raised = true
    if now_held > limit then code, bought = 0, now_held - qty break end
    -- The stock: what the rest of the batch asks for, taken once.
    if not took then
      local want = 0
      for k = r, n do want = want + (o_qty[k] or 1) end
      took, taken = true, want
      if counted then
        left = redis.call('DECRBY', KEYS[2], want) + want
      else
        pool = redis.call('LPOP', KEYS[3], want) or {}
        -- Fewer than asked: the list is empty now.
        left = #pool < want and #pool or #pool + redis.call('LLEN', KEYS[3])
      end
    end
    if left < qty then code, bought = -1, now_held - qty break end
    if not counted then item_list = table.concat(pool, ' ', used + 1, used + qty) end
    -- The order record, only if the order id is new.
    local record = 'R|' .. user .. '|' .. qty_s .. '|' .. ts .. '|' .. item_list
    if bulk then
      if not records then
        local ids = {}
        for k = 1, n do ids[k] = ARGV[(k - 1) * W + A] end
        local got = redis.call('HMGET', KEYS[5], unpack(ids))
        records = {}
        for k = 1, n do records[ids[k]] = got[k] end
      end
      if not records[id] then
        records[id] = record
        created[#created + 1] = id
        code = 1
      end
    elseif redis.call('HSETNX', KEYS[5], id, record) == 1 then
      code = 1
    end
  until true
  if raised and code ~= 1 then
    -- Lowered again (to nothing: the field goes, as if never raised).
    if bulk then
      held_new[user] = now_held - qty
    elseif now_held == qty then
      redis.call('HDEL', KEYS[4], user)
    else
      redis.call('HINCRBY', KEYS[4], user, -qty)
    end
  end

  if code == 1 then
    left, sold = left - qty, sold + qty
    if not counted then used = used + qty end
    intents[ni + 1], intents[ni + 2], intents[ni + 3] = id, user, qty_s
    intents[ni + 4], intents[ni + 5] = item_list, ts
    ni = ni + 5
    if ik > 6 then
      idem_value[KEYS[ik]] = '1|0|' .. id .. '|' .. qty_s
      local k = #idem_keys + 1
      idem_keys[k], idem_ttls[k] = ik, ttl
    end
    if counted then
      reply[nr + 1] = now_held * 64 + 33
    else
      reply[nr + 1] = '1|0|' .. now_held .. '|' .. id .. '|' .. item_list
    end
  else
    -- Any other outcome: the order id's record first, so a retry of a recorded order replays
    -- (for an idempotency key's reservation: that order's record).
    local look, first_code, first_bought, first_qty = id, nil, nil, ''
    if first then
      first_code, first_bought, look, first_qty =
        string.match(first, '^(-?%d+)|(%d+)|([^|]*)|?(%d*)$')
      first_code = tonumber(first_code)
    end
    -- The key's reservation was of another quantity: another request under a used key.
    local reused = first_qty ~= '' and first_qty ~= qty_s
    local record = false
    if (not first or first_code == 1) and not reused then
      if bulk and records then record = records[look] end
      if record == nil or not bulk or not records then
        record = redis.call('HGET', KEYS[5], look)
        if bulk and records then records[look] = record end
      end
    end
    local state, who, units, items
    if record then
      state, who, units, items = string.match(record, '^(%a)|([^|]*)|(%d+)|%d+|(.*)$')
    end
    if reused then
      reply[nr + 1] = -12 + 32
    elseif record and who ~= user then
      reply[nr + 1] = -6 + 32
    else
      if not left then
        if counted then left = tonumber(redis.call('GET', KEYS[2]) or '0')
        else left = redis.call('LLEN', KEYS[3]) end
      end
      if record then
        -- The order as it is now: R reserved, X released (cancelled), F refused.
        reply[nr + 1] = ((state == 'R' and 1) or (state == 'F' and -11) or -10) .. '|1|'
          .. units .. '|' .. look .. '|' .. items
      elseif first then
        reply[nr + 1] = first_code .. '|1|' .. first_bought .. '|' .. look .. '|'
      else
        reply[nr + 1] = bought * 64 + code + 32
      end
    end
  end
  nr = nr + 1
end
-- The units left before the first request took any (what the service derives every request's
-- `remaining` from).
if left then reply[3] = left + sold end

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
-- What was taken and not sold goes back: the count, or the items left over, last first, so they
-- are back at the head in their order (unpack() is bounded by the Lua stack: in chunks).
if taken > sold then
  if counted then
    redis.call('INCRBY', KEYS[2], taken - sold)
  else
    local back = {}
    for k = #pool, used + 1, -1 do back[#back + 1] = pool[k] end
    for k = 1, #back, 1000 do
      redis.call('LPUSH', KEYS[3], unpack(back, k, math.min(k + 999, #back)))
    end
  end
end
-- One packed field `o` per intent, in the layout keyspace/order_stream.h describes (draw empty
-- for a sale). The batch's intents are the fields of ONE entry (in their order; up to 1,000 an
-- entry, unpack() being bounded by the Lua stack): one XADD per call instead of one per
-- reservation (what each saves: bench/stream_format.sh, bench/README.md), and one entry for the
-- pipeline to read, track and acknowledge.
-- `limit`: the per-user limit the order was sold under; the record decides with it (a limit
-- changed before the order is persisted does not change what the order was).
-- The sequence advances once per call that recorded an order, before its entry is written (the
-- entry carries it: the record keeps the highest it persisted).
if ni > 0 then
  reply[2] = redis.call('HINCRBY', KEYS[1], 'wseq', 1)
end
local tail = '|' .. m[4] .. '||'
local packed, np = {'s', wepoch .. '.' .. reply[2]}, 2
for k = 1, ni, 5 do
  packed[np + 1] = 'o'
  packed[np + 2] = intents[k] .. '|' .. intents[k + 1] .. '|' .. intents[k + 2] .. '|'
    .. intents[k + 4] .. tail .. intents[k + 3]
  np = np + 2
  if np >= 2000 or k + 5 > ni then
    redis.call('XADD', KEYS[6], '*', unpack(packed, 1, np))
    np = 2
  end
end
for k = 1, #idem_keys do
  redis.call('SET', KEYS[idem_keys[k]], idem_value[KEYS[idem_keys[k]]], 'PX', idem_ttls[k])
end
return reply
