-- Settle a reservation: give back its estimate, count what the call really cost.
-- KEYS: cap, spent, reserved, leases, amounts (closed); ARGV: token, cost (nano-dollars), key TTL (ms).
if #KEYS < 5 then return redis.error_reply('budget_settle: 5 keys') end
local amount = redis.call('HGET', KEYS[5], ARGV[1])
if amount then  -- not lapsed meanwhile
  redis.call('DECRBY', KEYS[3], tonumber(amount))
  redis.call('HDEL', KEYS[5], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
end
-- A meter Redis lost is rebuilt from the store's costs at the next reservation.
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local cost = math.max(0, math.floor(tonumber(ARGV[2]) or 0))
local spent = redis.call('INCRBY', KEYS[2], cost)
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
return spent
