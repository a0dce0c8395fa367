"""A heuristic judge's samples (jury.schemas.heuristics): the output measured, no LLM called.

The pipeline calls `heuristic_samples` where an LLM judge's task makes its calls; everything
else (the store, the chord's barrier, the aggregation) is the same for both. A sample costs
nothing and takes no rate-limit slot. A pair is measured side by side: A's score and B's,
shown once (a heuristic has no position to be biased by), the sample's score the preference
for A. A callable that cannot be imported, raises, or returns something other than a finite
number on its range gives a failed sample, never a raise out of the task.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence

from jury.schemas.batch import Dimension, Item, Judge
from jury.schemas.calls import Order
from jury.schemas.heuristics import (
    CallableHeuristic,
    HeuristicError,
    KeywordHeuristic,
    LengthHeuristic,
    RegexHeuristic,
    resolve_function,
)
from jury.schemas.pairwise import PairJudgment
from jury.schemas.results import MAX_REASONING_CHARS, CellSample, SampleResult
from jury.worker.judging.judge_calls import error_sample


def _length(h: LengthHeuristic, text: str) -> tuple[float, str]:
    size = len(text.split()) if h.unit == "words" else len(text)
    low = 0 if h.min is None else h.min
    high = "∞" if h.max is None else h.max
    inside = size >= low and (h.max is None or size <= h.max)
    where = "within" if inside else "outside"
    return (1.0 if inside else 0.0), f"{size} {h.unit}, {where} {low}..{high}"


def _regex(h: RegexHeuristic, text: str) -> tuple[float, str]:
    pattern = h.compiled()
    if h.mode == "count":
        count = sum(1 for _ in pattern.finditer(text))
        unit = min(count, h.count_max) / h.count_max
        return unit, f"{count} matches (full marks at {h.count_max})"
    found = pattern.search(text) is not None
    unit = float(found) if h.mode == "match" else float(not found)
    return unit, "the pattern matches" if found else "the pattern does not match"


def _keyword(h: KeywordHeuristic, text: str) -> tuple[float, str]:
    haystack = text if h.case_sensitive else text.casefold()
    present = [k for k in h.keywords if (k if h.case_sensitive else k.casefold()) in haystack]
    return len(present) / len(h.keywords), f"{len(present)} of {len(h.keywords)} keywords present"


def _called(h: CallableHeuristic, item: Item, dimension: Dimension) -> tuple[float, str]:
    function = resolve_function(h.function)
    try:
        value = function(item, dimension)
    except Exception as exc:
        raise HeuristicError(
            f"{h.function} raised {type(exc).__name__}: {exc}", kind="heuristic_raised"
        ) from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise HeuristicError(
            f"{h.function} returned a {type(value).__name__}, not a number",
            kind="heuristic_value",
        )
    if not math.isfinite(value):
        raise HeuristicError(f"{h.function} returned {value}", kind="heuristic_value")
    scale = dimension.resolved_scale
    low, high = (0.0, 1.0) if h.returns == "unit" else (scale.min, scale.max)
    if not low <= value <= high:
        raise HeuristicError(
            f"{h.function} returned {value:g}, outside {low:g}..{high:g} (returns: {h.returns})",
            kind="heuristic_value",
        )
    unit = value if h.returns == "unit" else (value - scale.min) / (scale.max - scale.min)
    return float(unit), f"{h.function} returned {value:g}"


def heuristic_score(judge: Judge, item: Item, text: str, dimension: Dimension) -> tuple[float, str]:
    """(score on the dimension's scale, what was measured) of one output text."""
    h = judge.heuristic
    if isinstance(h, LengthHeuristic):
        unit, why = _length(h, text)
    elif isinstance(h, RegexHeuristic):
        unit, why = _regex(h, text)
    elif isinstance(h, KeywordHeuristic):
        unit, why = _keyword(h, text)
    elif isinstance(h, CallableHeuristic):
        unit, why = _called(h, item.model_copy(update={"output": text}), dimension)
    else:
        raise HeuristicError(f"judge {judge.name} has no heuristic", kind="internal")
    scale = dimension.resolved_scale
    return scale.min + unit * (scale.max - scale.min), why


def _sample(
    judge: Judge, item: Item, dimension: Dimension, paired: bool, sample: int
) -> CellSample:
    started = time.perf_counter()
    try:
        if paired:
            score_a, why_a = heuristic_score(judge, item, item.output_a or "", dimension)
            score_b, why_b = heuristic_score(judge, item, item.output_b or "", dimension)
            pair: PairJudgment | None = PairJudgment(score_a, score_b)
            score, why = score_a - score_b, f"A: {why_a} | B: {why_b}"
        else:
            score, why = heuristic_score(judge, item, item.output or "", dimension)
            pair = None
    except HeuristicError as exc:
        usage = {"latency_ms": round((time.perf_counter() - started) * 1000, 1)}
        return CellSample(
            dimension=dimension.name, result=error_sample(judge.name, sample, exc, usage)
        )
    result = SampleResult(
        judge=judge.name,
        sample=sample,
        score=score,
        reasoning=why[:MAX_REASONING_CHARS],
        latency_ms=round((time.perf_counter() - started) * 1000, 1),
    )
    return CellSample(dimension=dimension.name, result=result, pair=pair)


async def measure(
    judge: Judge,
    item: Item,
    dimensions: Sequence[Dimension],
    orders: Sequence[Order | None],
    sample: int,
) -> list[CellSample]:
    """A heuristic task's samples, measured off the event loop (a callable may be slow) and
    within the judge's `timeout_s`: past it, failed samples (`heuristic_timeout`); the
    callable's thread cannot be stopped and finishes on its own."""
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(heuristic_samples, judge, item, dimensions, orders, sample),
            judge.timeout_s,
        )
    except TimeoutError:
        exc = HeuristicError(
            f"no score within the judge's timeout_s of {judge.timeout_s:g} s",
            kind="heuristic_timeout",
        )
        usage = {"latency_ms": judge.timeout_s * 1000}
        return [
            CellSample(dimension=d.name, result=error_sample(judge.name, sample, exc, usage))
            for d in dimensions
        ]


def heuristic_samples(
    judge: Judge,
    item: Item,
    dimensions: Sequence[Dimension],
    orders: Sequence[Order | None],
    sample: int,
) -> list[CellSample]:
    """A heuristic task's samples, one per dimension (a combined task measures each)."""
    paired = tuple(orders) != (None,)
    return [_sample(judge, item, d, paired, sample) for d in dimensions]
