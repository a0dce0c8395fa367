-- Reserve a call's estimated cost on a batch's budget meter, if it fits under the cap: the
-- check and the reservation in one step, so no two calls can both take the last room.
-- KEYS: cap, spent, reserved, leases, amounts, closed (jury.broker.keys.BudgetKeys); amounts in
-- nano-dollars. ARGV: token, amount, lease (ms), the batch's own cap ('' for none), key TTL (ms).
-- Returns {1 reserved / 0 refused / -1 spent unknown, spent, reserved, cap (-1: none)}.
if #KEYS < 6 then return redis.error_reply('budget_reserve: 6 keys') end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local spent = redis.call('GET', KEYS[2])
if not spent then return {-1, 0, 0, -1} end
spent = tonumber(spent)
-- Reservations whose call never settled (its worker died) lapse: a hundred at a time.
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 100)
for _, token in ipairs(lapsed) do
  local amount = tonumber(redis.call('HGET', KEYS[5], token) or '0')
  redis.call('DECRBY', KEYS[3], amount)
  redis.call('HDEL', KEYS[5], token)
  redis.call('ZREM', KEYS[4], token)
end
local reserved = math.max(0, tonumber(redis.call('GET', KEYS[3]) or '0'))
local amount = math.max(0, math.floor(tonumber(ARGV[2]) or 0))
local cap = redis.call('GET', KEYS[1]) or ARGV[4]
if cap == '' then cap = -1 else cap = tonumber(cap) end
if redis.call('EXISTS', KEYS[6]) == 1 then return {0, spent, reserved, cap} end
if cap >= 0 and spent + reserved + amount > cap then
  -- No room, and no call in flight to leave any: the meter closes, in this same step, so
  -- that no smaller call slips in after the batch was stopped with its spend.
  if reserved == 0 then redis.call('SET', KEYS[6], 1, 'PX', tonumber(ARGV[5])) end
  return {0, spent, reserved, cap}
end
local ttl = tonumber(ARGV[5])
redis.call('INCRBY', KEYS[3], amount)
redis.call('HSET', KEYS[5], ARGV[1], amount)
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
for i = 2, 5 do redis.call('PEXPIRE', KEYS[i], ttl) end
return {1, spent, reserved + amount, cap}
