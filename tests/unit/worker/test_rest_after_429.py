"""A model without limits of its own rests after the provider pushes back: the calls of the
same process wait out its Retry-After instead of answering 429 after 429."""

from __future__ import annotations

import asyncio

import pytest

from jury.errors import TransientJudgeError
from jury.schemas.batch import Judge
from jury.worker.judging.judge_calls import ReplyLike
from jury.worker.limits.gating import GatedCall
from jury.worker.limits.ratelimit import MemoryRateLimiter
from tests.conftest import FakeClock
from tests.integration.test_ratelimit import SpentReply

MESSAGES = [{"role": "user", "content": "x"}]


def pushed_back_once(retry_after: float) -> tuple[GatedCall, list[float]]:
    answers: list[object] = [
        TransientJudgeError("429", kind="rate_limited", retry_after=retry_after)
    ]
    slept: list[float] = []

    async def call(judge: Judge, messages: list[dict[str, str]]) -> ReplyLike:
        if answers:
            raise answers.pop()  # type: ignore[misc]
        return SpentReply(remaining_requests=100)

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    limiter = MemoryRateLimiter(2.5, clock=FakeClock())
    return GatedCall(call, limiter, 2.5, sleep=sleep), slept


def test_the_next_call_of_an_unlimited_model_waits_out_a_429() -> None:
    gated, slept = pushed_back_once(retry_after=4.0)
    judge = Judge(model="openai/rest-unlimited")
    with pytest.raises(TransientJudgeError):
        asyncio.run(gated(judge, MESSAGES))
    asyncio.run(gated(judge, MESSAGES))
    assert len(slept) == 1 and 3.5 < slept[0] <= 4.0


def test_another_model_does_not_wait() -> None:
    gated, slept = pushed_back_once(retry_after=4.0)
    with pytest.raises(TransientJudgeError):
        asyncio.run(gated(Judge(model="openai/rest-a"), MESSAGES))
    asyncio.run(gated(Judge(model="openai/rest-b"), MESSAGES))
    assert slept == []
