-- The send gate (jury.worker.limits.ratelimit.send_wait), cluster-wide: a model's latest sends in a
-- list, the latest first. Returns {wait, 0}, or {0, the send's recorded time}. A wait is
-- rounded up: Redis truncates a Lua number to an integer reply, and a wait under a
-- millisecond, truncated to 0, read as "send now" without recording the send.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local pace = tonumber(redis.call('GET', KEYS[2]) or '1')
local interval = tonumber(ARGV[1]) / pace
local stretch = math.max(1, math.floor(tonumber(ARGV[3]) or 1))
local last = redis.call('LINDEX', KEYS[1], 0)
local back = redis.call('LINDEX', KEYS[1], stretch - 1)
local wait = 0
if last then wait = tonumber(last) + interval * tonumber(ARGV[4]) - now end
if back then wait = math.max(wait, tonumber(back) + stretch * interval - now) end
if wait > 0 then return {math.ceil(wait), 0} end
redis.call('LPUSH', KEYS[1], now)
redis.call('LTRIM', KEYS[1], 0, stretch - 1)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return {0, now}
