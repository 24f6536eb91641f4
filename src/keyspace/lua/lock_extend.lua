#!lua
-- Extends a lock only for its holder (compare the token, then act), so a holder whose lease ran
-- out and was taken by another cannot extend the other's lease.
-- KEYS: lock
-- ARGV: token ttl_ms
-- RETURNS: extended:int
-- Returns 1 extended, 0 not held by this token (lost).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
