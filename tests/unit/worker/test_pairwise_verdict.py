"""A pairwise cell's verdict (worker.judging.pairwise_verdict): the winner follows from the side
scores shown for every aggregation method, swapping the sides mirrors the verdict exactly, and
the evaluator's majority winner and agreement, from hand-made judgments."""

from __future__ import annotations

import random
import statistics
from typing import get_args

import pytest

from jury.schemas.batch import AcrossModelsMethod, Aggregation, WithinModelMethod
from jury.schemas.pairwise import PairJudgment, Winner, winner_of
from jury.schemas.results import SampleResult, Verdict
from jury.stats.panel import across_models, preference_side_by_side
from jury.worker.judging.pairwise_verdict import (
    Majority,
    build_pairwise_verdict,
    majority,
    pairwise_outcome,
    side_pair,
)
from tests.sample_helpers import RELEVANCE, judge

# Five runs: three prefer A by 0.6 points, two prefer B by 3.
RUNS = [PairJudgment(4, 3.4, 4, 3.4)] * 3 + [PairJudgment(2, 5, 2, 5)] * 2

# Every cross-judge method a pairwise batch accepts (majority_vote is refused at validation:
# tests/unit/schemas/test_modes_config.py).
PAIRWISE_METHODS = [m for m in get_args(AcrossModelsMethod) if m != "majority_vote"]
SWAP: dict[Winner, Winner] = {"A": "B", "B": "A", "tie": "tie"}
MIRROR: dict[Winner | None, Winner | None] = {"A": "B", "B": "A", "tie": "tie", None: None}


def _mirrored(judgment: PairJudgment) -> PairJudgment:
    """The same judgment with the sides swapped: the old B is the new A, and the order that
    showed the old B first is the new A-first order."""
    assert judgment.b_first_a is not None and judgment.b_first_b is not None
    return PairJudgment(
        judgment.b_first_b, judgment.b_first_a, judgment.a_first_b, judgment.a_first_a
    )


def _cell(
    judgments: dict[tuple[str, int], PairJudgment],
) -> list[SampleResult]:
    return [
        SampleResult(judge=name, sample=index, score=j.preference)
        for (name, index), j in judgments.items()
    ]


def _verdict(
    judgments: dict[tuple[str, int], PairJudgment],
    within: str,
    across: str,
    tolerance: float = 0.5,
    weights: tuple[float, ...] = (1.0, 2.0, 0.5),
) -> Verdict:
    names = sorted({name for name, _ in judgments})
    panel = [
        judge(name, n=sum(1 for j, _ in judgments if j == name), weight=w)
        for name, w in zip(names, weights, strict=False)
    ]
    aggregation = Aggregation.model_validate({"within_model": within, "across_models": across})
    return build_pairwise_verdict(
        "q1", RELEVANCE, panel, _cell(judgments), judgments, aggregation, tolerance
    )


def _random_cell(seed: int) -> dict[tuple[str, int], PairJudgment]:
    """Three judges, one to three samples each, scores on 1..5 in halves, position bias
    included: panels on which mean, median, min and max all tell different stories."""
    rng = random.Random(seed)
    cell: dict[tuple[str, int], PairJudgment] = {}
    for name in ("x", "y", "z"):
        for index in range(rng.randint(1, 3)):
            four = [rng.randint(2, 10) / 2 for _ in range(4)]
            cell[(name, index)] = PairJudgment(*four)
    return cell


def test_the_issue_case_no_longer_contradicts_itself() -> None:
    """Three judges, `across_models: max`: x scores A 2 and B 2, y A 1 and B 3, z A 1.5 and
    B 1.5. The max of the judges' preferences is 0 (a tie), but the max of each side is A 2,
    B 3: the record used to show score_a 2.0, score_b 3.0 and a tie. Now B wins by 1."""
    cell = {
        ("x", 0): PairJudgment(2, 2, 2, 2),
        ("y", 0): PairJudgment(1, 3, 1, 3),
        ("z", 0): PairJudgment(1.5, 1.5, 1.5, 1.5),
    }
    verdict = _verdict(cell, "mean", "max", weights=(1, 1, 1))
    outcome = verdict.pairwise
    assert outcome is not None
    assert (outcome.score_a, outcome.score_b) == (2.0, 3.0)
    assert verdict.consensus_metrics.final_score == outcome.preference == -1.0
    assert outcome.winner == "B"
    assert outcome.judge_scores == {"x": (2.0, 2.0), "y": (1.0, 3.0), "z": (1.5, 1.5)}
    assert {j: e.aggregated_score for j, e in verdict.llm_evaluations.items()} == {
        "x": 0.0,
        "y": -2.0,
        "z": 0.0,
    }
    # The judges disagree on the preference: their spread is that of 0, -2, 0.
    assert verdict.consensus_metrics.cross_model_std == pytest.approx(statistics.stdev([0, -2, 0]))
    assert verdict.passed is None


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("within", get_args(WithinModelMethod))
@pytest.mark.parametrize("across", PAIRWISE_METHODS)
def test_the_winner_follows_from_the_scores_shown_in_both_side_orders(
    across: str, within: str, seed: int
) -> None:
    cell = _random_cell(seed)
    verdict = _verdict(cell, within, across)
    swapped = _verdict({key: _mirrored(j) for key, j in cell.items()}, within, across)
    for record in (verdict, swapped):
        outcome = record.pairwise
        assert outcome is not None and outcome.judge_scores is not None
        assert outcome.score_a is not None and outcome.score_b is not None
        final = record.consensus_metrics.final_score
        # The preference is the difference of the very scores shown, the winner its verdict.
        assert final == outcome.preference == outcome.score_a - outcome.score_b
        assert outcome.winner == winner_of(outcome.score_a - outcome.score_b, 0.5)
        # Each side is the batch's cross-judge method over the judges' scores of that side.
        weights = {"x": 1.0, "y": 2.0, "z": 0.5}
        sides = outcome.judge_scores
        assert outcome.score_a == across_models(
            {j: s[0] for j, s in sides.items()}, weights, across
        )
        assert outcome.score_b == across_models(
            {j: s[1] for j, s in sides.items()}, weights, across
        )
        # A judge's score is its own A − B, the side-by-side figure of the main method the
        # record's final score.
        for name, evaluation in record.llm_evaluations.items():
            assert evaluation.aggregated_score == sides[name][0] - sides[name][1]
        assert preference_side_by_side(sides, weights, [across]) == {across: final}

    # Swapping the sides mirrors the verdict exactly (==, not approximately).
    a, b = verdict.pairwise, swapped.pairwise
    assert a is not None and b is not None
    assert (b.score_a, b.score_b) == (a.score_b, a.score_a)
    assert (b.std_a, b.std_b) == (a.std_b, a.std_a)
    assert b.preference == -a.preference  # type: ignore[operator]
    assert b.winner == MIRROR[a.winner]
    assert b.majority_winner == MIRROR[a.majority_winner]
    assert (b.n_majority, b.majority_agreement_pct) == (a.n_majority, a.majority_agreement_pct)
    assert sorted(b.majority_tied_between or []) == sorted(
        SWAP[w] for w in a.majority_tied_between or []
    )
    assert (b.n_agreeing, b.agreement_pct) == (a.n_agreeing, a.agreement_pct)
    assert b.position_consistency_pct == a.position_consistency_pct
    assert b.first_position_bias == a.first_position_bias  # the bias is about position
    assert b.judge_scores == {j: (s[1], s[0]) for j, s in (a.judge_scores or {}).items()}
    mine, theirs = verdict.consensus_metrics, swapped.consensus_metrics
    assert theirs.cross_model_std == mine.cross_model_std
    assert (theirs.consensus_level, theirs.confidence) == (mine.consensus_level, mine.confidence)
    assert theirs.flag_for_review == mine.flag_for_review
    assert swapped.flag_reasons == verdict.flag_reasons
    for name, evaluation in verdict.llm_evaluations.items():
        other = swapped.llm_evaluations[name]
        assert other.aggregated_score == -evaluation.aggregated_score  # type: ignore[operator]
        assert other.within_model_std == evaluation.within_model_std


def test_methods_that_are_not_linear_can_name_a_different_winner_than_the_mean() -> None:
    """The point of deriving from the sides: max and min read the most (least) generous
    judge of each side, which need not be the same judge."""
    cell = {
        ("x", 0): PairJudgment(5, 4, 5, 4),  # A 5, B 4
        ("y", 0): PairJudgment(2, 5, 2, 5),  # A 2, B 5
        ("z", 0): PairJudgment(3, 3, 3, 3),
    }
    winners = {m: _verdict(cell, "mean", m, weights=(1, 1, 1)).pairwise for m in PAIRWISE_METHODS}
    assert winners["mean"] is not None and winners["mean"].winner == "B"  # (10 - 12) / 3
    assert winners["max"] is not None and winners["max"].winner == "tie"  # 5 vs 5
    assert winners["min"] is not None and winners["min"].winner == "B"  # 2 vs 3
    assert winners["median"] is not None and winners["median"].winner == "B"  # 3 vs 4


def test_median_within_a_judge_reads_each_side() -> None:
    cell = {("x", 0): PairJudgment(5, 1, 5, 1), ("x", 1): PairJudgment(2, 3, 2, 3)}
    cell[("x", 2)] = PairJudgment(3, 4, 3, 4)
    verdict = _verdict(cell, "median", "mean")
    # Median of A's 5, 2, 3 is 3; of B's 1, 3, 4 is 3: a tie, though the median of the
    # judgments' preferences (+4, -1, -1) is -1.
    assert verdict.pairwise is not None and verdict.pairwise.judge_scores == {"x": (3.0, 3.0)}
    assert verdict.consensus_metrics.final_score == 0.0 and verdict.pairwise.winner == "tie"


def test_a_cell_no_judge_scored_has_no_winner() -> None:
    panel = [judge("x", n=1)]
    samples = [SampleResult(judge="x", sample=0, error="timed out", error_kind="timeout")]
    verdict = build_pairwise_verdict("q", RELEVANCE, panel, samples, {}, Aggregation(), 0.5)
    assert verdict.consensus_metrics.final_score is None and verdict.passed is None
    assert verdict.pairwise is not None and verdict.pairwise.winner is None
    assert verdict.error is not None and "no judge produced a score" in verdict.error


def test_majority_winner_differs_from_the_mean_winner() -> None:
    """The evaluator's agreement is 60 % (with the majority winner, A); jury's is 40 % (with
    the winner of the mean, B); both are reported."""
    sides = (
        statistics.fmean(side_pair(r)[0] for r in RUNS),
        statistics.fmean(side_pair(r)[1] for r in RUNS),
    )
    assert sides == (pytest.approx(3.2), pytest.approx(4.04))
    preference = sides[0] - sides[1]
    outcome = pairwise_outcome(preference, RUNS, 0.01, sides=sides, names=("dotnet", "python"))
    assert outcome.winner == "B" and outcome.winner_name == "python"
    assert outcome.agreement_pct == 40.0
    assert outcome.majority_winner == "A" and outcome.majority_agreement_pct == 60.0
    assert outcome.majority_tied_between is None
    assert outcome.std_a == pytest.approx(statistics.stdev([4, 4, 4, 2, 2]))
    assert outcome.std_b == pytest.approx(statistics.stdev([3.4, 3.4, 3.4, 5, 5]))


def test_two_sides_named_equally_often_are_a_tie_at_their_share() -> None:
    """The issue's record: two runs for A, two for B, one tie. No side has the majority: it
    is a tie between A and B, and its agreement is the share naming the most frequent
    winner, 40 %, not the 20 % that said tie."""
    runs = [PairJudgment(5, 3, 5, 3)] * 2 + [PairJudgment(2, 4, 2, 4)] * 2
    runs.append(PairJudgment(3, 3, 3, 3))
    outcome = pairwise_outcome(0.0, runs, 0.5)
    assert outcome.majority_winner == "tie"
    assert outcome.majority_tied_between == ["A", "B"]
    assert (outcome.n_majority, outcome.majority_agreement_pct) == (2, 40.0)
    mirrored = pairwise_outcome(-0.0, [_mirrored(r) for r in runs], 0.5)
    assert mirrored.majority_tied_between == ["A", "B"] and mirrored.majority_agreement_pct == 40.0


def test_majority_counts() -> None:
    assert majority(["A", "A", "B"]) == Majority("A", 2)
    assert majority(["tie", "B", "tie"]) == Majority("tie", 2)
    assert majority(["B", "A", "tie"]) == Majority("tie", 1, ["A", "B", "tie"])
    assert majority(["tie", "A", "A", "tie", "B"]) == Majority("tie", 2, ["A", "tie"])
    assert majority([]) == Majority(None, 0)


@pytest.mark.parametrize("names", [["a", "a"], ["a", " "], ["a", "x" * 101]])
def test_side_names_are_checked(names: list[str]) -> None:
    from pydantic import ValidationError

    from jury.schemas.pairwise import PairwiseSettings

    with pytest.raises(ValidationError, match="name"):
        PairwiseSettings.model_validate({"names": names})
