#!lua flags=no-writes
-- A user's orders in one activity that the order pipeline may not have persisted yet, as the
-- reserve and draw scripts recorded them (reserved, released or refused). There is no per-user
-- index (it would cost every reservation a write): they are found on the activity's stream,
-- which holds every order intent until the pipeline has persisted and acknowledged it (it is
-- trimmed only below the oldest entry not yet acknowledged, redis/order_stream.h), and on the
-- dead-letter stream (intents the record refused). Orders trimmed from the stream are in the
-- database, which the caller reads as well (service/queries.h). The cost is one pass over both
-- streams: their length is the pipeline's backlog (status stream_length) plus the dead letters.
-- KEYS: orders stream dead
-- ARGV: user_id
-- RETURNS: {(order_id:str record:str)...}
-- Returns {order_id, record, order_id, record, ...}; a record is "R|user|quantity|ts|items"
-- (R reserved, X released, F refused), oldest first.
local user, reply, seen = ARGV[1], {}, {}
for k = 2, 3 do
  for _, entry in ipairs(redis.call('XRANGE', KEYS[k], '-', '+')) do
    local fields, id, who = entry[2], nil, nil
    for f = 1, #fields, 2 do
      if fields[f] == 'order_id' then id = fields[f + 1]
      elseif fields[f] == 'user_id' then who = fields[f + 1] end
    end
    if who == user and id and not seen[id] then
      seen[id] = true
      local record = redis.call('HGET', KEYS[1], id)
      if record then
        reply[#reply + 1] = id
        reply[#reply + 1] = record
      end
    end
  end
end
return reply
