"""Whether a sample could be true, whoever wrote it: the check every sample passes before it is
stored, and again before a stored one counts. Pure.

A broker message can carry samples (a task whose samples the store refused carries them to its
retry), and the store may hold rows no worker of this version wrote. Neither is trusted: a
score outside its dimension's range, a cost that is negative or not finite, a token count
below zero, would change a verdict, a batch's cost and its budget. A sample's score is on its
dimension's scale; in a pairwise batch it is the preference for A, `score_a - score_b`, so it
lies within the scale's width either side of 0, and each side's score lies on the scale.
"""

from __future__ import annotations

import math

from jury.schemas.batch import BatchConfig, Dimension
from jury.schemas.pairwise import PairJudgment
from jury.schemas.results import MAX_REASONING_CHARS, SampleResult

# Far above any call's true cost (a million tokens at today's dearest prices is some $100),
# far below what would overflow a batch's sum.
MAX_SAMPLE_COST_USD = 1e6
MAX_SAMPLE_TOKENS = 10**12
MAX_SAMPLE_LATENCY_MS = 1e9
MAX_SAMPLE_ATTEMPTS = 1000
# The error texts jury stores are cut at 500 characters; a kind is a short word.
MAX_ERROR_CHARS = 1000
MAX_ERROR_KIND_CHARS = 64


def score_range(config: BatchConfig, dimension: Dimension) -> tuple[float, float]:
    """The lowest and highest score a sample of this dimension may have."""
    scale = dimension.resolved_scale
    if config.pairwise is None:
        return scale.min, scale.max
    width = scale.max - scale.min
    return -width, width


def _within(value: float, low: float, high: float) -> bool:
    return math.isfinite(value) and low <= value <= high


def sample_problem(
    config: BatchConfig, dimension: Dimension, result: SampleResult, pair: PairJudgment | None
) -> str | None:
    """Why this sample of `dimension` cannot be true, in a few words; None when it can."""
    low, high = score_range(config, dimension)
    if result.score is not None and not _within(result.score, low, high):
        return f"score {result.score!r} outside {dimension.name!r}'s range {low:g}..{high:g}"
    if not _within(result.cost_usd, 0.0, MAX_SAMPLE_COST_USD):
        return f"cost {result.cost_usd!r} USD is not a cost"
    for name in ("prompt_tokens", "completion_tokens"):
        if not 0 <= getattr(result, name) <= MAX_SAMPLE_TOKENS:
            return f"{name} {getattr(result, name)!r} is not a token count"
    if not _within(result.latency_ms, 0.0, MAX_SAMPLE_LATENCY_MS):
        return f"latency {result.latency_ms!r} ms is not a duration"
    if not 0 <= result.attempts <= MAX_SAMPLE_ATTEMPTS:
        return f"{result.attempts!r} attempts"
    if len(result.reasoning or "") > MAX_REASONING_CHARS:
        return f"reasoning longer than {MAX_REASONING_CHARS} characters"
    if len(result.error or "") > MAX_ERROR_CHARS or len(result.error_kind or "") > (
        MAX_ERROR_KIND_CHARS
    ):
        return "an error text longer than jury writes"
    return _pair_problem(config, dimension, result, pair)


def _pair_problem(
    config: BatchConfig, dimension: Dimension, result: SampleResult, pair: PairJudgment | None
) -> str | None:
    if pair is None:
        return None
    if config.pairwise is None:
        return "pair scores in a batch that compares no pairs"
    scale = dimension.resolved_scale
    sides = [s for s in pair if s is not None]
    if not all(_within(s, scale.min, scale.max) for s in sides):
        return f"a pair score outside {dimension.name!r}'s scale {scale.min:g}..{scale.max:g}"
    if result.score is not None and not math.isclose(
        result.score, pair.preference, rel_tol=1e-9, abs_tol=1e-9
    ):
        return "a score that is not the pair's preference for A"
    return None


# The error kind of a sample that was not counted as written.
INVALID_SAMPLE = "invalid_sample"


def counted(
    config: BatchConfig, dimension: Dimension, result: SampleResult, pair: PairJudgment | None
) -> SampleResult:
    """The sample as it may count: itself when it could be true, else a failed sample (kind
    `invalid_sample`) that keeps only what could be true of it: its cost and tokens, when
    they are a cost and token counts, so what was paid is still counted."""
    problem = sample_problem(config, dimension, result, pair)
    if problem is None:
        return result
    tokens = (result.prompt_tokens, result.completion_tokens)
    paid = _within(result.cost_usd, 0.0, MAX_SAMPLE_COST_USD) and all(
        0 <= t <= MAX_SAMPLE_TOKENS for t in tokens
    )
    return SampleResult(
        judge=result.judge,
        sample=result.sample,
        error=f"not counted as written: {problem}"[:MAX_ERROR_CHARS],
        error_kind=INVALID_SAMPLE,
        attempts=min(max(result.attempts, 0), MAX_SAMPLE_ATTEMPTS),
        prompt_tokens=tokens[0] if paid else 0,
        completion_tokens=tokens[1] if paid else 0,
        cost_usd=result.cost_usd if paid else 0.0,
        cached=result.cached,
    )
