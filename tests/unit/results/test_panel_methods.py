"""Several cross-judge aggregations side by side: the registry, the batch option, the record
and its csv row."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jury.results.csv_records import csv_columns, record_row
from jury.results.labelled import with_aggregations
from jury.schemas.batch import Aggregation, BatchConfig
from jury.schemas.pairwise import PairJudgment
from jury.schemas.results import SampleResult
from jury.stats.panel import ACROSS_MODELS, side_by_side
from jury.worker.judging.aggregation import build_verdict
from jury.worker.judging.pairwise_verdict import build_pairwise_verdict


def _config(**aggregation: object) -> BatchConfig:
    return BatchConfig.model_validate(
        {
            "judges": [
                {"model": "openai/a", "n": 1},
                {"model": "openai/b", "n": 1, "weight": 3},
                {"model": "openai/c", "n": 1},
            ],
            "dimensions": ["relevance"],
            "aggregation": aggregation,
        }
    )


def test_uqlm_columns_from_three_judges() -> None:
    scores = {"a": 2.0, "b": 4.0, "c": 5.0}
    panel = side_by_side(scores, {"b": 3.0}, ["mean", "max", "min", "median", "weighted_mean"])
    assert panel == {
        "mean": pytest.approx(11 / 3),
        "max": 5.0,
        "min": 2.0,
        "median": 4.0,
        "weighted_mean": pytest.approx((2 + 12 + 5) / 5),
    }
    assert side_by_side({}, {}, ["mean"]) == {"mean": None}


def test_every_batch_method_is_in_the_registry() -> None:
    assert set(Aggregation.model_fields["across_models"].annotation.__args__) <= set(ACROSS_MODELS)  # type: ignore[union-attr]


def test_the_main_method_comes_first_and_once() -> None:
    assert Aggregation().reported_methods == []
    config = Aggregation(across_models="median", also_across_models=["max", "median", "mean"])
    assert config.reported_methods == ["median", "max", "mean"]


@pytest.mark.parametrize(
    ("methods", "problem"),
    [
        (["max", "max"], "appear twice"),
        (["majority_vote"], "also_across_models"),
        (["avg"], "also_across_models"),
    ],
)
def test_bad_method_lists_are_refused(methods: list[str], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        _config(also_across_models=methods)


def test_records_and_csv_rows_carry_each_method() -> None:
    config = _config(also_across_models=["min", "max", "median"])
    samples = [
        SampleResult(judge=j, sample=0, score=s)
        for j, s in (("openai/a", 2.0), ("openai/b", 4.0), ("openai/c", 5.0))
    ]
    verdict = build_verdict("q1", config.dimensions[0], config.panel, samples, config.aggregation)
    record = with_aggregations(verdict, config)
    assert record.aggregations == {
        "mean": pytest.approx(11 / 3),
        "min": 2.0,
        "max": 5.0,
        "median": 4.0,
    }
    assert "aggregations" not in with_aggregations(verdict, _config()).model_dump()
    methods = config.aggregation.reported_methods
    columns = csv_columns(["openai/a"], methods=methods)
    row = dict(zip(columns, record_row(record, ["openai/a"], methods=methods), strict=True))
    assert (row["aggregation:min"], row["aggregation:max"], row["aggregation:median"]) == (
        2.0,
        5.0,
        4.0,
    )


def test_a_pairwise_record_reads_each_method_from_the_sides() -> None:
    """Judges' (A, B): a (2, 2), b (1, 3), c (1.5, 1.5). By max, A 2 and B 3: -1, the record's
    final_score; the max of the judges' preferences (0) is not what the record shows."""
    config = BatchConfig.model_validate(
        {
            "judges": [{"model": f"openai/{j}", "n": 1} for j in "abc"],
            "dimensions": ["relevance"],
            "pairwise": {},
            "aggregation": {"across_models": "max", "also_across_models": ["min", "mean"]},
        }
    )
    judgments = {
        ("openai/a", 0): PairJudgment(2, 2, 2, 2),
        ("openai/b", 0): PairJudgment(1, 3, 1, 3),
        ("openai/c", 0): PairJudgment(1.5, 1.5, 1.5, 1.5),
    }
    samples = [
        SampleResult(judge=j, sample=i, score=p.preference) for (j, i), p in judgments.items()
    ]
    verdict = build_pairwise_verdict(
        "q1", config.dimensions[0], config.panel, samples, judgments, config.aggregation, 0.5
    )
    record = with_aggregations(verdict, config)
    assert record.aggregations == {"max": -1.0, "min": -0.5, "mean": pytest.approx(-2 / 3)}
    assert record.aggregations["max"] == record.consensus_metrics.final_score
    columns = csv_columns([], pairwise=True)
    row = dict(zip(columns, record_row(record, [], pairwise=True), strict=True))
    assert (row["winner"], row["score_a"], row["score_b"]) == ("B", 2.0, 3.0)
    assert row["majority_tied_between"] == ""  # two of three judgments said tie
