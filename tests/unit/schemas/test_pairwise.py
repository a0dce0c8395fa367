"""schemas.pairwise: the winner from scores with a tie tolerance, agreement, order consistency,
position bias and batch totals, against hand-computed values; the record's shape."""

from __future__ import annotations

import pytest

from jury.results.pairwise_totals import PairwiseAccumulator
from jury.schemas.pairwise import PairJudgment, winner_of
from jury.schemas.results import ConsensusMetrics, Level, Verdict
from jury.worker.judging.pairwise_verdict import pairwise_outcome


@pytest.mark.parametrize(
    ("preference", "winner"),
    [(0.6, "A"), (0.5, "tie"), (0.0, "tie"), (-0.5, "tie"), (-0.51, "B"), (3.0, "A")],
)
def test_winner_from_the_preference_with_a_tie_tolerance(preference: float, winner: str) -> None:
    assert winner_of(preference, 0.5) == winner


def test_a_zero_tolerance_ties_only_equal_scores() -> None:
    assert winner_of(0.0, 0.0) == "tie"
    assert winner_of(0.01, 0.0) == "A"


def test_a_judgment_averages_both_orders() -> None:
    # A first: A 5, B 3 (+2); B first: A 4, B 4 (0). Preference +1.
    judgment = PairJudgment(a_first_a=5, a_first_b=3, b_first_a=4, b_first_b=4)
    assert judgment.preference == 1.0
    assert judgment.order_preferences == (2.0, 0.0)
    # First shown gains: +2 with A first, 0 with B first → 1 point on average.
    assert judgment.first_position_advantage == 1.0


def test_position_bias_cancels_from_the_preference() -> None:
    # True scores A 4, B 3; the judge adds 1 to whatever it reads first.
    biased = PairJudgment(a_first_a=5, a_first_b=3, b_first_a=4, b_first_b=4)
    fair = PairJudgment(a_first_a=4, a_first_b=3, b_first_a=4, b_first_b=3)
    assert biased.preference == fair.preference == 1.0
    assert fair.first_position_advantage == 0.0


def test_outcome_hand_computed() -> None:
    judgments = [
        PairJudgment(5, 3, 4, 4),  # +1, orders say A then tie: inconsistent
        PairJudgment(4, 2, 4, 2),  # +2, consistent
        PairJudgment(3, 3, 2, 4),  # -1, orders tie then B: inconsistent
        PairJudgment(4, 4, 4, 4),  # 0, consistent tie
    ]
    outcome = pairwise_outcome(0.8, judgments, tie_tolerance=0.5)
    assert outcome.winner == "A" and outcome.preference == 0.8
    assert outcome.n_judgments == 4
    assert (outcome.n_agreeing, outcome.agreement_pct) == (2, 50.0)
    assert (outcome.n_position_consistent, outcome.position_consistency_pct) == (2, 50.0)
    # A: (5+4 + 4+4 + 3+2 + 4+4) / 8; B: (3+4 + 2+2 + 3+4 + 4+4) / 8.
    assert outcome.score_a == pytest.approx(30 / 8)
    assert outcome.score_b == pytest.approx(26 / 8)
    # Advantages: 1, 0, 1 ((0 + 2) / 2), 0.
    assert outcome.first_position_bias == pytest.approx(0.5)


def test_outcome_without_any_score() -> None:
    outcome = pairwise_outcome(None, [], tie_tolerance=0.5)
    assert outcome.winner is None and outcome.n_judgments == 0
    assert outcome.agreement_pct is None and outcome.score_a is None
    assert outcome.first_position_bias is None


def test_totals_per_dimension_and_overall() -> None:
    acc = PairwiseAccumulator()
    assert acc.empty
    win = pairwise_outcome(1.0, [PairJudgment(4, 3, 4, 3)] * 2, 0.5)
    loss = pairwise_outcome(-2.0, [PairJudgment(2, 4, 2, 4), PairJudgment(4, 4, 4, 4)], 0.5)
    tie = pairwise_outcome(0.0, [PairJudgment(4, 4, 4, 4)], 0.5)
    for criterion, outcome in [("x", win), ("x", loss), ("x", tie), ("y", win)]:
        acc.add(criterion, outcome)
    acc.add("y", pairwise_outcome(None, [], 0.5))
    report = acc.report()
    x = report.dimensions["x"]
    assert (x.wins_a, x.wins_b, x.ties, x.undecided, x.n_records) == (1, 1, 1, 0, 3)
    assert x.win_rate_a == pytest.approx((1 + 0.5) / 3, abs=1e-4)
    # Judgments agreeing with their record: 2 of 2, 1 of 2, 1 of 1 → 4 of 5.
    assert (x.n_judgments, x.agreement_pct) == (5, 80.0)
    y = report.dimensions["y"]
    assert (y.wins_a, y.undecided, y.n_records, y.win_rate_a) == (1, 1, 2, 1.0)
    overall = report.overall
    assert (overall.wins_a, overall.wins_b, overall.ties, overall.undecided) == (2, 1, 1, 1)
    assert overall.position_consistency_pct == 100.0
    assert overall.first_position_bias == 0.0


def _verdict(**extra: object) -> Verdict:
    return Verdict.model_validate(
        {
            "item_id": "q1",
            "criterion_id": "relevance",
            "llm_evaluations": {},
            "consensus_metrics": ConsensusMetrics(
                final_score=1.0,
                cross_model_std=0.0,
                consensus_level=Level.HIGH,
                confidence=Level.LOW,
                flag_for_review=False,
            ),
            "passed": None,
            "threshold": 3.5,
            **extra,
        }
    )


def test_ordinary_records_keep_their_shape() -> None:
    record = _verdict().model_dump(mode="json")
    assert "pairwise" not in record
    assert set(record) == {
        "item_id",
        "criterion_id",
        "llm_evaluations",
        "consensus_metrics",
        "passed",
        "threshold",
        "error",
        "flag_reasons",
    }
    assert '"pairwise"' not in _verdict().model_dump_json()


def test_pairwise_records_carry_the_outcome() -> None:
    outcome = pairwise_outcome(1.0, [PairJudgment(4, 3, 4, 3)], 0.5)
    record = _verdict(pairwise=outcome).model_dump(mode="json")
    assert record["pairwise"]["winner"] == "A"
    assert record["pairwise"]["agreement_pct"] == 100.0
    assert Verdict.model_validate(record).pairwise == outcome
