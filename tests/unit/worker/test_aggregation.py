"""worker.aggregation: the two-stage math, consensus and confidence, sample dedup, and every
aggregation choice of a batch file against hand-computed values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from jury.batchfile.loading import load_batch
from jury.errors import BatchFileError
from jury.schemas.batch import Aggregation
from jury.schemas.results import Level
from jury.worker.judging.aggregation import (
    aggregate_across_models,
    aggregate_within_model,
    build_verdict,
    confidence_level,
    consensus_level,
    majority_vote,
    sample_std,
    unique_samples,
)
from tests.sample_helpers import RELEVANCE, failed, judge, ok, scored

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


# --- every aggregation choice, through build_verdict -----------------------------------------

# Three judges on RELEVANCE (threshold 3.5): a = 4, 5, 4 (mean 13/3, median 4);
# b = 2, 2, 3 (mean 7/3, median 2); c = 5, 5, 5. Weights a 2, b 1, c 1.
CHOICE_PANEL = [judge("a", weight=2.0), judge("b"), judge("c")]
CHOICE_SAMPLES = scored("a", [4, 5, 4]) + scored("b", [2, 2, 3]) + scored("c", [5, 5, 5])


@pytest.mark.parametrize(
    ("within", "across", "final", "passed"),
    [
        ("mean", "mean", (13 / 3 + 7 / 3 + 5) / 3, True),  # 3.889
        ("mean", "median", 13 / 3, True),
        ("mean", "min", 7 / 3, False),
        ("mean", "max", 5.0, True),
        ("mean", "weighted_mean", (2 * 13 / 3 + 7 / 3 + 5) / 4, True),  # 4.0
        ("median", "mean", (4 + 2 + 5) / 3, True),  # 3.667
        ("median", "median", 4.0, True),
        ("median", "min", 2.0, False),
        ("median", "max", 5.0, True),
        ("median", "weighted_mean", (2 * 4 + 2 + 5) / 4, True),  # 3.75
        # Votes: a pass (weight 2), b fail (1), c pass (1): 3 against 1, a pass. The score shown
        # is the weighted mean.
        ("mean", "majority_vote", (2 * 13 / 3 + 7 / 3 + 5) / 4, True),
        ("median", "majority_vote", (2 * 4 + 2 + 5) / 4, True),
    ],
)
def test_aggregation_choices(within: str, across: str, final: float, passed: bool) -> None:
    aggregation = Aggregation.model_validate({"within_model": within, "across_models": across})
    verdict = build_verdict("q", RELEVANCE, CHOICE_PANEL, CHOICE_SAMPLES, aggregation)
    assert verdict.consensus_metrics.final_score == pytest.approx(final)
    assert verdict.passed is passed
    within_scores = {"mean": [13 / 3, 7 / 3, 5.0], "median": [4.0, 2.0, 5.0]}[within]
    assert [e.aggregated_score for e in verdict.llm_evaluations.values()] == pytest.approx(
        within_scores
    )
    # The cross-model spread does not depend on the choice of the final score.
    assert verdict.consensus_metrics.cross_model_std == pytest.approx(sample_std(within_scores))


def test_majority_vote_can_fail_what_the_mean_passes() -> None:
    # a = 5 passes; b = 3 and c = 3 fail: the mean 3.667 clears 3.5, the majority does not.
    panel = [judge("a", n=1), judge("b", n=1), judge("c", n=1)]
    samples = [ok("a", 0, 5), ok("b", 0, 3), ok("c", 0, 3)]
    mean = build_verdict("q", RELEVANCE, panel, samples, Aggregation())
    vote = build_verdict("q", RELEVANCE, panel, samples, Aggregation(across_models="majority_vote"))
    assert mean.passed is True
    assert vote.passed is False
    assert vote.consensus_metrics.final_score == pytest.approx(11 / 3)
    assert vote.consensus_metrics.flag_for_review is False


def test_majority_vote_weights_and_threshold() -> None:
    scores = {"a": 4.0, "b": 3.0, "c": 3.5}  # c sits on the threshold: it votes pass
    vote = majority_vote(scores, {"a": 1.0, "b": 3.0, "c": 1.0}, threshold=3.5)
    assert (vote.pass_weight, vote.fail_weight) == (2.0, 3.0)
    assert vote.passed is False and vote.tied is False
    assert majority_vote(scores, {}, threshold=3.5).passed is True  # 2 against 1 unweighted


def test_majority_vote_tie_fails_and_is_flagged() -> None:
    panel = [judge("a", n=1), judge("b", n=1)]
    samples = [ok("a", 0, 5), ok("b", 0, 2)]
    verdict = build_verdict(
        "q", RELEVANCE, panel, samples, Aggregation(across_models="majority_vote")
    )
    assert verdict.passed is False
    assert verdict.consensus_metrics.flag_for_review is True
    assert any("vote tied (1 pass, 1 fail)" in reason for reason in verdict.flag_reasons)


def test_majority_vote_leaves_out_a_judge_without_score() -> None:
    panel = [judge("a", n=1), judge("b", n=1), judge("c", n=1)]
    samples = [ok("a", 0, 4), ok("b", 0, 4), failed("c", 0)]
    verdict = build_verdict(
        "q", RELEVANCE, panel, samples, Aggregation(across_models="majority_vote")
    )
    assert verdict.passed is True  # 2 of 2 scoring judges; c casts no vote
    assert verdict.consensus_metrics.flag_for_review is True  # c dropped out


def test_an_unknown_aggregation_method_is_refused_with_the_choices(tmp_path: Path) -> None:
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "judges: [openai/gpt-4o-mini]\ndimensions: [relevance]\n"
        "aggregation: {across_models: majority}\nitems: [{id: a, output: b}]\n"
    )
    with pytest.raises(BatchFileError) as info:
        load_batch(batch)
    message = str(info.value)
    assert "aggregation.across_models" in message
    assert "'majority_vote'" in message and "(got 'majority')" in message
