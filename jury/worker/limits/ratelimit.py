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

The provider is listened to as well: a 429 silences the model for its Retry-After and cuts its
pace (the fraction of the quota calls are spaced for) by a factor; rate-limit headers that say
the provider's window is nearly spent cut it a little; every granted call restores a little of
it, so the cluster-wide pace settles just under what the provider really allows.

Two implementations behind one interface, like dramatiq's rate limiters: `RedisRateLimiter`
(jury.worker.limits.redis_limiter: atomic Lua, Redis' clock, shared by the cluster) and
`MemoryRateLimiter` (one process, an injectable clock, for unit tests). Both are tested by one
parametrised fixture.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol


@dataclass(frozen=True)
class Limits:
    rpm: int | None = None
    tpm: int | None = None
    max_in_flight: int | None = None

    @property
    def active(self) -> bool:
        return bool(self.rpm or self.tpm or self.max_in_flight)


class Outcome(IntEnum):
    """What a reservation got; the values are the Lua script's (rate_reserve.lua)."""

    DEFERRED = 0
    GRANTED = 1
    BUSY = 2
    COOLING = 3


@dataclass(frozen=True)
class Permit:
    """GRANTED: call after `wait_s` (a reserved slot). DEFERRED: the next slot is beyond the
    horizon; come back in `wait_s`. BUSY: every in-flight slot is taken; poll again in
    `wait_s`. COOLING: a 429 silenced the model for `wait_s` more."""

    outcome: Outcome
    wait_s: float
    token: str = ""
    # BUSY: the model's waiting line, where a task that must wait for a slot can park.
    line: str = ""

    @property
    def granted(self) -> bool:
        return self.outcome == Outcome.GRANTED


class RateLimiter(Protocol):
    def reserve(self, key: str, limits: Limits, tokens: int, token: str) -> Permit: ...

    def finish(self, key: str, limits: Limits, token: str, extra_tokens: int) -> None:
        """The call is over: free its in-flight slot; charge (or refund) the difference
        between its actual and its estimated tokens."""

    def cool_down(self, key: str, seconds: float) -> None:
        """A 429: no call to this model, from any worker, for `seconds`."""

    def send_gate(self, key: str, limits: Limits) -> float:
        """Just before a call is sent: 0 (send it now, recorded as the model's latest send),
        or how long to wait (send_wait): SEND_SPACING of an rpm interval after the model's
        last send, and no more than SEND_WINDOW_S of quota in any SEND_WINDOW_S. A call that
        woke late for its slot (a busy CPU) would otherwise leave together with the calls
        after it, and a provider counting a short window would answer 429."""

    def sent(self, key: str) -> None:
        """The send this process last let through the gate for `key` is leaving now (its
        request is being written). One that left more than LATE_SEND_S after its record (a
        worker descheduled, an event loop busy with other calls) is recorded when it left:
        spaced from its earlier record, the sends after it would fill the provider's window
        for the second after it."""

    def slow_down(self, key: str, factor: float) -> None:
        """The provider pushed back (a 429, or its headers say its window is nearly spent):
        every worker paces this model at `factor` of its current pace. Each granted call
        then speeds it up again a little, up to the full quota (additive increase,
        multiplicative decrease)."""


# An in-flight slot is freed after this long even if its worker died holding it.
LEASE_MS = 300_000
# Waiting for an in-flight slot within a call (a retry's): poll again this soon.
IN_FLIGHT_POLL_S = 0.2
# The least gap between two sends of a model, as a share of its rpm interval: a little less
# than the interval, so that calls on time never wait at the gate, and calls that bunched
# after a stall are spread out again.
SEND_SPACING = 0.9
# ...but within any stretch of sends worth this many seconds of quota, never faster than the
# quota: the shortest window providers are known to count a quota over (OpenAI: "per second").
# Without it, calls catching up after a stall at 1/SEND_SPACING of the pace filled the
# provider's one-second window, and the send a window after a late one met it full.
SEND_WINDOW_S = 1.0
# A send that leaves this long after the gate recorded it is recorded again when it left:
# at the default 2 % margin a one-second window has 20 ms of play. Measured under
# bench/ratelimit's CPU hog on Python 3.11 (whose aiohttp writes a request in a task queued
# behind whatever the event loop had ready): sends reached the provider 1-2.5 ms after
# leaving the gate at the median, 19-21 ms at the 99th percentile, 41 ms at most.
LATE_SEND_S = 0.003
# The pace never falls below this fraction of the quota: 429s beyond it are the provider's
# (another client on the same key, a smaller quota than declared), and the cool-down after
# each handles them.
MIN_PACE = 0.8
# After a slow-down the pace gets this much back per ten seconds of calls at the full rate.
PACE_RECOVERY = 0.2


def sends_per_window(rpm: int) -> int:
    return max(1, round(rpm * SEND_WINDOW_S / 60))


def send_wait(sends: Sequence[float], now: float, interval: float, stretch: int) -> float:
    """How long a send waits at the gate (seconds, <= 0: now), given the model's latest sends
    (the latest first): SEND_SPACING of an interval after the last one, and `stretch`
    intervals after the one `stretch` sends back. (_LUA_GATE in jury.worker.limits.redis_limiter
    is the same rule in Redis.)"""
    if not sends:
        return 0.0
    wait = sends[0] + interval * SEND_SPACING - now
    if len(sends) >= stretch:
        wait = max(wait, sends[stretch - 1] + stretch * interval - now)
    return wait


def moved_send(sends: deque[float], recorded: float, left: float) -> None:
    """Move the send recorded at `recorded` to `left` in `sends` (the latest first), if it
    is still there."""
    if recorded in sends:
        sends.remove(recorded)
        sends.append(left)
        ordered = sorted(sends, reverse=True)
        sends.clear()
        sends.extend(ordered)


def pace_step(limits: Limits) -> float:
    """How much of the quota each granted call gives back after a slow-down."""
    calls_in_ten_seconds = max(1.0, (limits.rpm or 600) / 6)
    return PACE_RECOVERY / calls_in_ten_seconds


@dataclass
class _ModelState:
    rpm_tat: float = 0.0
    tpm_tat: float = 0.0
    cool_until: float = 0.0
    defer: float = 0.0
    pace: float = 1.0
    sends: deque[float] = field(default_factory=deque)  # the latest first
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
        self._passed: dict[str, float] = {}  # per model, the send last let through

    def reserve(self, key: str, limits: Limits, tokens: int, token: str) -> Permit:
        now = self.clock()
        state = self.models.setdefault(key, _ModelState())
        if state.cool_until > now:
            return Permit(Outcome.COOLING, state.cool_until - now, token)
        if limits.max_in_flight:
            state.in_flight = {t: end for t, end in state.in_flight.items() if end > now}
            if len(state.in_flight) >= limits.max_in_flight:
                return Permit(Outcome.BUSY, IN_FLIGHT_POLL_S, token, line=key)
        slack = self.slack / state.pace
        rpm_step = 60 / limits.rpm * slack if limits.rpm else 0.0
        tpm_step = tokens * 60 / limits.tpm * slack if limits.tpm else 0.0
        start = max(now, state.rpm_tat if limits.rpm else now, state.tpm_tat if limits.tpm else now)
        if start - now <= self.horizon:
            if limits.rpm:
                state.rpm_tat = start + rpm_step
            if limits.tpm:
                state.tpm_tat = start + tpm_step
            if limits.max_in_flight:
                state.in_flight[token] = start + LEASE_MS / 1000
            state.pace = min(1.0, state.pace + pace_step(limits))
            return Permit(Outcome.GRANTED, start - now, token)
        defer = max(state.defer, start)
        state.defer = defer + max(rpm_step, tpm_step)
        return Permit(Outcome.DEFERRED, defer - now - self.horizon / 2, token)

    def finish(self, key: str, limits: Limits, token: str, extra_tokens: int) -> None:
        state = self.models.setdefault(key, _ModelState())
        state.in_flight.pop(token, None)
        if limits.tpm and extra_tokens:
            state.tpm_tat = max(state.tpm_tat + extra_tokens * 60 / limits.tpm, self.clock())

    def cool_down(self, key: str, seconds: float) -> None:
        state = self.models.setdefault(key, _ModelState())
        state.cool_until = max(state.cool_until, self.clock() + seconds)

    def slow_down(self, key: str, factor: float) -> None:
        state = self.models.setdefault(key, _ModelState())
        state.pace = max(MIN_PACE, state.pace * factor)

    def send_gate(self, key: str, limits: Limits) -> float:
        state = self.models.setdefault(key, _ModelState())
        now = self.clock()
        if not limits.rpm:
            return 0.0
        interval = 60 / limits.rpm * self.slack / state.pace
        stretch = sends_per_window(limits.rpm)
        wait = send_wait(state.sends, now, interval, stretch)
        if wait > 0:
            return wait
        state.sends.appendleft(now)
        while len(state.sends) > stretch:
            state.sends.pop()
        self._passed[key] = now
        return 0.0

    def sent(self, key: str) -> None:
        recorded = self._passed.pop(key, None)
        left = self.clock()
        if recorded is not None and left - recorded > LATE_SEND_S:
            moved_send(self.models.setdefault(key, _ModelState()).sends, recorded, left)
