-- How many members of KEYS[1] belong to each of some queues, one step at a time (the caller
-- loops, so Redis is never held long): KEYS[1] is kombu's unacked hash (a member's queue is
-- the routing key ending its value: [payload, exchange, routing_key]), the parked set or a
-- model's waiting line (a member's queue is the key before its first newline).
-- ARGV[1]: where to go on (a SCAN cursor; a list's index), ARGV[2]: members to read this step
-- (at most 5000), ARGV[3..]: the queues (the hash: routing keys; the others: queue keys).
-- Returns {where to go on ("0": done), count of ARGV[3], count of ARGV[4], ...}.
local counts, slot = {}, {}
for i = 3, #ARGV do
  counts[i - 2] = 0
  slot[ARGV[i]] = i - 2
end
local function answer(next_at)
  local reply = {tostring(next_at)}
  for i = 1, #counts do reply[i + 1] = counts[i] end
  return reply
end
local step = math.min(math.floor(tonumber(ARGV[2]) or 0), 5000)
if #KEYS < 1 or step <= 0 then return answer(0) end
local function count_queue(queue)
  local at = queue and slot[queue]
  if at then counts[at] = counts[at] + 1 end
end
local function before_newline(member)
  local cut = string.find(member, '\n', 1, true)
  return cut and string.sub(member, 1, cut - 1)
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'hash' then
  local reply = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', step)
  local entries = reply[2]
  for i = 2, #entries, 2 do
    count_queue(string.match(string.sub(entries[i], -300), '"([^"]*)"%s*%]%s*$'))
  end
  return answer(reply[1])
elseif kind == 'zset' then
  local reply = redis.call('ZSCAN', KEYS[1], ARGV[1], 'COUNT', step)
  local entries = reply[2]
  for i = 1, #entries, 2 do count_queue(before_newline(entries[i])) end
  return answer(reply[1])
elseif kind == 'list' then
  local start = math.max(0, math.floor(tonumber(ARGV[1]) or 0))
  local chunk = redis.call('LRANGE', KEYS[1], start, start + step - 1)
  for _, member in ipairs(chunk) do count_queue(before_newline(member)) end
  if #chunk < step then return answer(0) end
  return answer(start + #chunk)
end
return answer(0)
