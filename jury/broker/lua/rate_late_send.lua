-- A send recorded at ARGV[1] left ARGV[2] ms later (never later than now): move it there,
-- keeping the list the latest first. Gone from the list already: nothing to do.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local recorded = tonumber(ARGV[1])
local sends = redis.call('LRANGE', KEYS[1], 0, -1)
local found = false
for i, sent in ipairs(sends) do
  sends[i] = tonumber(sent)
  if not found and sends[i] == recorded then
    sends[i] = math.min(now, recorded + tonumber(ARGV[2]))
    found = true
  end
end
if not found then return 0 end
table.sort(sends, function(a, b) return a > b end)
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
for i = 1, #sends, 1000 do  -- unpack's results live on Lua's stack: a thousand at a time
  redis.call('RPUSH', KEYS[1], unpack(sends, i, math.min(i + 999, #sends)))
end
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
