#!lua
-- Reconciliation's rebuild of an activity whose Redis state was lost: puts the record's live
-- orders back (the order record, the buyer's units, the user's order index) BEFORE the
-- activity's definition and remaining stock are set up again, so that once the sale resumes no
-- buyer can exceed the per-user limit. Refused while the activity is loaded.
-- KEYS: meta buyers orders user_orders
-- ARGV: orders...
-- RETURNS: restored:int
-- `orders` are quadruples: order_id user_id quantity record.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('ERR flashsale: the activity is loaded; nothing is restored')
end
if (#ARGV) % 4 ~= 0 then return redis.error_reply('ERR flashsale: order quadruples expected') end
local restored = 0
for i = 1, #ARGV, 4 do
  local id, user, qty = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  if redis.call('HSETNX', KEYS[3], id, ARGV[i + 3]) == 1 then
    redis.call('HINCRBY', KEYS[2], user, qty)
    local mine = redis.call('HGET', KEYS[4], user)
    redis.call('HSET', KEYS[4], user, mine and (mine .. ' ' .. id) or id)
    restored = restored + 1
  end
end
return restored
