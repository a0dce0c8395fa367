"""Judge calls of the pairwise and combined modes, with jury's retry policy: no Celery here.

- pairwise, one dimension: two calls (A shown first, then B first), both needed; the sample's
  score is the preference for A and the four scores are kept as a PairJudgment.
- combined: one call scores every dimension; each dimension becomes its own sample, with the
  call's tokens and cost split between them (so batch totals stay exact) and its latency.
- combined pairwise: two calls, each scoring both outputs on every dimension.

Like judge_one_sample, these return error samples rather than raise (except Deferred, which
means nothing was called yet). A combined answer missing some dimensions is asked again; after
the last attempt the dimensions it did score are kept and the others become error samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from schemas.batch import Dimension, Item, Judge
from schemas.errors import JudgeCallError, ScoreParseError
from schemas.pairwise import PairJudgment
from schemas.results import MAX_REASONING_CHARS, SampleResult
from worker.judging import CallJudge, CallTally, RetryPolicy, ask
from worker.mode_parsing import DimensionAnswer, ParsedPair, parse_combined, parse_pair
from worker.mode_prompts import Order, combined_messages, pairwise_messages
from worker.parsing import ParsedScore

# The most a combined answer may take (the largest max_tokens a judge may set).
MAX_ANSWER_TOKENS = 32_000
Answers = dict[str, DimensionAnswer]


@dataclass(frozen=True)
class JudgedSample:
    """One stored sample of a cell, with its pairwise detail in a pairwise batch."""

    dimension: str
    result: SampleResult
    pair: PairJudgment | None = None


def _error(
    judge: Judge, sample: int, exc: JudgeCallError, usage: dict[str, float | int]
) -> SampleResult:
    return SampleResult(
        judge=judge.name, sample=sample, error=str(exc)[:500], error_kind=exc.kind, **usage
    )


def _pair_reasoning(first: str | None, second: str | None) -> str | None:
    parts = [
        f"{label}: {text}" for label, text in (("A first", first), ("B first", second)) if text
    ]
    return " | ".join(parts)[:MAX_REASONING_CHARS] if parts else None


def _judgment(a_first: ParsedPair, b_first: ParsedPair) -> PairJudgment:
    # With B first, output_1 is B and output_2 is A.
    return PairJudgment(
        a_first_a=a_first.first,
        a_first_b=a_first.second,
        b_first_a=b_first.second,
        b_first_b=b_first.first,
    )


def judge_pair_sample(
    judge: Judge,
    dimension: Dimension,
    item: Item,
    sample: int,
    call: CallJudge,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
) -> JudgedSample:
    """Both orders of one pairwise sample: its preference for A, or an error sample."""
    tally = CallTally()
    scale = dimension.resolved_scale
    try:
        orders = [
            ask(
                judge,
                pairwise_messages(item, dimension, order),
                lambda text: parse_pair(text, scale),
                call,
                policy,
                tally,
                sleep,
            )
            for order in ("AB", "BA")
        ]
    except JudgeCallError as exc:
        return JudgedSample(dimension.name, _error(judge, sample, exc, tally.share(0, 1)))
    judgment = _judgment(*orders)
    result = SampleResult(
        judge=judge.name,
        sample=sample,
        score=judgment.preference,
        reasoning=_pair_reasoning(orders[0].reasoning, orders[1].reasoning),
        **tally.share(0, 1),
    )
    return JudgedSample(dimension.name, result, judgment)


def _unusable(answers: Answers) -> int:
    return sum(isinstance(a, ScoreParseError) for a in answers.values())


def judge_all_dimensions(
    judge: Judge,
    dimensions: Sequence[Dimension],
    item: Item,
    sample: int,
    call: CallJudge,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
) -> list[JudgedSample]:
    """One sample of every dimension from one combined call (two for a pair item)."""
    tally = CallTally()
    # `max_tokens` is what one dimension's answer may take: a combined answer holds them all.
    room = min(MAX_ANSWER_TOKENS, judge.max_tokens * len(dimensions))
    asking = judge.model_copy(update={"max_tokens": room})
    orders: list[Order | None] = ["AB", "BA"] if item.is_pair else [None]
    try:
        answers = [
            ask(
                asking,
                combined_messages(item, dimensions, order),
                lambda text: parse_combined(text, dimensions, paired=item.is_pair),
                call,
                policy,
                tally,
                sleep,
                gaps=_unusable,
            )
            for order in orders
        ]
    except JudgeCallError as exc:
        return [
            JudgedSample(d.name, _error(judge, sample, exc, tally.share(i, len(dimensions))))
            for i, d in enumerate(dimensions)
        ]
    judged = []
    for index, dimension in enumerate(dimensions):
        usage = tally.share(index, len(dimensions))
        mine = [a[dimension.name] for a in answers]
        failure = next((a for a in mine if isinstance(a, ScoreParseError)), None)
        if failure is not None:
            judged.append(JudgedSample(dimension.name, _error(judge, sample, failure, usage)))
        elif item.is_pair:
            a_first, b_first = (a for a in mine if isinstance(a, ParsedPair))
            judgment = _judgment(a_first, b_first)
            reasoning = _pair_reasoning(a_first.reasoning, b_first.reasoning)
            result = SampleResult(
                judge=judge.name,
                sample=sample,
                score=judgment.preference,
                reasoning=reasoning,
                **usage,
            )
            judged.append(JudgedSample(dimension.name, result, judgment))
        else:
            (single,) = mine
            assert isinstance(single, ParsedScore)
            result = SampleResult(
                judge=judge.name,
                sample=sample,
                score=single.score,
                reasoning=single.reasoning,
                **usage,
            )
            judged.append(JudgedSample(dimension.name, result))
    return judged
