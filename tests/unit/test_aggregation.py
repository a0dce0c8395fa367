"""worker.aggregation: the two-stage math, consensus and confidence, sample dedup."""

from __future__ import annotations

import math

import pytest

from schemas.results import Level
from tests.sample_helpers import failed, ok
from worker.aggregation import (
    aggregate_across_models,
    aggregate_within_model,
    confidence_level,
    consensus_level,
    sample_std,
    unique_samples,
)

# --- sample_std -----------------------------------------------------------------------------


def test_sample_std_uses_ddof_1() -> None:
    assert sample_std([4, 5, 4]) == pytest.approx(0.5773502691896257)
    assert sample_std([1, 5]) == pytest.approx(math.sqrt(8))  # population std would be 2


def test_sample_std_of_one_value_is_zero() -> None:
    assert sample_std([3.5]) == 0.0


def test_sample_std_of_nothing_is_none() -> None:
    assert sample_std([]) is None


# --- within and across models ---------------------------------------------------------------


def test_within_model_mean() -> None:
    evaluation = aggregate_within_model([4, 5, 4], n_failed=0)
    assert evaluation.samples == [4, 5, 4]
    assert evaluation.aggregated_score == pytest.approx(4.333, abs=5e-4)
    assert evaluation.within_model_std == pytest.approx(0.577, abs=5e-4)
    assert evaluation.n_failed == 0


def test_within_model_median() -> None:
    assert aggregate_within_model([1, 5, 4], 0, "median").aggregated_score == 4
    assert aggregate_within_model([1, 2, 4, 5], 0, "median").aggregated_score == 3


def test_within_model_keeps_n_failed() -> None:
    assert aggregate_within_model([3], n_failed=2).n_failed == 2


def test_within_model_without_scores() -> None:
    evaluation = aggregate_within_model([], n_failed=3)
    assert evaluation.samples == []
    assert evaluation.aggregated_score is None
    assert evaluation.within_model_std is None
    assert evaluation.n_failed == 3


@pytest.mark.parametrize(
    ("method", "expected"),
    [("mean", 3.0), ("median", 3.0), ("min", 1.0), ("max", 5.0)],
)
def test_across_models(method: str, expected: float) -> None:
    scores = {"a": 1.0, "b": 3.0, "c": 5.0}
    assert aggregate_across_models(scores, {}, method) == expected


def test_across_models_median_of_even_count() -> None:
    assert aggregate_across_models({"a": 1, "b": 2, "c": 4, "d": 5}, {}, "median") == 3


def test_across_models_weighted_mean() -> None:
    result = aggregate_across_models({"a": 4.0, "b": 2.0}, {"a": 3.0, "b": 1.0}, "weighted_mean")
    assert result == pytest.approx(3.5)


def test_across_models_weighted_mean_ignores_weights_of_absent_judges() -> None:
    result = aggregate_across_models({"a": 4.0}, {"a": 3.0, "b": 100.0}, "weighted_mean")
    assert result == pytest.approx(4.0)


def test_across_models_without_scores() -> None:
    assert aggregate_across_models({}, {}, "mean") is None


# --- consensus and confidence ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("std", "expected"),
    [
        (0.0, Level.HIGH),
        (0.499, Level.HIGH),
        (0.5, Level.PARTIAL),
        (1.0, Level.PARTIAL),
        (1.5, Level.PARTIAL),
        (1.5001, Level.LOW),
        (3.0, Level.LOW),
    ],
)
def test_consensus_level_boundaries(std: float, expected: Level) -> None:
    assert consensus_level(std, threshold=1.5) is expected


def test_consensus_level_follows_the_threshold() -> None:
    assert consensus_level(0.8, threshold=0.7) is Level.LOW
    assert consensus_level(0.8, threshold=0.9) is Level.PARTIAL


@pytest.mark.parametrize(
    ("consensus", "n_judges", "degraded", "noisy", "expected"),
    [
        (Level.HIGH, 2, False, False, Level.HIGH),
        (Level.PARTIAL, 2, False, False, Level.MEDIUM),
        (Level.LOW, 3, False, False, Level.LOW),
        (Level.HIGH, 1, False, False, Level.MEDIUM),
        (Level.HIGH, 2, True, False, Level.MEDIUM),
        (Level.HIGH, 2, False, True, Level.MEDIUM),
        (Level.HIGH, 1, True, False, Level.LOW),
        (Level.PARTIAL, 2, True, False, Level.LOW),
        (Level.HIGH, 1, True, True, Level.LOW),
    ],
)
def test_confidence_level(
    consensus: Level, n_judges: int, degraded: bool, noisy: bool, expected: Level
) -> None:
    assert confidence_level(consensus, n_judges, degraded, noisy) is expected


# --- unique_samples -------------------------------------------------------------------------


def test_unique_samples_counts_a_duplicate_once() -> None:
    cells = unique_samples([ok("a", 0, 4), ok("a", 0, 4), ok("a", 1, 2), ok("b", 0, 3)])
    assert set(cells) == {("a", 0), ("a", 1), ("b", 0)}


@pytest.mark.parametrize("ok_first", [True, False])
def test_unique_samples_ok_beats_failed(ok_first: bool) -> None:
    pair = [ok("a", 0, 4), failed("a", 0)]
    cells = unique_samples(pair if ok_first else pair[::-1])
    assert cells[("a", 0)].score == 4
    assert cells[("a", 0)].ok
