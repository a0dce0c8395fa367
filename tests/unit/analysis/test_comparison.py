"""`jury compare`'s figures and the correlation between dimensions, on hand-made records."""

from __future__ import annotations

import pytest

from jury.analysis.comparison import BatchUsage, DimensionCorrelations, compare_batches
from jury.schemas.results import ConsensusMetrics, Level, SampleResult, Verdict


def _record(item: str, dimension: str, score: float) -> Verdict:
    metrics = ConsensusMetrics(
        final_score=score,
        cross_model_std=0.0,
        consensus_level=Level.HIGH,
        confidence=Level.HIGH,
        flag_for_review=False,
    )
    return Verdict(
        item_id=item,
        criterion_id=dimension,
        llm_evaluations={},
        consensus_metrics=metrics,
        passed=True,
        threshold=1,
    )


def _usage(calls: list[tuple[str, str, float, int]]) -> BatchUsage:
    usage = BatchUsage()
    for item, dimension, latency, tokens in calls:
        result = SampleResult(
            judge="j",
            sample=0,
            score=1,
            latency_ms=latency,
            prompt_tokens=tokens,
            completion_tokens=10,
            cost_usd=0.001,
        )
        usage.add(item, dimension, result)
    return usage


def test_per_dimension_against_combined() -> None:
    a = [_record("q1", "d1", 2), _record("q2", "d1", 4), _record("q3", "d1", 5)]
    b = [_record("q1", "d1", 3), _record("q2", "d1", 4), _record("q3", "d1", 6)]
    # A: two parallel calls per item (one per dimension); B: one call, its tokens split.
    usage_a = _usage(
        [
            (i, d, lat, 100)
            for i, lat in (("q1", 100), ("q2", 200), ("q3", 300))
            for d in ("d1", "d2")
        ]
    )
    usage_b = _usage(
        [
            (i, d, lat, 60)
            for i, lat in (("q1", 150), ("q2", 150), ("q3", 600))
            for d in ("d1", "d2")
        ]
    )
    result = compare_batches(("A", "B"), (a, b), (usage_a, usage_b), ["d1"])
    row = result.dimensions[0]
    assert (row.n_items, row.mean_a, row.mean_b) == (3, 3.6667, 4.3333)
    assert row.mean_abs_diff == pytest.approx(2 / 3, abs=1e-4)
    assert row.pearson == 0.9286  # 39/42 and row.spearman == 1.0
    assert result.a.latency_ms_median == 200 and result.b.latency_ms_median == 150
    assert result.latency_change_pct == -25.0
    assert result.a.prompt_tokens_per_item == 200 and result.b.prompt_tokens_per_item == 120
    assert result.prompt_tokens_ratio == 0.6
    assert result.a.cost_usd == pytest.approx(0.006) and row.a.prompt_tokens == 300


def test_correlation_between_dimensions() -> None:
    correlations = DimensionCorrelations()
    for item, x, y, z in (("q1", 1, 2, 5), ("q2", 2, 4, 1), ("q3", 3, 6, 3)):
        for dimension, score in (("x", x), ("y", y), ("z", z)):
            correlations.add(_record(item, dimension, score))
    found = {(c.dimension_a, c.dimension_b): c.pearson for c in correlations.report()}
    assert found[("x", "y")] == 1.0
    assert found[("x", "z")] == pytest.approx(-0.5)
    assert len(found) == 3
