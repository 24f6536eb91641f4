#!lua
-- Moves order intents that keep failing from the activity's stream to its dead-letter stream,
-- with the reason, in one step: the copies are added, the entry acknowledged and its failure
-- count dropped together, so an intent is never in neither place nor acknowledged without a copy.
-- An entry may hold several intents (a reserve call's batch: one `o` field each); `part` names
-- the ones that failed, by their place among the entry's `o` fields (1-based), and each becomes a
-- dead letter of its own. The entry's other intents are in the record already (the caller
-- acknowledges an entry only then), so acknowledging the entry loses none of them. No `part`:
-- every intent of the entry (an entry of the named fields older versions wrote is one intent).
-- In the same step each order moved gives its units back (S3-10): if the activity's order
-- record for the intent's order id is still R (reserved) and of the intent's user, it becomes F
-- (refused) and its units return to stock as a release returns them (sale_release: the
-- count, or the very item ids; a lottery win: its prize), the buyer's count drops (a sale; a
-- lottery draw stays counted: it was drawn) and `released` grows. A record already released
-- (X, F) or of another user, or none, is left alone: nothing is returned twice.
-- KEYS: stream dead failures meta stock items buyers orders prizes
-- ARGV: group entry_id error deliveries now_ms part...
-- RETURNS: {moved:int released:int}
-- Returns {moved, released}: moved, the intents moved (0: the entry is no longer in the stream,
-- acknowledged anyway, nothing released); released: the units returned to stock (0: none).
local entry = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #entry == 0 then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
  return {0, 0}
end
local fields = entry[1][2]
local head = {'original_id', ARGV[2], 'error', ARGV[3], 'deliveries', ARGV[4], 'dead_ms', ARGV[5]}
-- The intents to move: each the fields its dead letter copies, its order id and its user.
local chosen = {}
for k = 6, #ARGV do chosen[tonumber(ARGV[k])] = true end
local all = #ARGV < 6
local moving = {}
local packed = 0
for i = 1, #fields, 2 do
  if fields[i] == 'o' then
    packed = packed + 1
    if all or chosen[packed] then
      local order_id, user = string.match(fields[i + 1], '^([^|]*)|([^|]*)|')
      moving[#moving + 1] = {copy = {'o', fields[i + 1]}, order_id = order_id, user = user}
    end
  end
end
if packed == 0 then
  -- The named fields older versions wrote: one intent, copied whole.
  local named = {}
  for i = 1, #fields, 2 do named[fields[i]] = fields[i + 1] end
  moving[1] = {copy = fields, order_id = named['order_id'], user = named['user_id']}
end
-- A part that is not there: refused before anything is written (the entry is never
-- acknowledged without a copy of what failed).
for k = 6, #ARGV do
  local part = tonumber(ARGV[k])
  if not part or part < 1 or part > math.max(packed, 1) or part % 1 ~= 0 then
    return redis.error_reply('ERR flashsale: entry ' .. ARGV[2] .. ' has no intent ' .. ARGV[k])
  end
end
for _, intent in ipairs(moving) do
  local copy = {unpack(head)}
  for i = 1, #intent.copy do copy[#copy + 1] = intent.copy[i] end
  redis.call('XADD', KEYS[2], '*', unpack(copy))
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[2])

local kind = redis.call('HGET', KEYS[4], 'kind')
local released = 0
for _, intent in ipairs(moving) do
  local rec = kind and intent.order_id and redis.call('HGET', KEYS[8], intent.order_id)
  local state, user, qty, items
  if rec then state, user, qty, items = string.match(rec, '^(%a)|([^|]*)|(%d+)|%d+|(.*)$') end
  if state == 'R' and user == intent.user then
    qty = tonumber(qty)
    redis.call('HSET', KEYS[8], intent.order_id, 'F' .. string.sub(rec, 2))
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
    released = released + qty
  end
end
return {#moving, released}
