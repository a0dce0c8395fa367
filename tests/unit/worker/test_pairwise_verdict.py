"""The evaluator's figures on a pairwise record, from hand-made judgments."""

from __future__ import annotations

import statistics

import pytest
from jury.schemas.pair_sides import majority, side_scores

from jury.schemas.pairwise import PairJudgment, pairwise_outcome, side_pair

# Five runs: three prefer A by 0.6 points, two prefer B by 3.
RUNS = [PairJudgment(4, 3.4, 4, 3.4)] * 3 + [PairJudgment(2, 5, 2, 5)] * 2


def test_majority_winner_differs_from_the_mean_winner() -> None:
    """The issue's case: the evaluator's agreement is 60 % (with the majority winner, A);
    jury's is 40 % (with the winner of the mean, B); both are reported."""
    sides = side_scores({"judge": [side_pair(r) for r in RUNS]}, "mean", "mean", {})
    assert sides == (pytest.approx(3.2), pytest.approx(4.04))
    preference = statistics.fmean(r.preference for r in RUNS)
    outcome = pairwise_outcome(preference, RUNS, 0.01, sides=sides, names=("dotnet", "python"))
    assert outcome.winner == "B" and outcome.winner_name == "python"
    assert outcome.score_a - outcome.score_b == pytest.approx(preference)  # type: ignore[operator]
    assert outcome.agreement_pct == 40.0
    assert outcome.majority_winner == "A" and outcome.majority_agreement_pct == 60.0
    assert outcome.std_a == pytest.approx(statistics.stdev([4, 4, 4, 2, 2]))
    assert outcome.std_b == pytest.approx(statistics.stdev([3.4, 3.4, 3.4, 5, 5]))


def test_the_scores_shown_follow_the_batch_aggregation() -> None:
    by_judge = {"x": [(4.0, 2.0), (4.0, 2.0)], "y": [(1.0, 5.0)], "z": [(3.0, 3.0)]}
    assert side_scores(by_judge, "mean", "median", {}) == (3.0, 3.0)
    assert side_scores(by_judge, "mean", "max", {}) == (4.0, 5.0)
    assert side_scores(by_judge, "mean", "weighted_mean", {"x": 2}) == (3.0, 3.0)
    assert side_scores({}, "mean", "mean", {}) == (None, None)


def test_majority_without_a_clear_top_is_a_tie() -> None:
    assert majority(["A", "A", "B"]) == ("A", 2)
    assert majority(["A", "B", "tie"]) == ("tie", 1)
    assert majority(["A", "B"]) == ("tie", 0)
    assert majority([]) == (None, 0)


@pytest.mark.parametrize("names", [["a", "a"], ["a", " "], ["a", "x" * 101]])
def test_side_names_are_checked(names: list[str]) -> None:
    from pydantic import ValidationError

    from jury.schemas.pairwise import PairwiseSettings

    with pytest.raises(ValidationError, match="name"):
        PairwiseSettings.model_validate({"names": names})
