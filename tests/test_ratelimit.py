"""The rate limiters, Redis and in-memory, behind one interface and one parametrised fixture;
then the Redis one shared by separate processes."""

from __future__ import annotations

import itertools
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from bench.common import simulator_stats
from producer.loading import load_batch
from producer.publishing import create_producer_app
from producer.services import start_simulator, wait_for
from producer.submission import submit_batch
from schemas.batch import Judge
from schemas.settings import Settings
from store.engine import session_factory
from store.repository import batch_status
from tests.conftest import ROOT
from tests.test_pipeline import write_batch
from worker.gating import Deferred, GatedCall
from worker.ratelimit import Limits, MemoryRateLimiter, RateLimiter, RedisRateLimiter

HORIZON = 2.5


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "redis"])
def limiter(request: pytest.FixtureRequest, redis_url: str) -> Iterator[RateLimiter]:
    if request.param == "memory":
        yield MemoryRateLimiter(HORIZON, clock=FakeClock())
        return
    client = redis.Redis.from_url(redis_url)
    prefix = f"jury:rl-test:{secrets.token_hex(4)}:"
    yield RedisRateLimiter(client, HORIZON, prefix=prefix)
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)
    client.close()


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


def test_gated_call_defers_only_its_first_attempt(limiter: RateLimiter) -> None:
    judge = Judge(model="openai/x", rpm=60)
    slept: list[float] = []
    for i in range(3):  # fill the horizon
        limiter.reserve(
            __import__("worker.gating").gating.rate_key(judge), Limits(rpm=60), 1, f"f{i}"
        )
    gated = GatedCall(lambda j, m: None, limiter, HORIZON, sleep=slept.append)  # type: ignore[arg-type, return-value]
    with pytest.raises(Deferred) as deferred:
        gated(judge, [{"role": "user", "content": "x"}])
    assert deferred.value.countdown_s > HORIZON / 2 and slept == []


SHARE_SCRIPT = """
import json, sys, time, redis
from worker.ratelimit import Limits, RedisRateLimiter
client = redis.Redis.from_url(sys.argv[1])
limiter = RedisRateLimiter(client, horizon_s=30, prefix=sys.argv[2])
starts = []
for i in range(int(sys.argv[3])):
    permit = limiter.reserve("shared", Limits(rpm=600), 1, f"{sys.argv[4]}-{i}")
    assert permit.granted
    starts.append(time.time() + permit.wait_s)
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
    starts = sorted(s for p in procs for s in json.loads(p.communicate(timeout=60)[0]))
    assert len(starts) == 50
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # 600 rpm is one call per 100 ms: together they never get more than that.
    assert min(gaps) >= 0.1 - 0.01
    assert max(sum(1 for s in starts if t <= s < t + 0.99) for t in starts) <= 10


def test_cool_down_reaches_another_process(redis_url: str) -> None:
    prefix = f"jury:rl-test:{secrets.token_hex(4)}:"
    RedisRateLimiter(redis.Redis.from_url(redis_url), 1.0, prefix=prefix).cool_down("m", 3.0)
    script = (
        "import sys, redis\n"
        "from worker.ratelimit import Limits, RedisRateLimiter\n"
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
