"""The send gate: sends spaced at the quota, never more than a second's quota in any second,
late calls taking turns, and a send that left late recorded when it left. Both limiters, by the
parametrised `limiter` fixture (conftest), where the rule is the same."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import cast

import pytest
import redis

from jury.broker.keys import model_keys
from jury.schemas.batch import Judge
from jury.worker.limits.gating import GatedCall, rate_key
from jury.worker.limits.ratelimit import (
    SEND_SPACING,
    Limits,
    MemoryRateLimiter,
    Outcome,
    Permit,
    RateLimiter,
)
from jury.worker.limits.redis_limiter import RecentMinimum, RedisRateLimiter
from tests.conftest import LIMITER_HORIZON_S as HORIZON
from tests.conftest import FakeClock
from tests.integration.test_ratelimit import SpentReply


def test_the_send_gate_spaces_sends(limiter: RateLimiter) -> None:
    """Sends leave at least SEND_SPACING of an rpm interval apart, cluster-wide: a call that
    woke late does not leave together with the next one."""
    limits = Limits(rpm=600)  # 100 ms apart

    def spaced(spacing: float) -> bool:  # Redis' clock moves on between two calls
        return spacing - 0.03 < limiter.send_gate("m", limits) <= spacing + 0.001

    assert limiter.send_gate("m", limits) == 0.0
    assert spaced(0.1 * SEND_SPACING)
    limiter.slow_down("m", 0.8)  # the pace widens the spacing too
    assert spaced(0.1 * SEND_SPACING / 0.8)
    assert limiter.send_gate("m", Limits()) == 0.0  # no rpm: no gate


def test_no_second_holds_more_sends_than_its_quota(limiter: RateLimiter) -> None:
    """Calls passing the gate as fast as it lets them (late calls catching up) leave
    SEND_SPACING of an interval apart, but never more than a second's quota in any second:
    a provider counting its quota per second would answer the surplus 429."""
    limits = Limits(rpm=1200)  # 20 a second, 50 ms apart
    clock = getattr(limiter, "clock", None)

    def recorded() -> float:
        """When the gate recorded the send it just let through: on the fake clock, or, in
        Redis, the record itself (Redis' clock, to the millisecond). Timed on this test's
        clock instead, a reply read late on a busy machine looked like a bunched send."""
        if isinstance(clock, FakeClock):
            return clock()
        assert isinstance(limiter, RedisRateLimiter)
        # the client does not decode responses: the record is there, as bytes
        record = cast(bytes, limiter.client.lindex(model_keys(limiter.prefix, "m").sends, 0))
        return int(record) / 1000

    sent: list[float] = []
    while len(sent) < 30:
        wait = limiter.send_gate("m", limits)
        if wait <= 0:
            sent.append(recorded())
        elif isinstance(clock, FakeClock):
            clock.now += wait
        else:
            time.sleep(wait)  # the gate's own wait, as a worker sleeps it
    # Redis records sends to the millisecond. Without the window rule 21 sends would span
    # 0.9 s.
    play = 1e-9 if isinstance(clock, FakeClock) else 0.001
    gaps = [later - earlier for earlier, later in itertools.pairwise(sent)]
    assert min(gaps) >= 0.05 * SEND_SPACING - play  # spaced...
    assert min(gaps) < 0.05 * 0.95  # ...catching up, closer than the pace...
    spans = [sent[i + 20] - sent[i] for i in range(len(sent) - 20)]
    assert min(spans) >= 1.0 - play  # ...but 21 sends always span a second


def test_the_quickest_lag_forgets_a_clock_step() -> None:
    """A host's clock stepping forward makes every later lag look late: the quickest lag
    forgets the values before the step within two spans, so sends stop being moved."""
    quickest = RecentMinimum(span=10)
    assert [quickest.observe(v) for v in (0.005, 0.002, 0.004)] == [0.005, 0.002, 0.002]
    after_step = [quickest.observe(1.003) for _ in range(20)]
    assert after_step[0] == 0.002  # still the old clock's...
    assert after_step[-1] == 1.003  # ...then the new one's: no lag counts as late


def test_a_late_send_is_moved_among_thousands(redis_limiter: RedisRateLimiter) -> None:
    """A model with a huge quota keeps thousands of sends in its record (a second's worth):
    moving a late one rewrites them all, more than Lua's stack holds at once."""
    limiter, client = redis_limiter, redis_limiter.client
    limits = Limits(rpm=600_000)  # 10,000 sends a second
    sends = model_keys(limiter.prefix, "m").sends
    long_ago = redis_ms(client) - 10_000
    client.rpush(sends, *range(long_ago, long_ago - 9_000, -1))
    assert limiter.send_gate("m", limits) == 0.0
    limiter.sent("m")  # on time: the quickest
    while (wait := limiter.send_gate("m", limits)) > 0:
        time.sleep(wait)  # the gate's own wait, as a worker sleeps it
    time.sleep(0.040)  # the worker, busy before the request leaves (not a synchronisation)
    limiter.sent("m")
    latest = [int(sent) for sent in client.lrange(sends, 0, 1)]
    assert latest[0] - latest[1] >= 25  # the late one moved to when it left
    assert client.llen(sends) == 9_002


def redis_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_a_send_that_left_late_is_recorded_when_it_left(limiter: RateLimiter) -> None:
    """A send that leaves well after the gate let it through (its worker descheduled, its
    event loop busy) is recorded when it left: the next send is spaced from that, else the
    send a second's quota later would meet the provider's window full."""
    limits = Limits(rpm=60)  # a send a second: the one before must be a second ago
    clock = getattr(limiter, "clock", None)

    def busy(seconds: float) -> None:  # the worker, busy before the request leaves
        if isinstance(clock, FakeClock):
            clock.now += seconds
        else:
            time.sleep(seconds)  # the delay being modelled, not a synchronisation

    assert limiter.send_gate("other", limits) == 0.0
    limiter.sent("other")  # on time: the quickest a send leaves
    assert limiter.send_gate("m", limits) == 0.0
    busy(0.040)
    limiter.sent("m")
    limiter.sent("m")  # nothing let through since: nothing to move
    if isinstance(limiter, MemoryRateLimiter):
        assert limiter.send_gate("m", limits) == pytest.approx(1.0)  # not 0.96
        return
    assert isinstance(limiter, RedisRateLimiter)
    client = limiter.client
    [late] = [int(sent) for sent in client.lrange(model_keys(limiter.prefix, "m").sends, 0, -1)]
    [on_time] = [
        int(sent) for sent in client.lrange(model_keys(limiter.prefix, "other").sends, 0, -1)
    ]
    assert late - on_time >= 25  # moved by its lateness (not by the 1-2 ms between)
    assert late <= redis_ms(client)  # never past the present
    wait = limiter.send_gate("m", limits)
    assert wait * 1000 >= late + 1000 - redis_ms(client) - 1  # spaced from when it left


class CountingGate(MemoryRateLimiter):
    """The in-memory limiter on the real clock, counting how often the send gate is asked."""

    def __init__(self, horizon_s: float) -> None:
        super().__init__(horizon_s)
        self.gate_asks = 0
        self.left: list[str] = []  # the keys whose sends were told to have left

    def sent(self, key: str) -> None:
        self.left.append(key)
        super().sent(key)

    def reserve(self, key: str, limits: Limits, tokens: int, token: str) -> Permit:
        return Permit(Outcome.GRANTED, 0.0, token)  # every slot is past: the calls woke late

    def send_gate(self, key: str, limits: Limits) -> float:
        self.gate_asks += 1
        return super().send_gate(key, limits)


def test_late_calls_take_turns_at_the_send_gate() -> None:
    """Twenty calls that woke late for their slots reach the send gate together: they leave
    one gate interval apart, and only one at a time asks the gate, each not before the
    process's last send allows: so the gate is asked about once per call, not once per
    waiting call at every send."""
    limiter = CountingGate(HORIZON)
    judge = Judge(model="openai/x", rpm=6000)  # a send every 9 ms at the gate
    sent: list[float] = []

    async def answer(judge: Judge, messages: list[dict[str, str]]) -> SpentReply:
        sent.append(time.monotonic())
        return SpentReply(remaining_requests=100)

    async def crowd() -> None:
        calls = [GatedCall(answer, limiter, HORIZON) for _ in range(20)]
        await asyncio.gather(*(call(judge, [{"role": "user", "content": "x"}]) for call in calls))

    asyncio.run(crowd())
    assert len(sent) == 20
    assert max(sent) - min(sent) >= 19 * 0.009 * 0.9  # spaced, not sent at once
    assert limiter.gate_asks <= 1.5 * 20
    assert limiter.left == [rate_key(judge)] * 20  # each send's leaving told to the limiter


class RecordingGate(RedisRateLimiter):
    """The gate in Redis, every slot granted at once (the calls woke late), each send the
    gate records kept, and each ask counted."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        super().__init__(client, HORIZON, prefix=prefix)
        self.records: list[float] = []
        self.asks = 0

    def reserve(self, key: str, limits: Limits, tokens: int, token: str) -> Permit:
        return Permit(Outcome.GRANTED, 0.0, token)

    def send_gate(self, key: str, limits: Limits) -> float:
        self.asks += 1
        wait = super().send_gate(key, limits)
        if wait <= 0:
            self.records.append(self._passed[key] / 1000)  # Redis' clock, to the millisecond
        return wait


def test_crowds_asking_no_sooner_than_their_last_send_never_exceed_a_second_s_quota(
    redis_limiter: RedisRateLimiter,
) -> None:
    """Two workers' crowds of late calls (two event loops in two threads, each skipping the
    asks its own last send makes useless) through the gate in Redis: every call is sent, as
    the gate recorded them no second holds more than its quota, and each call asks the gate
    about once."""
    judge = Judge(model="openai/crowd", rpm=1200)  # 20 a second
    prefix = redis_limiter.prefix + "crowds:"
    gates = [RecordingGate(redis_limiter.client, prefix) for _ in range(2)]

    async def answer(judge: Judge, messages: list[dict[str, str]]) -> SpentReply:
        return SpentReply(remaining_requests=100)

    async def crowd(gate: RecordingGate) -> None:
        calls = [GatedCall(answer, gate, HORIZON) for _ in range(25)]
        await asyncio.gather(*(call(judge, [{"role": "user", "content": "x"}]) for call in calls))

    workers = [threading.Thread(target=asyncio.run, args=(crowd(gate),)) for gate in gates]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    sends = sorted(gates[0].records + gates[1].records)
    assert len(sends) == 50
    spans = [sends[i + 20] - sends[i] for i in range(len(sends) - 20)]
    assert min(spans) >= 1.0 - 0.001  # 21 sends always span a second
    assert min(b - a for a, b in itertools.pairwise(sends)) >= 0.05 * SEND_SPACING - 0.001
    # About once per call on a quiet host; a loaded one wakes calls late and they ask again.
    # Asked at every send by every waiting call, it would be some 600.
    assert gates[0].asks + gates[1].asks <= 3 * 50
