-- Pop up to ARGV[1] messages from the queue lists KEYS[3..], in turn, one from each list of a
-- priority level (ARGV[3] lists to a level, the levels in priority order) as kombu's BRPOP
-- turns between queues, and record each in kombu's `unacked` hash (KEYS[1]) and index
-- (KEYS[2], score ARGV[2]) as `QoS.append` does: the value is kombu's `[payload, exchange,
-- routing_key]`, the payload's JSON kept as it was sent. Returns {key number, payload, ...}.
-- A message without a delivery tag goes back where it was, first in line, for kombu's own
-- delivery to deal with, and the taking stops.
local want, per_level = tonumber(ARGV[1]), tonumber(ARGV[3])
-- Nothing to take, or no queue to take from: a step of 0 would loop forever in Lua 5.1.
if not want or not per_level or want < 1 or per_level < 1 or #KEYS < 3 then return {} end
per_level = math.floor(per_level)
local taken, count = {}, 0
for first = 3, #KEYS, per_level do
  local live = {}
  for i = first, first + per_level - 1 do live[#live + 1] = i end
  while count < want and #live > 0 do
    local still = {}
    for _, i in ipairs(live) do
      if count >= want then break end
      local item = redis.call('RPOP', KEYS[i])
      if item then
        local ok, message = pcall(cjson.decode, item)
        local props = ok and type(message) == 'table' and message['properties']
        local tag = type(props) == 'table' and props['delivery_tag']
        local info = type(props) == 'table' and props['delivery_info']
        if type(tag) ~= 'string' or type(info) ~= 'table' then
          redis.call('RPUSH', KEYS[i], item)
          return taken
        end
        redis.call('ZADD', KEYS[2], ARGV[2], tag)
        redis.call('HSET', KEYS[1], tag, '[' .. item .. ',' .. cjson.encode(info['exchange'])
          .. ',' .. cjson.encode(info['routing_key']) .. ']')
        taken[#taken + 1] = i - 2
        taken[#taken + 1] = item
        count = count + 1
        still[#still + 1] = i
      end
    end
    live = still
  end
end
return taken
