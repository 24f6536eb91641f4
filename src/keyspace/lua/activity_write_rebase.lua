#!lua
-- The last step of an activity's lost-write repair: its write sequence (sale_reserve.lua) goes
-- on from a new base, the record's fence epoch the repair advanced, so that the floors instances
-- kept from before (acknowledged writes Redis lost for good) no longer refuse its sales. Bound to
-- what the repair read: if Redis holds less than the sequence the repair started from
-- (seen_epoch, seen_seq), it lost writes again while the repair ran, nothing is written and the
-- repair starts over. A sequence already at or past `epoch` (another repair's) is left alone.
-- KEYS: meta
-- ARGV: epoch seen_epoch seen_seq
-- RETURNS: {code:int wepoch:int wseq:int}
-- code 1 re-based, 0 already at or past epoch, -1 behind what the repair read, -4 not loaded
-- (nothing written but by 1); wepoch, wseq: the sequence Redis holds now.
local epoch, seen_epoch, seen_seq = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not epoch or not seen_epoch or not seen_seq or epoch < 1 then
  return redis.error_reply('ERR flashsale: epoch >= 1, seen_epoch and seen_seq expected')
end
local m = redis.call('HMGET', KEYS[1], 'kind', 'wepoch', 'wseq')
local wepoch, wseq = tonumber(m[2] or '0'), tonumber(m[3] or '0')
if not m[1] then return {-4, wepoch, wseq} end
if wepoch < seen_epoch or (wepoch == seen_epoch and wseq < seen_seq) then
  return {-1, wepoch, wseq}
end
if wepoch >= epoch then return {0, wepoch, wseq} end
redis.call('HSET', KEYS[1], 'wepoch', ARGV[1], 'wseq', '0')
return {1, epoch, 0}
