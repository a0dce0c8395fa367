"""Building blocks for the aggregation tests: judges and samples in one line each."""

from __future__ import annotations

from collections.abc import Iterable

from jury.schemas.batch import Dimension, Judge
from jury.schemas.results import SampleResult

RELEVANCE = Dimension.model_validate("relevance")  # built-in: scale 1..5, threshold 3.5


def judge(name: str, n: int = 3, weight: float = 1.0) -> Judge:
    return Judge(model=f"openai/{name}", name=name, n=n, weight=weight)


def ok(judge_name: str, sample: int, score: float) -> SampleResult:
    return SampleResult(judge=judge_name, sample=sample, score=score)


def failed(judge_name: str, sample: int, error: str = "timed out") -> SampleResult:
    return SampleResult(judge=judge_name, sample=sample, error=error, error_kind="timeout")


def scored(judge_name: str, scores: Iterable[float]) -> list[SampleResult]:
    return [ok(judge_name, i, s) for i, s in enumerate(scores)]
