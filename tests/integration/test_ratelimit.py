"""The rate limiters, Redis and in-memory, behind one interface and one parametrised fixture
(`limiter`, in conftest); then the Redis one shared by separate processes. The send gate's
tests are in tests/integration/test_send_gate.py."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from bench.common import simulator_stats
from bench.ratelimit import as_a_remote_provider
from jury.batchfile.loading import load_batch
from jury.broker.keys import model_keys
from jury.local.services import start_simulator, wait_for
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.batch import Judge
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.worker.calls.llm_errors import header_duration
from jury.worker.judging.judge_calls import ReplyLike
from jury.worker.limits.gating import Deferred, GatedCall, endpoint_rate_key, holding_slot, rate_key
from jury.worker.limits.ratelimit import (
    MIN_PACE,
    Limits,
    MemoryRateLimiter,
    Outcome,
    Permit,
    RateLimiter,
)
from jury.worker.limits.redis_limiter import RedisRateLimiter
from tests.conftest import LIMITER_HORIZON_S, ROOT, FakeClock
from tests.integration.test_pipeline import write_batch

HORIZON = LIMITER_HORIZON_S


def test_requests_are_spaced_at_the_rpm(limiter: RateLimiter) -> None:
    limits = Limits(rpm=60)  # one a second
    waits = [limiter.reserve("m", limits, 10, f"t{i}") for i in range(4)]
    assert [p.granted for p in waits] == [True, True, True, False]
    assert [p.wait_s for p in waits[:3]] == pytest.approx([0.0, 1.0, 2.0], abs=0.05)
    # The fourth slot (3 s ahead) is past the horizon: deferred, to come back near its slot.
    assert waits[3].wait_s == pytest.approx(3.0 - HORIZON / 2, abs=0.05)
    deferred = limiter.reserve("m", limits, 10, "t5")
    assert not deferred.granted and deferred.wait_s == pytest.approx(waits[3].wait_s + 1, abs=0.05)


def test_models_have_separate_budgets(limiter: RateLimiter) -> None:
    limits = Limits(rpm=60)
    assert limiter.reserve("a", limits, 10, "x").wait_s == pytest.approx(0, abs=0.05)
    assert limiter.reserve("b", limits, 10, "y").wait_s == pytest.approx(0, abs=0.05)


def test_tokens_per_minute_and_the_usage_correction(limiter: RateLimiter) -> None:
    limits = Limits(tpm=6000)  # 100 tokens a second
    assert limiter.reserve("m", limits, 100, "a").wait_s == pytest.approx(0, abs=0.05)
    # The call really used 200 tokens: the next one waits for 2 s, not 1 s.
    limiter.finish("m", limits, "a", extra_tokens=100)
    assert limiter.reserve("m", limits, 50, "b").wait_s == pytest.approx(2.0, abs=0.05)


def test_calls_in_flight_are_capped(limiter: RateLimiter) -> None:
    limits = Limits(max_in_flight=2)
    assert limiter.reserve("m", limits, 1, "a").granted
    assert limiter.reserve("m", limits, 1, "b").granted
    assert not limiter.reserve("m", limits, 1, "c").granted
    limiter.finish("m", limits, "a", 0)
    assert limiter.reserve("m", limits, 1, "c").granted


def test_a_429_cools_the_model_down_for_everyone(limiter: RateLimiter) -> None:
    limiter.cool_down("m", 4.0)
    permit = limiter.reserve("m", Limits(), 1, "a")
    assert not permit.granted and permit.wait_s == pytest.approx(4.0, abs=0.05)
    limiter.cool_down("m", 1.0)  # a shorter cool-down never shortens a longer one
    assert limiter.reserve("m", Limits(), 1, "b").wait_s == pytest.approx(4.0, abs=0.1)


async def never_called(judge: Judge, messages: list[dict[str, str]]) -> ReplyLike:
    raise AssertionError("the call was made without a slot")


def test_gated_call_defers_only_its_first_attempt(limiter: RateLimiter) -> None:
    judge = Judge(model="openai/x", rpm=60)
    slept: list[float] = []
    for i in range(3):  # fill the horizon
        limiter.reserve(
            rate_key(judge),
            Limits(rpm=60),
            1,
            f"f{i}",
        )

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    gated = GatedCall(never_called, limiter, HORIZON, sleep=sleep)
    with pytest.raises(Deferred) as deferred:
        asyncio.run(gated(judge, [{"role": "user", "content": "x"}]))
    assert deferred.value.countdown_s > HORIZON / 2 and slept == []


def test_an_endpoint_s_calls_hold_slots_waited_for_in_the_loop(limiter: RateLimiter) -> None:
    """An HTTP endpoint candidate's limits (a generation is never parked): each call waits
    for its reserved slot in the loop, and its in-flight slot is held until the call ends,
    whatever way it ends."""
    key = endpoint_rate_key("http://staging/chat")
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def three_calls() -> None:
        for _ in range(3):
            async with holding_slot(limiter, key, Limits(rpm=60), sleep):
                pass

    asyncio.run(three_calls())
    assert slept == pytest.approx([1.0, 2.0], abs=0.1)  # one a second
    assert key != endpoint_rate_key("http://staging/other")

    one = Limits(max_in_flight=1)

    async def failing_call() -> None:
        async with holding_slot(limiter, key, one, sleep):
            assert not limiter.reserve(key, one, 0, "meanwhile").granted
            raise ConnectionError("the endpoint fell over")

    with pytest.raises(ConnectionError):
        asyncio.run(failing_call())
    assert limiter.reserve(key, one, 0, "after").granted  # freed when the call failed


def test_a_call_cancelled_before_its_slot_frees_the_slot(limiter: RateLimiter) -> None:
    """Cancelled while it waits for its reserved slot (a task stopped, a deadline passed),
    a call gives its in-flight slot back at once, not after the lease's 5 minutes."""
    key, limits = endpoint_rate_key("http://staging/cancel"), Limits(rpm=60, max_in_flight=2)
    assert limiter.reserve(key, limits, 0, "first").granted  # the next slot is 1 s ahead

    async def cancelled(seconds: float) -> None:
        raise asyncio.CancelledError

    async def waiting_call() -> None:
        async with holding_slot(limiter, key, limits, cancelled):
            raise AssertionError("the call ran without its slot")

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(waiting_call())
    assert limiter.reserve(key, limits, 0, "second").granted  # the cancelled one's slot
    assert not limiter.reserve(key, limits, 0, "third").granted


def test_an_endpoint_s_slot_beyond_the_horizon_is_waited_for_too() -> None:
    clock = FakeClock()
    limiter = MemoryRateLimiter(HORIZON, clock=clock)
    key, limits = endpoint_rate_key("http://staging/chat"), Limits(rpm=20)  # 3 s apart
    started: list[float] = []

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    async def calls() -> None:
        for _ in range(3):
            async with holding_slot(limiter, key, limits, sleep):
                started.append(clock.now)

    asyncio.run(calls())
    assert HORIZON < 3.0  # each next slot lies beyond the horizon when it is asked for
    gaps = [b - a for a, b in itertools.pairwise(started)]
    assert gaps == pytest.approx([3.0, 3.0], abs=0.1)


def test_a_429_slows_the_pace_and_granted_calls_restore_it(limiter: RateLimiter) -> None:
    """AIMD: the 429 cuts the model's pace (calls spaced wider than its rpm); each granted call
    gives a little back, so the pace recovers slowly, never past the quota."""
    limits = Limits(rpm=600)  # 100 ms apart at full pace

    def spacing() -> float:
        first = limiter.reserve("m", limits, 1, secrets.token_hex(4)).wait_s
        return limiter.reserve("m", limits, 1, secrets.token_hex(4)).wait_s - first

    assert spacing() == pytest.approx(0.1, abs=0.01)
    limiter.slow_down("m", 0.8)
    slowed = spacing()
    assert slowed == pytest.approx(0.125, abs=0.01)
    limiter.slow_down("m", 0.1)  # never below MIN_PACE: the floor holds
    assert spacing() == pytest.approx(0.1 / MIN_PACE, abs=0.01)
    for _ in range(6):  # more granted calls, still within the horizon
        assert limiter.reserve("m", limits, 1, secrets.token_hex(4)).granted
    if isinstance(limiter, MemoryRateLimiter):  # Redis' clock moves on: too coarse for this
        recovering = spacing()
        assert 0.1 < recovering < slowed


def test_a_freed_slot_goes_to_the_first_in_line(redis_url: str) -> None:
    """A model at its in-flight cap: the call that finishes moves the first waiting task back
    to its queue; the safety net releases waiters when a slot-holder died."""
    client = redis.Redis.from_url(redis_url)
    prefix = f"jury:rl-test:{secrets.token_hex(4)}:"
    limiter = RedisRateLimiter(client, HORIZON, prefix=prefix, lines_key=f"{prefix}lines")
    queue = f"{prefix}queue"
    limits = Limits(max_in_flight=1)
    try:
        assert limiter.reserve("m", limits, 1, "holder").granted
        busy = limiter.reserve("m", limits, 1, "waiter")
        assert busy.outcome == Outcome.BUSY and busy.line == model_keys(prefix, "m").waiters
        # Two tasks wait in the line, the line in the set (as Parking.wait_in_line does).
        client.sadd(f"{prefix}lines", busy.line)
        client.rpush(busy.line, f"{queue}\nfirst", f"{queue}\nsecond")
        limiter.finish("m", limits, "holder", 0)
        assert client.lrange(queue, 0, -1) == [b"first"]
        assert limiter.release_waiters() == 1  # the cap's one slot is free: one more goes
        assert client.lrange(queue, 0, -1) == [b"first", b"second"]
    finally:
        for key in client.scan_iter(f"{prefix}*"):
            client.delete(key)
        client.close()


SHARE_SCRIPT = """
import json, sys, time, redis
from jury.worker.limits.ratelimit import Limits
from jury.worker.limits.redis_limiter import RedisRateLimiter
client = redis.Redis.from_url(sys.argv[1])
limiter = RedisRateLimiter(client, horizon_s=30, prefix=sys.argv[2])
starts = []
for i in range(int(sys.argv[3])):
    before = time.time()
    permit = limiter.reserve("shared", Limits(rpm=600), 1, f"{sys.argv[4]}-{i}")
    after = time.time()
    assert permit.granted
    starts.append(((before + after) / 2 + permit.wait_s, after - before))
print(json.dumps(starts))
"""


def test_two_processes_share_one_budget(redis_url: str) -> None:
    prefix = f"jury:rl-test:{secrets.token_hex(4)}:"
    env = {"PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SHARE_SCRIPT, redis_url, prefix, "25", name],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        for name in ("p1", "p2")
    ]
    timed = sorted(tuple(s) for p in procs for s in json.loads(p.communicate(timeout=60)[0]))
    assert len(timed) == 50
    # 600 rpm is one call per 100 ms: together they never get more than that. Each start is
    # read off the client's clock, give or take half its round trip, and a process
    # descheduled there (a loaded machine) would shift it by tens of milliseconds: only the
    # starts whose round trip took under 10 ms are counted.
    exact = [start for start, round_trip in timed if round_trip < 0.01]
    assert len(exact) >= 20, f"only {len(exact)} quick round trips: the machine is too busy"
    gaps = [b - a for a, b in itertools.pairwise(exact)]
    assert min(gaps) >= 0.1 - 0.01
    assert max(sum(1 for s in exact if t <= s < t + 0.99) for t in exact) <= 10


def test_cool_down_reaches_another_process(redis_url: str) -> None:
    prefix = f"jury:rl-test:{secrets.token_hex(4)}:"
    RedisRateLimiter(redis.Redis.from_url(redis_url), 1.0, prefix=prefix).cool_down("m", 3.0)
    script = (
        "import sys, redis\n"
        "from jury.worker.limits.ratelimit import Limits\n"
        "from jury.worker.limits.redis_limiter import RedisRateLimiter\n"
        "limiter = RedisRateLimiter(redis.Redis.from_url(sys.argv[1]), 1.0, prefix=sys.argv[2])\n"
        "permit = limiter.reserve('m', Limits(), 1, 'x')\n"
        "print(permit.granted, permit.wait_s)\n"
    )
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", script, redis_url, prefix],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    ).stdout.split()
    elapsed = time.monotonic() - started
    assert out[0] == "False" and 3.0 - elapsed - 0.1 <= float(out[1]) <= 3.0


@pytest.mark.integration
def test_a_batch_stays_within_the_provider_quota(tmp_path: Path, sqlite_workers: Settings) -> None:
    """40 calls against a provider allowing 300 a minute, enforced per 6 s (30 per 6 s): the
    workers' 16 threads would burst them; the limiter spaces them and nothing is refused.
    The judge's rpm keeps a 20 % margin below the provider's, as a user would: on a loaded
    machine a call can leave a few hundred ms after its slot and bunch with the next ones."""
    provider = start_simulator(
        tmp_path, ["--model-rpm", "balanced=300", "--rate-window", "6", "--latency-ms", "100"]
    )
    # A provider runs on other machines: the suite's load must slow the workers, not the
    # provider's clock (starved, it read calls sent evenly as a burst, and answered 429).
    as_a_remote_provider(provider)
    try:
        batch = write_batch(tmp_path, provider, [{"model": "openai/balanced", "n": 4, "rpm": 240}])
        sessions = session_factory(sqlite_workers.database_url)
        app = create_producer_app(sqlite_workers)
        batch_id = submit_batch(load_batch(batch), sessions, app)
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 60, "the batch")
        stats = simulator_stats(provider)["models"]["balanced"]
        assert stats.get("200") == 40 and "429" not in stats
        assert batch_status(sessions, batch_id).n_failed_samples == 0
    finally:
        provider.stop()


@dataclass(frozen=True)
class SpentReply:
    """An answer whose headers say the provider's request window is spent."""

    text: str = '{"score": 4}'
    prompt_tokens: int = 10
    completion_tokens: int = 2
    cost_usd: float = 0.0
    latency_ms: float = 1.0
    limit_requests: int = 1200
    remaining_requests: int = 0
    reset_requests_s: float = 0.4


def test_a_spent_window_pauses_the_model_until_its_reset(limiter: RateLimiter) -> None:
    """Learning from headers: no request left until the reset means the next call would be
    answered 429, so every worker waits for the reset instead."""
    judge = Judge(model="openai/x", rpm=1200)

    async def answer(judge: Judge, messages: list[dict[str, str]]) -> SpentReply:
        return SpentReply()

    async def no_sleep(seconds: float) -> None:
        return None

    gated = GatedCall(answer, limiter, HORIZON, sleep=no_sleep)
    asyncio.run(gated(judge, [{"role": "user", "content": "x"}]))
    permit = limiter.reserve(rate_key(judge), Limits(rpm=1200), 1, "next")
    assert permit.outcome == Outcome.COOLING and 0 < permit.wait_s <= 0.4


def test_a_window_spent_an_answer_ago_is_counted_from_the_send(limiter: RateLimiter) -> None:
    """The provider counted its window when it took the call: an answer that took 500 ms
    says the window resets 400 ms after the send, so it has reset already and nothing
    pauses; one that took 100 ms leaves 300 ms of pause."""

    async def no_sleep(seconds: float) -> None:
        return None

    def answered_in(latency_ms: float) -> Permit:
        """The next reservation after one call to a model of its own answered so."""
        judge = Judge(model=f"openai/answered-in-{latency_ms:.0f}", rpm=1200)

        async def answer(judge: Judge, messages: list[dict[str, str]]) -> SpentReply:
            return SpentReply(latency_ms=latency_ms)

        gated = GatedCall(answer, limiter, HORIZON, sleep=no_sleep)
        asyncio.run(gated(judge, [{"role": "user", "content": "x"}]))
        return limiter.reserve(rate_key(judge), Limits(rpm=1200), 1, "next")

    assert answered_in(500).outcome != Outcome.COOLING
    permit = answered_in(100)
    assert permit.outcome == Outcome.COOLING and 0.2 < permit.wait_s <= 0.3


def test_openai_durations_are_read() -> None:
    headers = {
        "llm_provider-x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-reset-tokens": "12ms",
    }
    assert header_duration(headers, "x-ratelimit-reset-requests") == 360.0
    assert header_duration(headers, "x-ratelimit-reset-tokens") == 0.012
    assert (
        header_duration({"x-ratelimit-reset-requests": "1.5s"}, "x-ratelimit-reset-requests") == 1.5
    )
    assert header_duration({}, "x-ratelimit-reset-requests") is None
