"""The cluster-wide rate limiter in Redis: atomic Lua scripts on Redis' clock.

The algorithm is jury.worker.limits.ratelimit's (GCRA with reservations, a shared cool-down, a
cluster-wide pace), with a model's keys under one hash tag so they live on one Redis Cluster
slot. A model with `max_in_flight` keeps a waiting line: a task that finds every slot taken
parks its message there (jury.broker.parking), and the call that frees a slot moves the first
waiter back to its queue in the same script, so waiting for a slow local server costs no
polling. `release_waiters` is the safety net for a line whose slot-holder died.

The send gate records a send at Redis' clock when it lets it pass (`send_gate`); the request
leaves later (`sent`): once the worker has read the gate's answer, and once its event loop
has run what was ready before the request's write. A send that left late, spaced from its
recorded time, puts the send a second's quota after it into a provider window that is full.
So `sent` compares the recorded time with the worker's clock, and a send that left later
than the worker's quickest by more than LATE_SEND_S is moved, in the record, to when it
left (a clock step between two hosts moves a record by a round trip at most: no record
moves past Redis' present; and the quickest forgets it within 2 × QUICKEST_LAG_SPAN sends).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import redis

from jury.broker.parking import LINES_KEY
from jury.worker.limits.ratelimit import (
    BUSY,
    IN_FLIGHT_POLL_S,
    LATE_SEND_S,
    LEASE_MS,
    MIN_PACE,
    SEND_SPACING,
    Limits,
    Permit,
    pace_step,
    sends_per_window,
)

# Keys expire when a model goes quiet, so Redis holds state only for models in use.
STATE_TTL_MS = 600_000
# The quickest lag from a send's record to its leaving is the least of the last this many
# to twice as many sends': a step of either host's clock is forgotten after that many.
QUICKEST_LAG_SPAN = 500

_LUA_RESERVE = """
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
"""

# Free the call's slot, correct its tokens, and hand the slot to the first waiter.
_LUA_FINISH = """
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
  local cut = string.find(waiter, '\\n', 1, true)
  redis.call('RPUSH', string.sub(waiter, 1, cut - 1), string.sub(waiter, cut + 1))
end
return 1
"""

# Release as many waiters as the model has free slots (its slot-holders may have died).
_LUA_RELEASE = """
local now_parts = redis.call('TIME')
local now = now_parts[1] * 1000 + math.floor(now_parts[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local cap = tonumber(redis.call('GET', KEYS[3]) or '0')
local free = cap - redis.call('ZCARD', KEYS[2])
if cap == 0 then free = redis.call('LLEN', KEYS[1]) end
local moved = 0
while moved < free do
  local waiter = redis.call('LPOP', KEYS[1])
  if not waiter then break end
  local cut = string.find(waiter, '\\n', 1, true)
  redis.call('RPUSH', string.sub(waiter, 1, cut - 1), string.sub(waiter, cut + 1))
  moved = moved + 1
end
return moved
"""

# The send gate (jury.worker.limits.ratelimit.send_wait), cluster-wide: a model's latest sends in a
# list, the latest first. Returns {wait, 0}, or {0, the send's recorded time}. A wait is
# rounded up: Redis truncates a Lua number to an integer reply, and a wait under a
# millisecond, truncated to 0, read as "send now" without recording the send.
_LUA_GATE = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local pace = tonumber(redis.call('GET', KEYS[2]) or '1')
local interval = tonumber(ARGV[1]) / pace
local stretch = tonumber(ARGV[3])
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
"""

# A send recorded at ARGV[1] left ARGV[2] ms later (never later than now): move it there,
# keeping the list the latest first. Gone from the list already: nothing to do.
_LUA_LATE_SEND = """
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
"""

_LUA_COOL = """
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], 1, 'PX', ARGV[1])
end
return 1
"""

_LUA_SLOW = """
local pace = tonumber(redis.call('GET', KEYS[1]) or '1')
redis.call('SET', KEYS[1], math.max(tonumber(ARGV[2]), pace * tonumber(ARGV[1])), 'PX', ARGV[3])
return 1
"""


class RecentMinimum:
    """The least value observed among the last `span` to 2 × `span` (two buckets in turn).
    Shared by a worker's threads unlocked: a lost update only delays it by one value."""

    def __init__(self, span: int) -> None:
        self.span = span
        self._earlier = self._current = float("inf")
        self._seen = 0

    def observe(self, value: float) -> float:
        """Take `value` in; returns the least recent value, `value` included."""
        self._seen += 1
        if self._seen > self.span:
            self._earlier, self._current, self._seen = self._current, float("inf"), 1
        self._current = min(self._current, value)
        return min(self._earlier, self._current)


def model_keys(prefix: str, key: str) -> list[str]:
    base = f"{prefix}{{{key}}}"  # one hash tag: all of a model's keys on one Redis Cluster slot
    names = ("rpm", "tpm", "cool", "inflight", "defer", "pace", "cap", "waiters", "sends")
    return [f"{base}:{name}" for name in names]


class RedisRateLimiter:
    def __init__(
        self,
        client: redis.Redis,
        horizon_s: float,
        prefix: str = "jury:rl:",
        margin: float = 0.0,
        lines_key: str = LINES_KEY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.clock = clock  # this worker's wall clock, against the send gate's records
        self._quickest_lag = RecentMinimum(QUICKEST_LAG_SPAN)
        # Per model, the send this process last let through, until it leaves (`sent`). One
        # event loop passes a model's gate one call at a time (gating.gate_turn); loops in
        # other threads may take each other's record: a lateness then reads shorter.
        self._passed: dict[str, int] = {}
        self.horizon_ms = horizon_s * 1000
        self.margin = margin
        self.prefix = prefix
        self.lines_key = lines_key
        self._reserve = client.register_script(_LUA_RESERVE)
        self._finish = client.register_script(_LUA_FINISH)
        self._release = client.register_script(_LUA_RELEASE)
        self._cool = client.register_script(_LUA_COOL)
        self._slow = client.register_script(_LUA_SLOW)
        self._gate = client.register_script(_LUA_GATE)
        self._late_send = client.register_script(_LUA_LATE_SEND)

    def reserve(self, key: str, limits: Limits, tokens: int, token: str) -> Permit:
        keys = model_keys(self.prefix, key)
        outcome, wait_ms = self._reserve(
            keys=keys[:7],
            args=[
                limits.rpm or 0,
                limits.tpm or 0,
                limits.max_in_flight or 0,
                tokens,
                self.horizon_ms,
                token,
                STATE_TTL_MS,
                LEASE_MS,
                self.margin,
                pace_step(limits),
            ],
        )
        if outcome == BUSY:
            # The line joins the set of lines when a task waits in it (Parking.wait_in_line).
            return Permit(BUSY, IN_FLIGHT_POLL_S, token, line=keys[7])
        return Permit(int(outcome), max(0.0, float(wait_ms) / 1000), token)

    def finish(self, key: str, limits: Limits, token: str, extra_tokens: int) -> None:
        if not (limits.max_in_flight or (limits.tpm and extra_tokens)):
            return  # no slot held, nothing to charge: spare the round trip
        keys = model_keys(self.prefix, key)
        self._finish(
            keys=[keys[1], keys[3], keys[7]],
            args=[token, limits.tpm or 0, extra_tokens, STATE_TTL_MS],
        )

    def cool_down(self, key: str, seconds: float) -> None:
        self._cool(keys=[model_keys(self.prefix, key)[2]], args=[max(1, int(seconds * 1000))])

    def send_gate(self, key: str, limits: Limits) -> float:
        if not limits.rpm:
            return 0.0
        keys = model_keys(self.prefix, key)
        interval_ms = 60000 / limits.rpm * (1 + self.margin)
        stretch = sends_per_window(limits.rpm)
        wait_ms, sent_at_ms = self._gate(
            keys=[keys[8], keys[5]], args=[interval_ms, STATE_TTL_MS, stretch, SEND_SPACING]
        )
        if wait_ms > 0:
            return float(wait_ms) / 1000
        self._passed[key] = int(sent_at_ms)
        return 0.0

    def sent(self, key: str) -> None:
        recorded_ms = self._passed.pop(key, None)
        if recorded_ms is None:
            return
        # From the send's record to its leaving, on two clocks (Redis' and this worker's,
        # perhaps on two hosts): what exceeds the quickest such lag is the send's lateness.
        lag = self.clock() - recorded_ms / 1000
        if (late := lag - self._quickest_lag.observe(lag)) > LATE_SEND_S:
            keys = model_keys(self.prefix, key)
            # Run as an event loop's callback: a Redis error here would only be logged with
            # a traceback. The correction lost, the next send is spaced as before.
            with contextlib.suppress(redis.RedisError):
                self._late_send(keys=[keys[8]], args=[recorded_ms, round(late * 1000)])

    def slow_down(self, key: str, factor: float) -> None:
        pace_key = model_keys(self.prefix, key)[5]
        self._slow(keys=[pace_key], args=[factor, MIN_PACE, STATE_TTL_MS])

    def release_waiters(self) -> int:
        """Move waiters of every line whose model has free slots back to their queues."""
        moved = 0
        for raw in self.client.smembers(self.lines_key):
            line = raw.decode() if isinstance(raw, bytes) else str(raw)
            base = line.removesuffix(":waiters")
            count = int(self._release(keys=[line, f"{base}:inflight", f"{base}:cap"]))
            moved += count
            if count == 0:
                self._forget_if_empty(line)
        return moved

    def _forget_if_empty(self, line: str) -> None:
        """Take an empty line out of the set, unless a waiter joins it meanwhile (WATCH): a
        line left out of the set would be seen by neither this safety net nor the lost-task
        watch."""
        with self.client.pipeline() as pipe:
            try:
                pipe.watch(line)
                if pipe.exists(line):
                    return
                pipe.multi()
                pipe.srem(self.lines_key, line)
                pipe.execute()
            except redis.WatchError:
                pass  # a waiter joined: the line stays
