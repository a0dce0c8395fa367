"""Cluster-wide rate limits: requests per minute, tokens per minute, calls in flight, and a
shared cool-down after a 429 — one limit for every worker process on every host.

The algorithm is GCRA (the generic cell rate algorithm) with reservations: each limit keeps a
"theoretical arrival time" (TAT); a call reserves the next free slot, at most `horizon` ahead,
and moves the TAT on by one emission interval (60 s / rpm, and tokens × 60 s / tpm). Calls are
thus spaced evenly at exactly the quota, never bunched, so a provider's sliding window sees
no burst. A small margin (`JURY_RATE_MARGIN`, 1 %) spaces them a little wider than the quota:
a call that leaves late (thread wake-up, a busy CPU) would otherwise bunch with the next one
at the provider, and a provider that quantizes its limit (per second, per ten seconds) would
answer 429. A call whose slot lies further ahead than the horizon is *deferred*: it is handed a
later start, spread one interval apart from the other deferred calls, and its task is retried
then instead of holding a worker thread.

Two implementations behind one interface, like dramatiq's rate limiters: `RedisRateLimiter`
(atomic Lua, Redis' clock, shared by the cluster) and `MemoryRateLimiter` (one process, an
injectable clock, for unit tests). Both are tested by one parametrised fixture.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import redis


@dataclass(frozen=True)
class Limits:
    rpm: int | None = None
    tpm: int | None = None
    max_in_flight: int | None = None

    @property
    def active(self) -> bool:
        return bool(self.rpm or self.tpm or self.max_in_flight)


GRANTED, DEFERRED, BUSY, COOLING = 1, 0, 2, 3


@dataclass(frozen=True)
class Permit:
    """GRANTED: call after `wait_s` (a reserved slot). DEFERRED: the next slot is beyond the
    horizon; come back in `wait_s`. BUSY: every in-flight slot is taken; poll again in
    `wait_s`. COOLING: a 429 silenced the model for `wait_s` more."""

    outcome: int
    wait_s: float
    token: str = ""

    @property
    def granted(self) -> bool:
        return self.outcome == GRANTED


class RateLimiter(Protocol):
    def reserve(self, key: str, limits: Limits, tokens: int, token: str) -> Permit: ...

    def finish(self, key: str, limits: Limits, token: str, extra_tokens: int) -> None:
        """The call is over: free its in-flight slot; charge (or refund) the difference
        between its actual and its estimated tokens."""

    def cool_down(self, key: str, seconds: float) -> None:
        """A 429: no call to this model, from any worker, for `seconds`."""


# Keys expire when a model goes quiet, so Redis holds state only for models in use.
STATE_TTL_MS = 600_000
# An in-flight slot is freed after this long even if its worker died holding it.
LEASE_MS = 300_000

_LUA_RESERVE = """
local now_parts = redis.call('TIME')
local now = now_parts[1] * 1000 + math.floor(now_parts[2] / 1000)
local rpm, tpm, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens, horizon, token = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local ttl, lease, slack = tonumber(ARGV[7]), tonumber(ARGV[8]), 1 + tonumber(ARGV[9])
local cool = redis.call('PTTL', KEYS[3])
if cool > 0 then return {3, cool} end
if cap > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  if redis.call('ZCARD', KEYS[4]) >= cap then return {2, 0} end
end
local start = now
local rpm_tat, tpm_tat = now, now
if rpm > 0 then rpm_tat = math.max(tonumber(redis.call('GET', KEYS[1]) or now), now) end
if tpm > 0 then tpm_tat = math.max(tonumber(redis.call('GET', KEYS[2]) or now), now) end
start = math.max(rpm_tat, tpm_tat)
local rpm_step, tpm_step = 0, 0
if rpm > 0 then rpm_step = 60000 / rpm * slack end
if tpm > 0 then tpm_step = tokens * 60000 / tpm * slack end
if start - now <= horizon then
  if rpm > 0 then redis.call('SET', KEYS[1], start + rpm_step, 'PX', ttl) end
  if tpm > 0 then redis.call('SET', KEYS[2], start + tpm_step, 'PX', ttl) end
  if cap > 0 then redis.call('ZADD', KEYS[4], start + lease, token) end
  return {1, start - now}
end
local defer = math.max(tonumber(redis.call('GET', KEYS[5]) or now), start)
redis.call('SET', KEYS[5], defer + math.max(rpm_step, tpm_step), 'PX', ttl)
return {0, defer - now - horizon / 2}
"""

_LUA_FINISH = """
local now_parts = redis.call('TIME')
local now = now_parts[1] * 1000 + math.floor(now_parts[2] / 1000)
redis.call('ZREM', KEYS[2], ARGV[1])
local tpm, extra = tonumber(ARGV[2]), tonumber(ARGV[3])
if tpm > 0 and extra ~= 0 then
  local tat = tonumber(redis.call('GET', KEYS[1]) or now)
  redis.call('SET', KEYS[1], math.max(tat + extra * 60000 / tpm, now), 'PX', tonumber(ARGV[4]))
end
return 1
"""

_LUA_COOL = """
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], 1, 'PX', ARGV[1])
end
return 1
"""

# Waiting for an in-flight slot: poll again this soon.
IN_FLIGHT_POLL_S = 0.2


def _keys(prefix: str, key: str) -> list[str]:
    base = f"{prefix}{{{key}}}"  # one hash tag: all of a model's keys on one Redis Cluster slot
    return [f"{base}:rpm", f"{base}:tpm", f"{base}:cool", f"{base}:inflight", f"{base}:defer"]


class RedisRateLimiter:
    def __init__(
        self,
        client: redis.Redis,
        horizon_s: float,
        prefix: str = "jury:rl:",
        margin: float = 0.0,
    ) -> None:
        self.client = client
        self.horizon_ms = horizon_s * 1000
        self.margin = margin
        self.prefix = prefix
        self._reserve = client.register_script(_LUA_RESERVE)
        self._finish = client.register_script(_LUA_FINISH)
        self._cool = client.register_script(_LUA_COOL)

    def reserve(self, key: str, limits: Limits, tokens: int, token: str) -> Permit:
        outcome, wait_ms = self._reserve(
            keys=_keys(self.prefix, key),
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
            ],
        )
        wait = IN_FLIGHT_POLL_S if outcome == BUSY else max(0.0, float(wait_ms) / 1000)
        return Permit(int(outcome), wait, token)

    def finish(self, key: str, limits: Limits, token: str, extra_tokens: int) -> None:
        if not (limits.max_in_flight or (limits.tpm and extra_tokens)):
            return  # no slot held, nothing to charge: spare the round trip
        keys = _keys(self.prefix, key)
        self._finish(
            keys=[keys[1], keys[3]], args=[token, limits.tpm or 0, extra_tokens, STATE_TTL_MS]
        )

    def cool_down(self, key: str, seconds: float) -> None:
        self._cool(keys=[_keys(self.prefix, key)[2]], args=[max(1, int(seconds * 1000))])


@dataclass
class _ModelState:
    rpm_tat: float = 0.0
    tpm_tat: float = 0.0
    cool_until: float = 0.0
    defer: float = 0.0
    in_flight: dict[str, float] = field(default_factory=dict)


class MemoryRateLimiter:
    """The same algorithm in one process, with an injectable clock (seconds)."""

    def __init__(
        self, horizon_s: float, clock: Callable[[], float] = time.monotonic, margin: float = 0.0
    ) -> None:
        self.horizon = horizon_s
        self.clock = clock
        self.slack = 1 + margin
        self.models: dict[str, _ModelState] = {}

    def reserve(self, key: str, limits: Limits, tokens: int, token: str) -> Permit:
        now = self.clock()
        state = self.models.setdefault(key, _ModelState())
        if state.cool_until > now:
            return Permit(COOLING, state.cool_until - now, token)
        if limits.max_in_flight:
            state.in_flight = {t: end for t, end in state.in_flight.items() if end > now}
            if len(state.in_flight) >= limits.max_in_flight:
                return Permit(BUSY, IN_FLIGHT_POLL_S, token)
        rpm_step = 60 / limits.rpm * self.slack if limits.rpm else 0.0
        tpm_step = tokens * 60 / limits.tpm * self.slack if limits.tpm else 0.0
        start = max(now, state.rpm_tat if limits.rpm else now, state.tpm_tat if limits.tpm else now)
        if start - now <= self.horizon:
            if limits.rpm:
                state.rpm_tat = start + rpm_step
            if limits.tpm:
                state.tpm_tat = start + tpm_step
            if limits.max_in_flight:
                state.in_flight[token] = start + LEASE_MS / 1000
            return Permit(GRANTED, start - now, token)
        defer = max(state.defer, start)
        state.defer = defer + max(rpm_step, tpm_step)
        return Permit(DEFERRED, defer - now - self.horizon / 2, token)

    def finish(self, key: str, limits: Limits, token: str, extra_tokens: int) -> None:
        state = self.models.setdefault(key, _ModelState())
        state.in_flight.pop(token, None)
        if limits.tpm and extra_tokens:
            state.tpm_tat = max(state.tpm_tat + extra_tokens * 60 / limits.tpm, self.clock())

    def cool_down(self, key: str, seconds: float) -> None:
        state = self.models.setdefault(key, _ModelState())
        state.cool_until = max(state.cool_until, self.clock() + seconds)
