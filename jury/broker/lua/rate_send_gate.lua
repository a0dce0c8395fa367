-- The send gate (jury.worker.limits.ratelimit.send_wait), cluster-wide: a model's latest sends in a
-- list, the latest first. Records the send at the earliest time the rule allows (now, or
-- later: the send is reserved) and returns {wait, the send's recorded time}: the caller sleeps
-- `wait` and sends, without asking again. A wait is rounded up to the millisecond.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local pace = tonumber(redis.call('GET', KEYS[2]) or '1')
local interval = tonumber(ARGV[1]) / pace
local stretch = math.max(1, math.floor(tonumber(ARGV[3]) or 1))
local last = redis.call('LINDEX', KEYS[1], 0)
local back = redis.call('LINDEX', KEYS[1], stretch - 1)
local wait = 0
if last then wait = math.max(wait, tonumber(last) + interval * tonumber(ARGV[4]) - now) end
if back then wait = math.max(wait, tonumber(back) + stretch * interval - now) end
wait = math.ceil(wait)
local at = now + wait
redis.call('LPUSH', KEYS[1], at)
redis.call('LTRIM', KEYS[1], 0, stretch - 1)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return {wait, at}
