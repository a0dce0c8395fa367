"""A heuristic judge's samples (jury.schemas.heuristics): the output measured, no LLM called.

The pipeline calls `measure` where an LLM judge's task makes its calls; everything else (the
store, the chord's barrier, the aggregation) is the same for both. A sample costs nothing and
takes no rate-limit slot. A pair is measured side by side: A's score and B's, shown once (a
heuristic has no position to be biased by), the sample's score the preference for A.

The measuring itself happens in a process of the worker's HeuristicPool, killed at the
judge's `timeout_s` (jury.worker.judging.heuristic_pool); its reply is checked here as
input. A callable that is not allowed, cannot be imported, raises, or returns something other
than a finite number on its range gives a failed sample, never a raise out of the task.
`heuristic_samples` measures in this process, for tests and tools that run no worker.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from jury.schemas.batch import Dimension, Item, Judge
from jury.schemas.calls import Order
from jury.schemas.heuristics import HeuristicError
from jury.schemas.pairwise import PairJudgment
from jury.schemas.results import MAX_REASONING_CHARS, CellSample, SampleResult
from jury.worker.judging.heuristic_pool import HeuristicPool
from jury.worker.judging.heuristic_process import MeasureRequest
from jury.worker.judging.heuristic_scores import measured_texts
from jury.worker.judging.judge_calls import error_sample

Measured = list[tuple[float, str]] | HeuristicError


def _texts(item: Item, orders: Sequence[Order | None]) -> list[str]:
    """The output, or a pair's two outputs (measured side by side, in one order)."""
    if tuple(orders) == (None,):
        return [item.output or ""]
    return [item.output_a or "", item.output_b or ""]


def _cell_sample(
    judge: Judge, dimension: Dimension, sample: int, measured: Measured, latency_ms: float
) -> CellSample:
    usage = {"latency_ms": round(latency_ms, 1)}
    if isinstance(measured, HeuristicError):
        result = error_sample(judge.name, sample, measured, usage)
        return CellSample(dimension=dimension.name, result=result)
    if len(measured) == 2:
        (score_a, why_a), (score_b, why_b) = measured
        pair: PairJudgment | None = PairJudgment(score_a, score_b)
        score, why = score_a - score_b, f"A: {why_a} | B: {why_b}"
    else:
        ((score, why),) = measured
        pair = None
    result = SampleResult(
        judge=judge.name,
        sample=sample,
        score=score,
        reasoning=why[:MAX_REASONING_CHARS],
        **usage,
    )
    return CellSample(dimension=dimension.name, result=result, pair=pair)


def heuristic_samples(
    judge: Judge,
    item: Item,
    dimensions: Sequence[Dimension],
    orders: Sequence[Order | None],
    sample: int,
    allowed: Sequence[str] = (),
) -> list[CellSample]:
    """A heuristic task's samples, one per dimension (a combined task measures each),
    measured in this process. `allowed`: the module prefixes callables may come from."""
    samples = []
    for dimension in dimensions:
        started = time.perf_counter()
        try:
            measured: Measured = measured_texts(
                judge, item, dimension, _texts(item, orders), allowed
            )
        except HeuristicError as exc:
            measured = exc
        latency_ms = (time.perf_counter() - started) * 1000
        samples.append(_cell_sample(judge, dimension, sample, measured, latency_ms))
    return samples


async def measure(
    judge: Judge,
    item: Item,
    dimensions: Sequence[Dimension],
    orders: Sequence[Order | None],
    sample: int,
    pool: HeuristicPool,
) -> list[CellSample]:
    """A heuristic task's samples, measured in one of `pool`'s processes within the judge's
    `timeout_s`: past it, the process is killed and the samples fail (`heuristic_timeout`)."""
    texts = _texts(item, orders)
    request = MeasureRequest(judge, item, list(dimensions), texts, judge.timeout_s)
    started = time.perf_counter()
    try:
        measured = _read_reply(await pool.measure(request), dimensions, len(texts))
    except HeuristicError as exc:
        measured = [exc] * len(dimensions)
    latency_ms = (time.perf_counter() - started) * 1000
    return [
        _cell_sample(judge, d, sample, m, latency_ms)
        for d, m in zip(dimensions, measured, strict=True)
    ]


def _read_reply(
    reply: dict[str, Any], dimensions: Sequence[Dimension], n_texts: int
) -> list[Measured]:
    """The measuring process's reply, checked as input: per dimension, a score on the scale
    and a line of why for each text, or an error."""
    if "failed" in reply:
        raise HeuristicError(f"the measure failed: {reply['failed']!s:.500}", kind="internal")
    results = reply.get("results")
    if not isinstance(results, list) or len(results) != len(dimensions):
        raise HeuristicError("the measuring process answered garbage", kind="heuristic_process")
    return [_read_result(r, d, n_texts) for r, d in zip(results, dimensions, strict=True)]


def _read_result(result: Any, dimension: Dimension, n_texts: int) -> Measured:
    garbage = HeuristicError("the measuring process answered garbage", kind="heuristic_process")
    if not isinstance(result, dict):
        return garbage
    if "error" in result:
        kind = result.get("kind")
        return HeuristicError(str(result["error"])[:2000], kind=str(kind)[:40])
    scores = result.get("scores")
    if not isinstance(scores, list) or len(scores) != n_texts:
        return garbage
    measured = []
    scale = dimension.resolved_scale
    for entry in scores:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], str)):
            return garbage
        score = entry[0]
        if isinstance(score, bool) or not isinstance(score, int | float):
            return garbage
        if not (math.isfinite(score) and scale.contains(score)):
            return garbage
        measured.append((float(score), entry[1][:MAX_REASONING_CHARS]))
    return measured
