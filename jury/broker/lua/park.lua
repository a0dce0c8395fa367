-- ARGV: delay (ms), member, delay, member, ...
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if #ARGV % 2 ~= 0 then return redis.error_reply('park: delay and member in pairs') end
for i = 1, #ARGV, 2 do
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[i]), ARGV[i + 1])
end
return #ARGV / 2
