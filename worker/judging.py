"""One judge call for one cell, with jury's retry policy: plain functions, no Celery.

Transient failures (timeouts, connection errors, 5xx, 429, unparseable or out-of-scale
answers) are retried with exponential backoff and full jitter, never sooner than a 429's
Retry-After. After the last attempt, or at once on a permanent failure, the outcome is an
error sample: a judge task never raises out of a chord header.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from schemas.batch import Dimension, Item, Judge
from schemas.errors import JudgeCallError
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
    messages = build_messages(item, dimension)
    tally = CallTally()
    last: JudgeCallError | None = None
    for attempt in range(1, policy.max_attempts + 1):
        tally.attempts = attempt
        try:
            reply = call(judge, messages)
            tally.add(reply)
            parsed = parse_score(reply.text, dimension.resolved_scale)
        except JudgeCallError as exc:
            last = exc
            if not exc.transient or attempt == policy.max_attempts:
                break
            sleep(policy.delay(attempt, exc.retry_after))
            continue
        return SampleResult(
            judge=judge.name,
            sample=sample,
            score=parsed.score,
            reasoning=parsed.reasoning,
            **_tally_fields(tally),
        )
    assert last is not None
    return SampleResult(
        judge=judge.name,
        sample=sample,
        error=str(last)[:500],
        error_kind=last.kind,
        **_tally_fields(tally),
    )


def _tally_fields(tally: CallTally) -> dict[str, float | int]:
    return {
        "attempts": tally.attempts,
        "latency_ms": round(tally.latency_ms, 1),
        "prompt_tokens": tally.prompt_tokens,
        "completion_tokens": tally.completion_tokens,
        "cost_usd": tally.cost_usd,
    }
