-- KEYS[1]: a model's waiting line; ARGV: the queue keys whose members count. 1 at the first
-- member for one of them, else 0. Read a thousand at a time: LRANGE's reply is a Lua table.
local wanted = {}
for i = 1, #ARGV do wanted[ARGV[i]] = true end
local start = 0
while true do
  local chunk = redis.call('LRANGE', KEYS[1], start, start + 999)
  if #chunk == 0 then return 0 end
  for _, member in ipairs(chunk) do
    local cut = string.find(member, '\n', 1, true)
    if cut and wanted[string.sub(member, 1, cut - 1)] then return 1 end
  end
  start = start + #chunk
end
