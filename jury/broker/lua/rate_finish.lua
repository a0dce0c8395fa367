-- Free the call's slot, correct its tokens, and hand the slot to the first waiter.
local now_parts = redis.call('TIME')
local now = now_parts[1] * 1000 + math.floor(now_parts[2] / 1000)
redis.call('ZREM', KEYS[2], ARGV[1])
local tpm, extra = tonumber(ARGV[2]), tonumber(ARGV[3])
if tpm > 0 and extra ~= 0 then
  local tat = tonumber(redis.call('GET', KEYS[1]) or now)
  redis.call('SET', KEYS[1], math.max(tat + extra * 60000 / tpm, now), 'PX', tonumber(ARGV[4]))
end
local waiter = redis.call('LPOP', KEYS[3])
if waiter then
  local cut = string.find(waiter, '\n', 1, true)
  if cut then  -- a malformed member is dropped, never fatal to the script
    redis.call('RPUSH', string.sub(waiter, 1, cut - 1), string.sub(waiter, cut + 1))
  end
end
return 1
