#!lua flags=no-writes
-- A user's orders in one activity that the order pipeline may not have persisted yet, as the
-- reserve and draw scripts recorded them (reserved, released or refused). There is no per-user
-- index (it would cost every reservation a write): they are found on the activity's stream,
-- which holds every order intent until the pipeline has persisted and acknowledged it (it is
-- trimmed only below the oldest entry not yet acknowledged, keyspace/order_stream.h), and on the
-- dead-letter stream (intents the record refused). Orders trimmed from the stream are in the
-- database, which the caller reads first and passes in.
-- The stream is read only as far as needed, newest entries first, because its length is the
-- pipeline's backlog (after a burst: every order of the burst) and this runs on every
-- GET /api/v1/orders, for every activity:
--   not at all when the user holds no units in Redis (the buyer's count, which counts every
--     reserved order, persisted or not; released and refused orders are not counted: the
--     record has the first, the dead letters the second) or when the record's live orders of
--     the user in this activity account for all of them: nothing is pending;
--   else until the reserved orders found that the record does not have account for the units
--     the record's do not (a lottery's count is of draws, which a win need not match: there the
--     whole stream may be read).
-- The dead-letter stream (failures only) is read whole.
-- KEYS: orders stream dead buyers
-- ARGV: user_id persisted_units persisted_order_id...
-- persisted_units: the units of the user's live (reserved or paid) orders of this activity in
-- the record; persisted_order_id: the ids of the user's orders of this activity in the record
-- (any state), skipped here.
-- RETURNS: {(order_id:str record:str)...}
-- Returns {order_id, record, order_id, record, ...}; a record is "R|user|quantity|ts|items"
-- (R reserved, X released, F refused), oldest first.
local user, reply, seen = ARGV[1], {}, {}
for k = 3, #ARGV do seen[ARGV[k]] = true end
local held = tonumber(redis.call('HGET', KEYS[4], user) or '0')
local need = held - tonumber(ARGV[2])
local found = {}  -- from the stream: order_id, record, ..., newest first

-- An order, appended to `into` if it is the user's and not in the record.
local function take(id, who, into)
  if who ~= user or not id or seen[id] then return end
  seen[id] = true
  local record = redis.call('HGET', KEYS[1], id)
  if not record then return end
  into[#into + 1] = id
  into[#into + 1] = record
  local state, qty = string.match(record, '^(%a)|[^|]*|(%d+)|')
  if state == 'R' then need = need - tonumber(qty) end
end

-- An entry's orders: a packed intent per `o` field ("order_id|user_id|...": a reserve call's
-- batch is one entry, its intents in their order), or the named fields older versions wrote.
-- `newest_first`: its intents last to first (the stream read backwards).
local function look(fields, into, newest_first)
  local id, who = nil, nil
  local first, last, step = 1, #fields - 1, 2
  if newest_first then first, last, step = #fields - 1, 1, -2 end
  for f = first, last, step do
    if fields[f] == 'o' then
      local packed_id, packed_user = string.match(fields[f + 1], '^([^|]*)|([^|]*)|')
      take(packed_id, packed_user, into)
    elseif fields[f] == 'order_id' then id = fields[f + 1]
    elseif fields[f] == 'user_id' then who = fields[f + 1] end
  end
  if id then take(id, who, into) end
end

local chunk, last = 256, '+'
while need > 0 do
  local entries = redis.call('XREVRANGE', KEYS[2], last, '-', 'COUNT', chunk)
  for _, entry in ipairs(entries) do
    look(entry[2], found, true)
    if need <= 0 then break end
  end
  if #entries < chunk then break end
  last = '(' .. entries[#entries][1]
end
for k = #found - 1, 1, -2 do
  reply[#reply + 1] = found[k]
  reply[#reply + 1] = found[k + 1]
end
for _, entry in ipairs(redis.call('XRANGE', KEYS[3], '-', '+')) do look(entry[2], reply, false) end
return reply
