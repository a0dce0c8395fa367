-- Release as many waiters as the model has free slots (its slot-holders may have died).
local now_parts = redis.call('TIME')
local now = now_parts[1] * 1000 + math.floor(now_parts[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local cap = tonumber(redis.call('GET', KEYS[3]) or '0')
local free = cap - redis.call('ZCARD', KEYS[2])
if cap == 0 then free = redis.call('LLEN', KEYS[1]) end
local moved = 0
while moved < free do
  local waiter = redis.call('LPOP', KEYS[1])
  if not waiter then break end
  local cut = string.find(waiter, '\n', 1, true)
  if cut then  -- a malformed member is dropped, never fatal to the script
    redis.call('RPUSH', string.sub(waiter, 1, cut - 1), string.sub(waiter, cut + 1))
  end
  moved = moved + 1
end
return moved
