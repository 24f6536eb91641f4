#!lua
-- The lost-write repair: after Redis restarted or failed over without writes it had acknowledged,
-- the record's live orders that this Redis does not hold are applied again, each exactly once
-- (idempotent by order id: an order whose record is here already is left alone): the order
-- record, the buyer's units (a lottery: the draw count, raised to the win's draw number, never
-- lowered), and the unit(s) taken from stock (counted:
-- the stock counter; items: the order's item ids out of the list; lottery: the prize's stock).
-- An order whose units are no longer in stock (resold before the repair) is applied all the same
-- (the record has it: its buyer holds it), its missing units are counted in `meta.oversold`, and
-- the activity is closed in the same call, so nothing more is sold; the caller flags such orders
-- for compensation in the record. `meta.reserved` is derived (activity_status.lua): the applied
-- units taken from stock lower the stock, the missing ones raise `oversold`.
-- KEYS: meta stock items buyers orders prizes
-- ARGV: orders...
-- `orders` are quintuples: order_id user_id quantity draw_no record.
-- RETURNS: {applied:int units:int present:int short_units:int short_order_id:str...}
local kind = redis.call('HGET', KEYS[1], 'kind')
if not kind then
  return redis.error_reply('ERR flashsale: the activity is not loaded; it is rebuilt instead')
end
if (#ARGV) % 5 ~= 0 then return redis.error_reply('ERR flashsale: order quintuples expected') end
for i = 1, #ARGV, 5 do
  if not tonumber(ARGV[i + 2]) or not tonumber(ARGV[i + 3]) or
      not string.match(ARGV[i + 4], '^R|[^|]*|%d+|%d+|') then
    return redis.error_reply('ERR flashsale: bad order ' .. ARGV[i])
  end
end
local applied, units, present, short_units, short = 0, 0, 0, 0, {}
for i = 1, #ARGV, 5 do
  local id, user, qty, draw_no, record = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]),
    tonumber(ARGV[i + 3]), ARGV[i + 4]
  if redis.call('HEXISTS', KEYS[5], id) == 1 then
    present = present + 1
  else
    local items = {}
    for item in string.gmatch(string.match(record, '^R|[^|]*|%d+|%d+|(.*)$'), '%S+') do
      items[#items + 1] = item
    end
    local missing = 0
    if kind == 'counted' then
      local left = tonumber(redis.call('GET', KEYS[2]) or '0')
      local take = math.min(math.max(left, 0), qty)
      if take > 0 then redis.call('DECRBY', KEYS[2], take) end
      missing = qty - take
    elseif kind == 'items' then
      for _, item in ipairs(items) do
        if redis.call('LREM', KEYS[3], 1, item) == 0 then missing = missing + 1 end
      end
    else
      local prize = items[1] or ''
      if tonumber(redis.call('HGET', KEYS[6], prize) or '0') > 0 then
        redis.call('HINCRBY', KEYS[6], prize, -1)
      else
        missing = 1
      end
    end
    redis.call('HSET', KEYS[5], id, record)
    if kind == 'lottery' then
      if draw_no > tonumber(redis.call('HGET', KEYS[4], user) or '0') then
        redis.call('HSET', KEYS[4], user, draw_no)
      end
    else
      redis.call('HINCRBY', KEYS[4], user, qty)
    end
    applied = applied + 1
    units = units + qty
    if missing > 0 then
      short_units = short_units + missing
      short[#short + 1] = id
    end
  end
end
if short_units > 0 then
  redis.call('HINCRBY', KEYS[1], 'oversold', short_units)
  redis.call('HSET', KEYS[1], 'state', 'closed')
  redis.call('HINCRBY', KEYS[1], 'version', 1)
end
local reply = {applied, units, present, short_units}
for i = 1, #short do reply[4 + i] = short[i] end
return reply
