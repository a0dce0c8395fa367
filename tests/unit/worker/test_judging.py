"""worker.judging: one judge call with jury's retry policy, driven by a fake `call`.

The one-dimension, one-output spec; tests/unit/schemas/test_judging_specs.py covers pairs and
combined
calls through the same `judge_call`."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from jury.errors import PermanentJudgeError, TransientJudgeError
from jury.schemas.batch import Dimension, Item, Judge
from jury.schemas.calls import Order
from jury.schemas.results import CellSample, SampleResult
from jury.worker.judging.judge_calls import RetryPolicy, judge_call, task_messages
from jury.worker.judging.prompts import build_messages

JUDGE = Judge(model="openai/gpt-4o-mini", name="mini", n=3)
DIMENSION = Dimension.model_validate("relevance")
ITEM = Item(id="q1", input="How do I reset my password?", output="Use the Forgot link.")


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int = 100
    completion_tokens: int = 20
    cost_usd: float = 0.001
    latency_ms: float = 250.0


class FakeCall:
    """Plays a script: each entry is a Reply to return or an exception to raise."""

    def __init__(self, script: Sequence[Reply | Exception]) -> None:
        self.script = list(script)
        self.calls: list[tuple[Judge, list[dict[str, str]]]] = []

    async def __call__(self, judge: Judge, messages: list[dict[str, str]]) -> Reply:
        self.calls.append((judge, messages))
        step = self.script[min(len(self.calls), len(self.script)) - 1]
        if isinstance(step, Exception):
            raise step
        return step


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def judge_samples(
    judge: Judge,
    dimensions: Sequence[Dimension],
    item: Item,
    sample: int,
    call: FakeCall,
    retry: RetryPolicy,
    sleeps: Sleeps,
    orders: Sequence[Order | None] = (None,),
) -> list[CellSample]:
    """`judge_call` for one task of this spec, run to its end."""
    messages = task_messages(item, dimensions, orders)
    return asyncio.run(judge_call(judge, dimensions, orders, messages, sample, call, retry, sleeps))


def policy(max_attempts: int = 4, seed: int = 1) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=max_attempts, base_delay_s=1.0, max_delay_s=8.0, rng=random.Random(seed)
    )


def run(
    call: FakeCall, sleeps: Sleeps, retry: RetryPolicy | None = None, sample: int = 1
) -> SampleResult:
    (judged,) = judge_samples(JUDGE, [DIMENSION], ITEM, sample, call, retry or policy(), sleeps)
    return judged.result


def test_success_on_the_first_try() -> None:
    call, sleeps = FakeCall([Reply('{"score": 4, "reasoning": "On point."}')]), Sleeps()
    result = run(call, sleeps, sample=2)
    assert result.ok
    assert result.score == 4.0
    assert result.reasoning == "On point."
    assert result.judge == "mini"
    assert result.sample == 2
    assert result.attempts == 1
    assert result.error is None and result.error_kind is None
    assert (result.prompt_tokens, result.completion_tokens) == (100, 20)
    assert result.cost_usd == pytest.approx(0.001)
    assert result.latency_ms == 250.0
    assert sleeps == []
    assert len(call.calls) == 1
    judge, messages = call.calls[0]
    assert judge is JUDGE
    assert messages == build_messages(ITEM, DIMENSION)


def test_garbage_then_success_sums_tokens() -> None:
    call = FakeCall(
        [
            Reply("I'd rather not say.", prompt_tokens=100, completion_tokens=7, cost_usd=0.002),
            Reply("Score: 3", prompt_tokens=110, completion_tokens=5, cost_usd=0.003),
        ]
    )
    sleeps = Sleeps()
    result = run(call, sleeps)
    assert result.score == 3.0
    assert result.attempts == 2
    assert result.prompt_tokens == 210
    assert result.completion_tokens == 12
    assert result.cost_usd == pytest.approx(0.005)
    assert result.latency_ms == 500.0
    assert len(sleeps) == 1
    assert len(call.calls) == 2


def test_out_of_scale_answer_is_retried() -> None:
    call, sleeps = FakeCall([Reply('{"score": 9}'), Reply('{"score": 5}')]), Sleeps()
    result = run(call, sleeps)
    assert result.score == 5.0
    assert result.attempts == 2


def test_transient_errors_until_the_last_attempt_give_an_error_sample() -> None:
    call = FakeCall([TransientJudgeError("request timed out after 60 s", kind="timeout")])
    sleeps = Sleeps()
    result = run(call, sleeps, policy(max_attempts=4))
    assert not result.ok
    assert result.score is None
    assert result.error_kind == "timeout"
    assert result.error is not None and "timed out" in result.error
    assert result.attempts == 4
    assert len(call.calls) == 4
    assert len(sleeps) == 3  # no sleep after the last attempt
    assert result.prompt_tokens == 0  # no reply ever came


def test_garbage_every_time_gives_an_unparseable_error_sample() -> None:
    call, sleeps = FakeCall([Reply("no idea")]), Sleeps()
    result = run(call, sleeps, policy(max_attempts=3))
    assert result.score is None
    assert result.error_kind == "unparseable"
    assert result.attempts == 3
    assert result.prompt_tokens == 300  # every attempt's tokens are counted
    assert result.completion_tokens == 60


def test_out_of_scale_every_time_keeps_its_kind() -> None:
    result = run(FakeCall([Reply("Score: 8")]), Sleeps(), policy(max_attempts=2))
    assert result.error_kind == "out_of_scale"


def test_transient_then_success() -> None:
    call = FakeCall([TransientJudgeError("HTTP 503", kind="server_error"), Reply("Score: 2")])
    sleeps = Sleeps()
    result = run(call, sleeps)
    assert result.score == 2.0
    assert result.attempts == 2
    assert result.prompt_tokens == 100  # only the reply that arrived
    assert len(sleeps) == 1


def test_permanent_error_gives_up_at_once() -> None:
    call = FakeCall([PermanentJudgeError("model not found", kind="bad_request"), Reply("5")])
    sleeps = Sleeps()
    result = run(call, sleeps)
    assert result.score is None
    assert result.error_kind == "bad_request"
    assert result.error == "model not found"
    assert result.attempts == 1
    assert len(call.calls) == 1
    assert sleeps == []


def test_permanent_after_transient_stops() -> None:
    call = FakeCall(
        [
            TransientJudgeError("HTTP 429", kind="rate_limited"),
            PermanentJudgeError("no API key", kind="auth"),
            Reply("Score: 5"),
        ]
    )
    sleeps = Sleeps()
    result = run(call, sleeps)
    assert result.error_kind == "auth"
    assert result.attempts == 2
    assert len(sleeps) == 1


def test_long_error_is_truncated() -> None:
    call = FakeCall([PermanentJudgeError("x" * 5000)])
    result = run(call, Sleeps())
    assert result.error is not None
    assert 0 < len(result.error) <= 500


def test_retry_delay_never_below_retry_after() -> None:
    error = TransientJudgeError("HTTP 429", kind="rate_limited", retry_after=7.5)
    call, sleeps = FakeCall([error, error, error, Reply("Score: 4")]), Sleeps()
    result = run(call, sleeps, policy(max_attempts=4))
    assert result.score == 4.0
    assert len(sleeps) == 3
    assert all(s >= 7.5 for s in sleeps)


def test_retry_after_above_the_cap_is_still_honoured() -> None:
    retry = RetryPolicy(max_attempts=3, base_delay_s=1, max_delay_s=2, rng=random.Random(3))
    assert retry.delay(1, retry_after=20.0) == 20.0


def test_single_attempt_policy_never_sleeps() -> None:
    call, sleeps = FakeCall([TransientJudgeError("timeout")]), Sleeps()
    result = run(call, sleeps, policy(max_attempts=1))
    assert result.attempts == 1
    assert sleeps == []


# --- RetryPolicy.delay ----------------------------------------------------------------------


class TopOfRange(random.Random):
    """Full jitter always drawing its maximum, to see the ceiling itself."""

    def uniform(self, a: float, b: float) -> float:
        return b


def test_delay_ceiling_grows_and_is_capped() -> None:
    retry = RetryPolicy(base_delay_s=0.5, max_delay_s=5.0, rng=TopOfRange())
    assert [retry.delay(a) for a in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_delay_with_seeded_jitter_stays_within_the_ceiling() -> None:
    retry = RetryPolicy(base_delay_s=1.0, max_delay_s=10.0, rng=random.Random(42))
    for attempt in range(1, 9):
        ceiling = min(10.0, 2 ** (attempt - 1))
        draws = [retry.delay(attempt) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in draws)
        # Full jitter: the draws spread over the range rather than sitting at one value.
        assert max(draws) > 0.8 * ceiling
        assert min(draws) < 0.2 * ceiling


def test_delay_grows_on_average() -> None:
    retry = RetryPolicy(base_delay_s=1.0, max_delay_s=30.0, rng=random.Random(7))
    means = [sum(retry.delay(a) for _ in range(400)) / 400 for a in range(1, 6)]
    assert means == sorted(means)
    assert means[-1] > 4 * means[0]


def test_seeded_policies_repeat_themselves() -> None:
    first = RetryPolicy(rng=random.Random(5))
    second = RetryPolicy(rng=random.Random(5))
    assert [first.delay(a) for a in range(1, 6)] == [second.delay(a) for a in range(1, 6)]


def test_sleeps_follow_the_policy() -> None:
    error = TransientJudgeError("timeout")
    sleeps = Sleeps()
    run(FakeCall([error]), sleeps, policy(max_attempts=4, seed=9))
    expected_policy = policy(max_attempts=4, seed=9)
    assert sleeps == [expected_policy.delay(a) for a in (1, 2, 3)]
