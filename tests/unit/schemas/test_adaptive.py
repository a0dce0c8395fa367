"""Adaptive sampling's pure parts: the first round, the escalation, the uncertainty rule."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from jury.schemas.adaptive import escalation, first_round, first_round_panel, is_uncertain
from jury.schemas.batch import Aggregation, BatchConfig
from jury.worker.judging.aggregation import build_verdict
from tests.sample_helpers import RELEVANCE, failed, judge, scored


def config(**extra: Any) -> BatchConfig:
    return BatchConfig.model_validate(
        {
            "judges": [
                {"model": "openai/a", "n": 3},
                {"model": "openai/b", "n": 1},
                {"model": "openai/c", "n": 2, "reserve": True},
            ],
            "dimensions": ["relevance"],
            "adaptive": {"initial_samples": 2, "max_std": 0.5},
            **extra,
        }
    )


def test_first_round_takes_initial_samples_of_the_non_reserve_judges() -> None:
    c = config()
    assert first_round(c) == [("openai/a", 0), ("openai/a", 1), ("openai/b", 0)]
    assert [(j.name, j.n) for j in first_round_panel(c)] == [("openai/a", 2), ("openai/b", 1)]
    assert escalation(c) == [("openai/a", 2), ("openai/c", 0), ("openai/c", 1)]
    assert sorted(first_round(c) + escalation(c)) == sorted(
        (j.name, i) for j in c.panel for i in range(j.n)
    )


def test_without_adaptive_the_first_round_is_everything() -> None:
    plain = BatchConfig.model_validate(
        {"judges": [{"model": "openai/a", "n": 2}], "dimensions": ["relevance"]}
    )
    assert first_round(plain) == [("openai/a", 0), ("openai/a", 1)]
    assert escalation(plain) == []


def verdict_of(samples: dict[str, list[float]], failures: int = 0) -> Any:
    panel = [judge(name, n=len(scores) + failures) for name, scores in samples.items()]
    results = [s for name, scores in samples.items() for s in scored(name, scores)]
    results += [failed(panel[0].name, len(samples[panel[0].name]) + k) for k in range(failures)]
    return build_verdict("i", RELEVANCE, panel, results, Aggregation())


def test_uncertainty_rule_hand_computed() -> None:
    # Judges 4 and 4.5: std across judges 0.354 <= 0.5; within 0 -> certain.
    assert not is_uncertain(verdict_of({"a": [4], "b": [4.5]}), 0.5)
    # Judges 2 and 4: std 1.414 > 0.5 -> uncertain.
    assert is_uncertain(verdict_of({"a": [2], "b": [4]}), 0.5)
    # One judge's own samples 3 and 4: within-model std 0.707 > 0.5 -> uncertain.
    assert is_uncertain(verdict_of({"a": [3, 4], "b": [3.5]}), 0.5)
    # The same with a looser bound: certain.
    assert not is_uncertain(verdict_of({"a": [3, 4], "b": [3.5]}), 0.8)
    # A failed sample leaves the cell uncertain, whatever the spread.
    assert is_uncertain(verdict_of({"a": [4], "b": [4]}, failures=1), 5.0)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"adaptive": None}, "only an `adaptive:` batch uses"),
        ({"adaptive": {"initial_samples": 0}}, "initial_samples"),
        ({"adaptive": {"max_std": -1}}, "max_std"),
        ({"adaptive": {"bound": 1}}, "bound"),
    ],
)
def test_bad_adaptive_settings_are_refused(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        config(**extra)


def test_all_reserve_panel_is_refused() -> None:
    with pytest.raises(ValidationError, match="every judge is a reserve judge"):
        BatchConfig.model_validate(
            {
                "judges": [{"model": "openai/a", "reserve": True}],
                "dimensions": ["relevance"],
                "adaptive": {},
            }
        )
