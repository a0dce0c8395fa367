local now_parts = redis.call('TIME')
local now = now_parts[1] * 1000 + math.floor(now_parts[2] / 1000)
local rpm, tpm, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens, horizon, token = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local ttl, lease, slack = tonumber(ARGV[7]), tonumber(ARGV[8]), 1 + tonumber(ARGV[9])
local step_back = tonumber(ARGV[10])
local cool = redis.call('PTTL', KEYS[3])
if cool > 0 then return {3, cool} end
if cap > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  redis.call('SET', KEYS[7], cap, 'PX', ttl)
  if redis.call('ZCARD', KEYS[4]) >= cap then return {2, 0} end
end
local pace = tonumber(redis.call('GET', KEYS[6]) or '1')
slack = slack / pace
local rpm_tat, tpm_tat = now, now
if rpm > 0 then rpm_tat = math.max(tonumber(redis.call('GET', KEYS[1]) or now), now) end
if tpm > 0 then tpm_tat = math.max(tonumber(redis.call('GET', KEYS[2]) or now), now) end
local start = math.max(rpm_tat, tpm_tat)
local rpm_step, tpm_step = 0, 0
if rpm > 0 then rpm_step = 60000 / rpm * slack end
if tpm > 0 then tpm_step = tokens * 60000 / tpm * slack end
if start - now <= horizon then
  if rpm > 0 then redis.call('SET', KEYS[1], start + rpm_step, 'PX', ttl) end
  if tpm > 0 then redis.call('SET', KEYS[2], start + tpm_step, 'PX', ttl) end
  if cap > 0 then redis.call('ZADD', KEYS[4], start + lease, token) end
  if pace < 1 then
    redis.call('SET', KEYS[6], math.min(1, pace + step_back), 'PX', ttl)
  end
  return {1, start - now}
end
local defer = math.max(tonumber(redis.call('GET', KEYS[5]) or now), start)
redis.call('SET', KEYS[5], defer + math.max(rpm_step, tpm_step), 'PX', ttl)
return {0, defer - now - horizon / 2}
