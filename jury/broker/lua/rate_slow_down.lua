local pace = tonumber(redis.call('GET', KEYS[1]) or '1')
redis.call('SET', KEYS[1], math.max(tonumber(ARGV[2]), pace * tonumber(ARGV[1])), 'PX', ARGV[3])
return 1
