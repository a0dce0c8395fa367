-- KEYS[1]: the parked set; KEYS[2]: the set of waiting lines. ARGV[1]: at most this many;
-- ARGV[2]: also those due within this many ms (released together, not one by one).
-- Returns {moved, ms until the next parked message is due (-1: none parked), lines}: the
-- housekeeper sleeps until then instead of polling (jury.worker.engine.housekeeping).
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- A count below 1 would read as 'all' (LIMIT 0 -1): at least one, at most a thousand.
local count = math.max(1, math.min(math.floor(tonumber(ARGV[1]) or 1), 1000))
local ahead = math.max(0, math.min(tonumber(ARGV[2]) or 0, 60000))
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now + ahead, 'LIMIT', 0, count)
for _, member in ipairs(due) do
  local cut = string.find(member, '\n', 1, true)
  if cut then
    redis.call('RPUSH', string.sub(member, 1, cut - 1), string.sub(member, cut + 1))
  end
  redis.call('ZREM', KEYS[1], member)
end
local next_in = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then
  next_in = math.max(0, math.floor(tonumber(first[2]) - now))
end
local lines = 0
if KEYS[2] then lines = redis.call('SCARD', KEYS[2]) end
return {#due, next_in, lines}
