"""One judge call for one cell, with jury's retry policy: plain functions, no Celery.

Transient failures (timeouts, connection errors, 5xx, 429, unparseable or out-of-scale
answers) are retried with exponential backoff and full jitter, never sooner than a 429's
Retry-After. After the last attempt, or at once on a permanent failure, the outcome is an
error sample: a judge task never raises for a failed call.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from schemas.batch import Dimension, Item, Judge
from schemas.errors import JudgeCallError, ScoreParseError
from schemas.results import SampleResult
from worker.parsing import parse_score
from worker.prompts import build_messages


class ReplyLike(Protocol):
    """The shape of worker.llm_client.LLMReply, so that this module never imports litellm."""

    @property
    def text(self) -> str: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def cost_usd(self) -> float: ...
    @property
    def latency_ms(self) -> float: ...


CallJudge = Callable[[Judge, list[dict[str, str]]], ReplyLike]
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt `attempt` (1-based)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        backoff = self.rng.uniform(0, ceiling)
        return max(backoff, retry_after or 0.0)


@dataclass
class CallTally:
    """What the calls of one task cost, over all their attempts."""

    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0

    def add(self, reply: ReplyLike) -> None:
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.cost_usd += reply.cost_usd
        self.latency_ms += reply.latency_ms

    def share(self, index: int, parts: int) -> dict[str, float | int]:
        """Part `index` of `parts`: tokens and cost split so that the parts add up to the
        whole (the remainder of a token count goes to part 0); attempts and latency whole,
        since each part waited for the same calls."""

        def tokens(total: int) -> int:
            return total // parts + (total % parts if index == 0 else 0)

        return {
            "attempts": self.attempts,
            "latency_ms": round(self.latency_ms, 1),
            "prompt_tokens": tokens(self.prompt_tokens),
            "completion_tokens": tokens(self.completion_tokens),
            "cost_usd": self.cost_usd / parts,
        }


def ask(
    judge: Judge,
    messages: list[dict[str, str]],
    parse: Callable[[str], T],
    call: CallJudge,
    policy: RetryPolicy,
    tally: CallTally,
    sleep: Callable[[float], None] = time.sleep,
    gaps: Callable[[T], int] = lambda _: 0,
) -> T:
    """Call and parse until the answer has no gaps, retrying transient failures; after the
    last attempt, the answer with the fewest gaps, or the last error raised."""
    best: T | None = None
    fewest = math.inf
    last: JudgeCallError | None = None
    for attempt in range(1, policy.max_attempts + 1):
        tally.attempts += 1
        try:
            reply = call(judge, messages)
            tally.add(reply)
            parsed = parse(reply.text)
        except JudgeCallError as exc:
            last = exc
            if not exc.transient:
                break
            if attempt < policy.max_attempts:
                sleep(policy.delay(attempt, exc.retry_after))
            continue
        missing = gaps(parsed)
        if not missing:
            return parsed
        if missing < fewest:
            best, fewest = parsed, missing
        last = ScoreParseError(f"{missing} criteria without a usable score")
        if attempt < policy.max_attempts:
            sleep(policy.delay(attempt))
    if best is not None:
        return best
    assert last is not None
    raise last


def judge_one_sample(
    judge: Judge,
    dimension: Dimension,
    item: Item,
    sample: int,
    call: CallJudge,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
) -> SampleResult:
    """Ask `judge` to score `item` on `dimension`; a score or an error sample, never a raise."""
    scale = dimension.resolved_scale
    tally = CallTally()
    try:
        parsed = ask(
            judge,
            build_messages(item, dimension),
            lambda text: parse_score(text, scale),
            call,
            policy,
            tally,
            sleep,
        )
    except JudgeCallError as exc:
        return SampleResult(
            judge=judge.name,
            sample=sample,
            error=str(exc)[:500],
            error_kind=exc.kind,
            **tally.share(0, 1),
        )
    return SampleResult(
        judge=judge.name,
        sample=sample,
        score=parsed.score,
        reasoning=parsed.reasoning,
        **tally.share(0, 1),
    )


def internal_error(judge: str, sample: int, exc: Exception) -> SampleResult:
    """The sample of a task that failed before or outside its judge calls (our own bug, the
    store): an error sample like a provider's, never a raise out of the task."""
    return SampleResult(
        judge=judge,
        sample=sample,
        error=f"{type(exc).__name__}: {exc}"[:500],
        error_kind="internal",
        attempts=0,
    )
