"""One judge task's calls, with jury's retry policy: plain (async) functions, no Celery.

A task's call spec (jury.schemas.calls) says which dimensions one call scores and in which
orders a pair is shown; `judge_call` makes those calls and turns the answers into one sample
per dimension:

- one dimension, one output: the score;
- a pair: one call per order shown; the sample's score is the preference for A, its four (or,
  shown once, two) scores kept as a PairJudgment;
- several dimensions (combined): one call scores them all; each dimension becomes its own
  sample, with the call's tokens and cost split between them (so batch totals stay exact).

Transient failures (timeouts, connection errors, 5xx, 429, unparseable or out-of-scale
answers) are retried with exponential backoff and full jitter, never sooner than a 429's
Retry-After. A combined answer missing some dimensions is asked again; after the last attempt
the dimensions it did score are kept and the others become error samples. After the last
attempt, or at once on a permanent failure, the outcome is an error sample: a judge task never
raises for a failed call.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from jury.errors import JudgeCallError, ScoreParseError
from jury.schemas.batch import Dimension, Item, Judge
from jury.schemas.calls import Order
from jury.schemas.pairwise import PairJudgment
from jury.schemas.results import MAX_REASONING_CHARS, CellSample, SampleResult
from jury.worker.judging.answer_forms import parse_templated
from jury.worker.judging.parsing import (
    DimensionAnswer,
    ParsedPair,
    ParsedScore,
    VotedScore,
    parse_answer,
)
from jury.worker.judging.prompt_templates import Asking, asked_messages
from jury.worker.judging.prompts import call_messages

# The most a combined answer may take (the largest max_tokens a judge may set).
MAX_ANSWER_TOKENS = 32_000
T = TypeVar("T")


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


CallJudge = Callable[[Judge, list[dict[str, str]]], Awaitable[ReplyLike]]
Sleep = Callable[[float], Awaitable[None]]


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


async def ask(
    judge: Judge,
    messages: list[dict[str, str]],
    parse: Callable[[str], T],
    call: CallJudge,
    policy: RetryPolicy,
    tally: CallTally,
    sleep: Sleep = asyncio.sleep,
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
            reply = await call(judge, messages)
            tally.add(reply)
            parsed = parse(reply.text)
        except JudgeCallError as exc:
            last = exc
            if not exc.transient:
                break
            if attempt < policy.max_attempts:
                await sleep(policy.delay(attempt, exc.retry_after))
            continue
        missing = gaps(parsed)
        if not missing:
            return parsed
        if missing < fewest:
            best, fewest = parsed, missing
        last = ScoreParseError(f"{missing} criteria without a usable score")
        if attempt < policy.max_attempts:
            await sleep(policy.delay(attempt))
    if best is not None:
        return best
    assert last is not None
    raise last


def _unusable(answers: dict[str, DimensionAnswer]) -> int:
    return sum(isinstance(a, ScoreParseError) for a in answers.values())


def error_sample(
    judge: str, sample: int, exc: JudgeCallError, usage: dict[str, float | int]
) -> SampleResult:
    return SampleResult(
        judge=judge, sample=sample, error=str(exc)[:500], error_kind=exc.kind, **usage
    )


def _pair_judgment(pairs: Sequence[ParsedPair]) -> PairJudgment:
    a_first = pairs[0]
    if len(pairs) == 1:
        return PairJudgment(a_first.first, a_first.second)
    # With B first, output_1 is B and output_2 is A.
    b_first = pairs[1]
    return PairJudgment(a_first.first, a_first.second, b_first.second, b_first.first)


def _pair_reasoning(pairs: Sequence[ParsedPair]) -> str | None:
    labels = ("A first", "B first")
    parts = [
        f"{label}: {p.reasoning}" for label, p in zip(labels, pairs, strict=False) if p.reasoning
    ]
    return " | ".join(parts)[:MAX_REASONING_CHARS] if parts else None


def _sample_of(
    judge: str,
    sample: int,
    dimension: str,
    mine: list[DimensionAnswer],
    usage: dict[str, float | int],
) -> CellSample:
    """One dimension's sample from its answers (one per order shown)."""
    failure = next((a for a in mine if isinstance(a, ScoreParseError)), None)
    if failure is not None:
        return CellSample(dimension=dimension, result=error_sample(judge, sample, failure, usage))
    pairs = [a for a in mine if isinstance(a, ParsedPair)]
    if pairs:
        judgment = _pair_judgment(pairs)
        result = SampleResult(
            judge=judge,
            sample=sample,
            score=judgment.preference,
            reasoning=_pair_reasoning(pairs),
            **usage,
        )
        return CellSample(dimension=dimension, result=result, pair=judgment)
    (single,) = mine
    assert isinstance(single, ParsedScore | VotedScore)
    result = SampleResult(
        judge=judge,
        sample=sample,
        score=single.score,
        reasoning=single.reasoning,
        vote=single.vote if isinstance(single, VotedScore) else None,
        **usage,
    )
    return CellSample(dimension=dimension, result=result)


def asking_judge(judge: Judge, parts: int) -> Judge:
    """The judge as one call of `parts` dimensions asks it, live or in a provider batch's
    line: `max_tokens` is what one dimension's answer may take, so a combined answer may take
    them all."""
    if parts <= 1:
        return judge
    return judge.model_copy(update={"max_tokens": min(MAX_ANSWER_TOKENS, judge.max_tokens * parts)})


def task_messages(
    item: Item,
    dimensions: Sequence[Dimension],
    orders: Sequence[Order | None],
    reasoning_first: bool = False,
    asking: Asking | None = None,
) -> list[list[dict[str, str]]]:
    """The messages of each call one task makes: one per order shown. A judge `asking` more
    than a score (a vote, a scoring or prompt template) makes one call on one criterion."""
    if asking is not None and _one_criterion_asked(asking, dimensions, orders):
        return [asked_messages(item, dimensions[0], asking)]
    vote = asking is not None and asking.pass_vote
    return [call_messages(item, dimensions, order, reasoning_first, vote) for order in orders]


def _one_criterion_asked(
    asking: Asking, dimensions: Sequence[Dimension], orders: Sequence[Order | None]
) -> bool:
    """Whether the call is one criterion on one output asked more than a score (a combined
    call asks a vote per criterion; the batch refuses templates there)."""
    return not asking.plain and len(dimensions) == 1 and tuple(orders) == (None,)


async def judge_call(
    judge: Judge,
    dimensions: Sequence[Dimension],
    orders: Sequence[Order | None],
    messages: Sequence[list[dict[str, str]]],
    sample: int,
    call: CallJudge,
    policy: RetryPolicy,
    sleep: Sleep = asyncio.sleep,
    asking: Asking | None = None,
) -> list[CellSample]:
    """One task's calls (`messages`, one per order in `orders`): a sample per dimension, each
    a score or an error, never a raise (except the limiter's Deferred, which means nothing was
    called yet). `asking`: what the messages asked beyond a score (how to read the answer)."""
    tally = CallTally()
    parts = len(dimensions)
    sized = asking_judge(judge, parts)
    paired = tuple(orders) != (None,)

    def parse(text: str) -> dict[str, DimensionAnswer]:
        if asking is not None and _one_criterion_asked(asking, dimensions, orders):
            return parse_templated(text, dimensions[0], asking.scoring, asking.pass_vote)
        vote = asking is not None and asking.pass_vote
        return parse_answer(text, dimensions, paired, vote=vote)

    try:
        answers = [
            await ask(
                sized,
                one_call,
                parse,
                call,
                policy,
                tally,
                sleep,
                gaps=_unusable,
            )
            for one_call in messages
        ]
    except JudgeCallError as exc:
        return [
            CellSample(
                dimension=d.name,
                result=error_sample(judge.name, sample, exc, tally.share(i, parts)),
            )
            for i, d in enumerate(dimensions)
        ]
    return [
        _sample_of(judge.name, sample, d.name, [a[d.name] for a in answers], tally.share(i, parts))
        for i, d in enumerate(dimensions)
    ]


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
