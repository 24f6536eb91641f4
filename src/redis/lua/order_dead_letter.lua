#!lua
-- Moves an order intent that keeps failing from the activity's stream to its dead-letter stream,
-- with the reason, in one step: the copy is added, the entry acknowledged and its failure count
-- dropped together, so an entry is never in neither place nor acknowledged without a copy.
-- In the same step the order it names gives its units back (S3-10): if the activity's order
-- record for the intent's order id is still R (reserved) and of the intent's user, it becomes F
-- (refused) and its units return to stock as a release returns them (seckill_release: the
-- count, or the very item ids; a lottery win: its prize), the buyer's count drops (a sale; a
-- lottery draw stays counted: it was drawn) and `released` grows. A record already released
-- (X, F) or of another user, or none, is left alone: nothing is returned twice.
-- KEYS: stream dead failures meta stock items buyers orders prizes
-- ARGV: group entry_id error deliveries now_ms
-- RETURNS: {moved:int released:int}
-- Returns {moved, released}: moved 1 moved | 0 the entry is no longer in the stream
-- (acknowledged anyway, nothing released); released: the units returned to stock (0: none).
local entry = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #entry == 0 then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
  return {0, 0}
end
local fields = entry[1][2]
local copy = {'original_id', ARGV[2], 'error', ARGV[3], 'deliveries', ARGV[4], 'dead_ms', ARGV[5]}
local intent = {}
for i = 1, #fields do copy[#copy + 1] = fields[i] end
for i = 1, #fields, 2 do intent[fields[i]] = fields[i + 1] end
-- The packed intent ("order_id|user_id|..."), or the named fields older versions wrote.
if intent['o'] then
  intent['order_id'], intent['user_id'] = string.match(intent['o'], '^([^|]*)|([^|]*)|')
end
redis.call('XADD', KEYS[2], '*', unpack(copy))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[2])

local kind = redis.call('HGET', KEYS[4], 'kind')
local order_id = intent['order_id']
if not kind or not order_id then return {1, 0} end
local rec = redis.call('HGET', KEYS[8], order_id)
if not rec then return {1, 0} end
local state, user, qty, items = string.match(rec, '^(%a)|([^|]*)|(%d+)|%d+|(.*)$')
if state ~= 'R' or user ~= intent['user_id'] then return {1, 0} end
qty = tonumber(qty)
redis.call('HSET', KEYS[8], order_id, 'F' .. string.sub(rec, 2))
if kind == 'lottery' then
  if items ~= '' then redis.call('HINCRBY', KEYS[9], items, qty) end
else
  if kind == 'items' then
    local list = {}
    for item in string.gmatch(items, '%S+') do list[#list + 1] = item end
    if #list > 0 then redis.call('RPUSH', KEYS[6], unpack(list)) end
  else
    redis.call('INCRBY', KEYS[5], qty)
  end
  if redis.call('HINCRBY', KEYS[7], user, -qty) <= 0 then redis.call('HDEL', KEYS[7], user) end
end
redis.call('HINCRBY', KEYS[4], 'released', qty)
return {1, qty}
