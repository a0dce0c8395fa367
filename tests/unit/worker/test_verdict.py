"""build_verdict: the result record of one (item, dimension) from its raw samples."""

from __future__ import annotations

import pytest

from jury.schemas.batch import Aggregation, Dimension
from jury.schemas.results import Level, SampleResult
from jury.worker.judging.aggregation import (
    build_verdict,
    sample_std,
)
from tests.sample_helpers import RELEVANCE, failed, judge, ok, scored

# --- build_verdict --------------------------------------------------------------------------


def test_verdict_two_stage_mean_with_the_design_example() -> None:
    panel = [judge("a"), judge("b")]
    samples = scored("a", [4, 5, 4]) + scored("b", [4, 4, 4])
    verdict = build_verdict("q1", RELEVANCE, panel, samples, Aggregation())

    a = verdict.llm_evaluations["a"]
    assert a.samples == [4, 5, 4]
    assert round(a.aggregated_score or 0, 3) == 4.333
    assert round(a.within_model_std or 0, 3) == 0.577
    assert a.n_failed == 0
    b = verdict.llm_evaluations["b"]
    assert (b.aggregated_score, b.within_model_std) == (4.0, 0.0)

    metrics = verdict.consensus_metrics
    # The mean of the judges' means (the next test tells it apart from a pooled mean).
    assert metrics.final_score == pytest.approx((13 / 3 + 4) / 2)
    assert metrics.cross_model_std == pytest.approx(sample_std([13 / 3, 4.0]))
    assert metrics.consensus_level is Level.HIGH
    assert metrics.confidence is Level.HIGH
    assert metrics.flag_for_review is False
    assert verdict.passed is True
    assert verdict.threshold == 3.5
    assert verdict.item_id == "q1"
    assert verdict.criterion_id == "relevance"
    assert verdict.error is None
    assert verdict.flag_reasons == []


def test_verdict_is_the_mean_of_means_not_of_pooled_samples() -> None:
    panel = [judge("a", n=4), judge("b", n=1)]
    samples = scored("a", [1, 1, 1, 1]) + scored("b", [5])
    verdict = build_verdict("q", RELEVANCE, panel, samples, Aggregation())
    assert verdict.consensus_metrics.final_score == pytest.approx(3.0)  # pooled mean: 1.8


def test_verdict_record_shape_matches_the_design() -> None:
    panel = [judge("a")]
    record = build_verdict("q", RELEVANCE, panel, scored("a", [3, 4, 5]), Aggregation())
    data = record.model_dump(mode="json")
    assert {"item_id", "criterion_id", "llm_evaluations", "consensus_metrics", "passed"} <= set(
        data
    )
    assert set(data["llm_evaluations"]["a"]) >= {
        "samples",
        "aggregated_score",
        "within_model_std",
        "n_failed",
    }
    assert set(data["consensus_metrics"]) >= {
        "final_score",
        "cross_model_std",
        "consensus_level",
        "confidence",
        "flag_for_review",
    }


def test_verdict_within_model_median() -> None:
    panel = [judge("a")]
    verdict = build_verdict(
        "q", RELEVANCE, panel, scored("a", [1, 4, 5]), Aggregation(within_model="median")
    )
    assert verdict.llm_evaluations["a"].aggregated_score == 4
    assert verdict.consensus_metrics.final_score == 4


def test_judge_failing_every_sample_is_left_out_and_flags() -> None:
    panel = [judge("a"), judge("b")]
    samples = scored("a", [4, 5, 4]) + [failed("b", i, "HTTP 503 from provider") for i in range(3)]
    verdict = build_verdict("q1", RELEVANCE, panel, samples, Aggregation())

    b = verdict.llm_evaluations["b"]
    assert b.samples == []
    assert b.aggregated_score is None
    assert b.n_failed == 3
    metrics = verdict.consensus_metrics
    assert metrics.final_score == pytest.approx(13 / 3)  # b did not drag it to anything
    assert metrics.cross_model_std == 0.0
    assert metrics.flag_for_review is True
    assert metrics.confidence is not Level.HIGH
    assert verdict.passed is True
    assert verdict.error is None
    assert any("b" in reason and "HTTP 503" in reason for reason in verdict.flag_reasons)


def test_every_judge_failing_gives_a_null_final_score() -> None:
    panel = [judge("a"), judge("b", n=2)]
    samples = [failed("a", i) for i in range(3)] + [failed("b", i, "bad key") for i in range(2)]
    verdict = build_verdict("q1", RELEVANCE, panel, samples, Aggregation())

    metrics = verdict.consensus_metrics
    assert metrics.final_score is None
    assert metrics.cross_model_std is None
    assert metrics.consensus_level is None
    assert metrics.flag_for_review is True
    assert verdict.passed is None
    assert verdict.error
    assert "no judge produced a score" in verdict.error
    assert verdict.llm_evaluations["a"].n_failed == 3
    assert verdict.llm_evaluations["b"].n_failed == 2
    assert len(verdict.flag_reasons) == 2


def test_no_sample_at_all_still_gives_a_record() -> None:
    verdict = build_verdict("q1", RELEVANCE, [judge("a")], [], Aggregation())
    assert verdict.consensus_metrics.final_score is None
    assert verdict.consensus_metrics.flag_for_review is True
    assert verdict.passed is None
    assert verdict.error
    assert verdict.llm_evaluations["a"].n_failed == 3


def test_missing_samples_count_as_failed() -> None:
    panel = [judge("a", n=3), judge("b", n=3)]
    samples = [ok("a", 0, 4), ok("a", 2, 4), *scored("b", [4, 4, 4])]  # a's sample 1 never came
    verdict = build_verdict("q1", RELEVANCE, panel, samples, Aggregation())
    a = verdict.llm_evaluations["a"]
    assert a.samples == [4, 4]
    assert a.n_failed == 1
    assert verdict.consensus_metrics.final_score == pytest.approx(4.0)
    assert "judge a: 1 of 3 samples failed (missing)" in verdict.flag_reasons
    assert verdict.consensus_metrics.confidence is Level.MEDIUM  # degraded
    assert verdict.consensus_metrics.flag_for_review is True  # degraded records are reviewed


def test_a_failed_sample_flags_the_record_with_its_kind() -> None:
    panel = [judge("a", n=2), judge("b", n=2)]
    broken = SampleResult(judge="a", sample=1, error="503", error_kind="server_error")
    samples = [ok("a", 0, 4), broken, *scored("b", [4, 4])]
    verdict = build_verdict("q1", RELEVANCE, panel, samples, Aggregation())
    assert verdict.consensus_metrics.flag_for_review is True
    assert verdict.flag_reasons == ["judge a: 1 of 2 samples failed (server_error)"]
    assert verdict.passed is True  # the verdict itself still stands


def test_failed_and_missing_add_up() -> None:
    panel = [judge("a", n=4)]
    samples = [ok("a", 0, 3), failed("a", 1)]
    assert (
        build_verdict("q", RELEVANCE, panel, samples, Aggregation()).llm_evaluations["a"].n_failed
        == 3
    )


def test_low_consensus_flags_for_review() -> None:
    panel = [judge("a"), judge("b")]
    samples = scored("a", [1, 1, 1]) + scored("b", [5, 5, 5])  # cross std 2.83
    verdict = build_verdict("q", RELEVANCE, panel, samples, Aggregation(consensus_threshold=1.5))
    metrics = verdict.consensus_metrics
    assert metrics.consensus_level is Level.LOW
    assert metrics.flag_for_review is True
    assert metrics.confidence is Level.LOW
    assert any("low consensus" in reason for reason in verdict.flag_reasons)


def test_low_consensus_does_not_flag_when_switched_off() -> None:
    panel = [judge("a"), judge("b")]
    samples = scored("a", [1, 1, 1]) + scored("b", [5, 5, 5])
    aggregation = Aggregation(consensus_threshold=1.5, flag_low_consensus=False)
    verdict = build_verdict("q", RELEVANCE, panel, samples, aggregation)
    assert verdict.consensus_metrics.consensus_level is Level.LOW
    assert verdict.consensus_metrics.flag_for_review is False
    assert not any("low consensus" in reason for reason in verdict.flag_reasons)


def test_partial_consensus_does_not_flag() -> None:
    panel = [judge("a"), judge("b")]
    samples = scored("a", [3, 3, 3]) + scored("b", [4, 4, 4])  # cross std 0.707
    verdict = build_verdict("q", RELEVANCE, panel, samples, Aggregation())
    assert verdict.consensus_metrics.consensus_level is Level.PARTIAL
    assert verdict.consensus_metrics.confidence is Level.MEDIUM
    assert verdict.consensus_metrics.flag_for_review is False


@pytest.mark.parametrize(
    ("scores", "passed"),
    [
        ([3.5, 3.5, 3.5], True),
        ([3.4, 3.6, 3.6], True),
        ([3.4, 3.4, 3.5], False),
        ([1, 2, 3], False),
    ],
)
def test_passed_is_final_at_least_threshold(scores: list[float], passed: bool) -> None:
    verdict = build_verdict("q", RELEVANCE, [judge("a")], scored("a", scores), Aggregation())
    assert verdict.passed is passed


def test_passed_uses_the_dimension_threshold() -> None:
    strict = Dimension(name="tone", description="Kind?", threshold=4.5)
    verdict = build_verdict("q", strict, [judge("a")], scored("a", [4, 4, 4]), Aggregation())
    assert verdict.threshold == 4.5
    assert verdict.passed is False


def test_weighted_mean_across_models() -> None:
    panel = [judge("a", weight=3.0), judge("b", weight=1.0)]
    samples = scored("a", [4, 4, 4]) + scored("b", [2, 2, 2])
    verdict = build_verdict(
        "q", RELEVANCE, panel, samples, Aggregation(across_models="weighted_mean")
    )
    assert verdict.consensus_metrics.final_score == pytest.approx(3.5)


@pytest.mark.parametrize(("method", "expected"), [("min", 2.0), ("max", 5.0), ("median", 4.0)])
def test_other_across_model_methods(method: str, expected: float) -> None:
    panel = [judge("a"), judge("b"), judge("c")]
    samples = scored("a", [2, 2, 2]) + scored("b", [4, 4, 4]) + scored("c", [5, 5, 5])
    aggregation = Aggregation(across_models=method)
    verdict = build_verdict("q", RELEVANCE, panel, samples, aggregation)
    assert verdict.consensus_metrics.final_score == expected


def test_samples_are_kept_in_sample_order() -> None:
    panel = [judge("a", n=4)]
    arrivals = [ok("a", 3, 1), ok("a", 0, 5), failed("a", 2), ok("a", 1, 3)]
    verdict = build_verdict("q", RELEVANCE, panel, arrivals, Aggregation())
    assert verdict.llm_evaluations["a"].samples == [5, 3, 1]
    assert verdict.llm_evaluations["a"].n_failed == 1


def test_duplicate_deliveries_are_not_double_counted() -> None:
    panel = [judge("a", n=3)]
    samples = [ok("a", 0, 5), ok("a", 0, 5), ok("a", 0, 5), ok("a", 1, 1), ok("a", 2, 3)]
    verdict = build_verdict("q", RELEVANCE, panel, samples, Aggregation())
    a = verdict.llm_evaluations["a"]
    assert a.samples == [5, 1, 3]
    assert a.aggregated_score == pytest.approx(3.0)  # counting sample 0 thrice would give 3.8
    assert a.n_failed == 0


def test_duplicate_failed_then_ok_delivery_counts_the_success() -> None:
    panel = [judge("a", n=2)]
    samples = [failed("a", 0), ok("a", 0, 4), ok("a", 1, 4), failed("a", 1)]
    verdict = build_verdict("q", RELEVANCE, panel, samples, Aggregation())
    assert verdict.llm_evaluations["a"].samples == [4, 4]
    assert verdict.llm_evaluations["a"].n_failed == 0
    assert verdict.consensus_metrics.flag_for_review is False


def test_samples_outside_the_panel_are_ignored() -> None:
    panel = [judge("a", n=2)]
    samples = [*scored("a", [4, 4]), ok("a", 2, 1), ok("stranger", 0, 1)]
    verdict = build_verdict("q", RELEVANCE, panel, samples, Aggregation())
    assert set(verdict.llm_evaluations) == {"a"}
    assert verdict.consensus_metrics.final_score == 4.0


def test_noisy_judges_lower_confidence() -> None:
    panel = [judge("a"), judge("b")]
    samples = scored("a", [1, 5, 3]) + scored("b", [5, 1, 3])  # within std 2, means agree
    verdict = build_verdict("q", RELEVANCE, panel, samples, Aggregation(consensus_threshold=1.5))
    assert verdict.consensus_metrics.consensus_level is Level.HIGH
    assert verdict.consensus_metrics.confidence is Level.MEDIUM
