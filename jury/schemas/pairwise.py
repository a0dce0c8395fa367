"""Pairwise comparison: its settings, the outcome of one (item, dimension), batch totals.

A pairwise batch compares two outputs of each item, `output_a` and `output_b`. Every sample
asks the judge twice, once with A shown first and once with B first, for a score of each
output on the dimension's scale; the sample's score is the *preference for A*, the mean over
both orders of score_a - score_b, so a judge that favours whatever it reads first cancels
out. The winner comes from that preference (the verdict's final score) and a tie tolerance,
never from a judge saying who won.

Pure functions and pydantic models only: the worker computes outcomes with them and the
producer totals them while records stream past.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import fmean
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jury.schemas.pair_sides import SidePair, majority, side_spread

Winner = Literal["A", "B", "tie"]
DEFAULT_TIE_TOLERANCE = 0.5


class PairwiseSettings(BaseModel):
    """The batch file's `pairwise:` section."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # A preference for A within ±tie_tolerance (in points of the dimension's scale) is a tie.
    tie_tolerance: float = Field(default=DEFAULT_TIE_TOLERANCE, ge=0, le=1e6)
    # both: every sample shows the pair A first, then B first (position bias cancels out);
    # single: A first only, half the calls, when cost matters more than position bias.
    orders: Literal["both", "single"] = "both"
    # The two sides' names, for output_a and output_b (the two chatbots compared): shown in
    # each record (`name_a`, `name_b`, `winner_name`) and in the totals.
    names: tuple[str, str] | None = None

    @field_validator("names")
    @classmethod
    def _distinct_names(cls, value: tuple[str, str] | None) -> tuple[str, str] | None:
        if value is not None and (value[0] == value[1] or not all(n.strip() for n in value)):
            raise ValueError("the two sides need two different, non-empty names")
        if value is not None and max(len(n) for n in value) > 100:
            raise ValueError("a side's name is at most 100 characters")
        return value


def winner_of(preference: float, tie_tolerance: float) -> Winner:
    """A wins above +tolerance, B below -tolerance; anything in between is a tie."""
    if abs(preference) <= tie_tolerance:
        return "tie"
    return "A" if preference > 0 else "B"


class PairJudgment(NamedTuple):
    """One pairwise sample: the scores of A and B in each presentation order (B first is
    absent when the batch shows each pair once, `orders: single`)."""

    a_first_a: float  # A shown first: A's score
    a_first_b: float  # A shown first: B's score
    b_first_a: float | None = None  # B shown first: A's score
    b_first_b: float | None = None  # B shown first: B's score

    @property
    def both_orders(self) -> bool:
        return self.b_first_a is not None and self.b_first_b is not None

    @property
    def order_preferences(self) -> tuple[float, ...]:
        """The preference for A read from each order shown (A first, then B first)."""
        if self.b_first_a is None or self.b_first_b is None:
            return (self.a_first_a - self.a_first_b,)
        return self.a_first_a - self.a_first_b, self.b_first_a - self.b_first_b

    @property
    def preference(self) -> float:
        """score_a - score_b, averaged over the orders shown: the sample's stored score."""
        orders = self.order_preferences
        return sum(orders) / len(orders)

    @property
    def first_position_advantage(self) -> float | None:
        """How many points the output shown first gains over the one shown second, on
        average over both orders: 0 for a judge without position bias; None when the pair
        was shown in one order only (the bias cannot be told from the preference)."""
        if self.b_first_a is None or self.b_first_b is None:
            return None
        return ((self.a_first_a - self.a_first_b) + (self.b_first_b - self.b_first_a)) / 2

    @property
    def scores_a(self) -> list[float]:
        return [s for s in (self.a_first_a, self.b_first_a) if s is not None]

    @property
    def scores_b(self) -> list[float]:
        return [s for s in (self.a_first_b, self.b_first_b) if s is not None]


class PairwiseOutcome(BaseModel):
    """The `pairwise` part of a pairwise result record."""

    winner: Winner | None  # None: no judge produced a score
    preference: float | None  # the record's final_score: the panel's preference for A
    score_a: float | None  # mean score of A over every successful judgment, both orders
    score_b: float | None
    tie_tolerance: float
    n_judgments: int  # successful samples over all judges
    n_agreeing: int  # of those, the ones whose own winner is the record's winner
    agreement_pct: float | None
    n_position_consistent: int  # judgments whose two orders name the same winner
    position_consistency_pct: float | None
    first_position_bias: float | None  # mean points gained by being shown first
    # Judgments shown in both orders: the ones position consistency and bias are read from.
    n_both_orders: int | None = None
    # The LLM-judge evaluator's figures (schemas.pair_sides): each side's std over the
    # judgments (score ± std), the judgments' most frequent winner and the share naming it.
    std_a: float | None = None
    std_b: float | None = None
    majority_winner: Winner | None = None
    n_majority: int | None = None
    majority_agreement_pct: float | None = None
    # With `pairwise.names`: the sides' names and the winner's (`tie` for a tie).
    name_a: str | None = None
    name_b: str | None = None
    winner_name: str | None = None


def _pct(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def side_pair(judgment: PairJudgment) -> SidePair:
    """A judgment's score of A and of B, each the mean over the orders shown."""
    return fmean(judgment.scores_a), fmean(judgment.scores_b)


def pairwise_outcome(
    preference: float | None,
    judgments: Iterable[PairJudgment],
    tie_tolerance: float,
    *,
    sides: tuple[float | None, float | None] | None = None,
    names: tuple[str, str] | None = None,
) -> PairwiseOutcome:
    """The outcome of one (item, dimension) from its panel preference and its judgments.
    `sides`: A's and B's score from the same aggregate as the preference (side_scores);
    without it, their means over every judgment."""
    kept = list(judgments)
    winner = None if preference is None else winner_of(preference, tie_tolerance)
    agreeing = sum(winner_of(j.preference, tie_tolerance) == winner for j in kept)
    both = [j for j in kept if j.both_orders]
    consistent = sum(
        len({winner_of(order, tie_tolerance) for order in j.order_preferences}) == 1 for j in both
    )
    advantages = [a for a in (j.first_position_advantage for j in both) if a is not None]
    scores_a = [s for j in kept for s in j.scores_a]
    scores_b = [s for j in kept for s in j.scores_b]
    if sides is None:
        sides = (fmean(scores_a) if scores_a else None, fmean(scores_b) if scores_b else None)
    std_a, std_b = side_spread([side_pair(j) for j in kept])
    top, n_top = majority([winner_of(j.preference, tie_tolerance) for j in kept])
    named = {"A": names[0], "B": names[1], "tie": "tie"} if names else {}
    return PairwiseOutcome(
        winner=winner,
        preference=preference,
        score_a=sides[0],
        score_b=sides[1],
        tie_tolerance=tie_tolerance,
        n_judgments=len(kept),
        n_agreeing=agreeing,
        agreement_pct=_pct(agreeing, len(kept)),
        n_position_consistent=consistent,
        position_consistency_pct=_pct(consistent, len(both)),
        first_position_bias=sum(advantages) / len(advantages) if advantages else None,
        n_both_orders=len(both),
        std_a=std_a,
        std_b=std_b,
        majority_winner=top,
        n_majority=n_top,
        majority_agreement_pct=_pct(n_top, len(kept)),
        name_a=names[0] if names else None,
        name_b=names[1] if names else None,
        winner_name=named.get(winner) if winner else None,
    )


class PairwiseTotals(BaseModel):
    """Win/loss/tie totals (from A's side) over a set of records, with their agreement."""

    n_records: int = 0
    wins_a: int = 0
    wins_b: int = 0
    ties: int = 0
    undecided: int = 0  # records without a score
    win_rate_a: float | None = None  # wins_a / decided records, ties counting half
    # Of the decided records: the evaluator's win/loss/tie percentages.
    wins_a_pct: float | None = None
    wins_b_pct: float | None = None
    ties_pct: float | None = None
    majority_agreement_pct: float | None = None  # pooled: judgments naming their majority
    n_judgments: int = 0
    agreement_pct: float | None = None  # pooled over the records' judgments
    position_consistency_pct: float | None = None
    first_position_bias: float | None = None


class PairwiseSummary(BaseModel):
    overall: PairwiseTotals
    dimensions: dict[str, PairwiseTotals]


@dataclass
class _Tally:
    winners: dict[str, int] = field(default_factory=lambda: {"A": 0, "B": 0, "tie": 0, "-": 0})
    judgments: int = 0
    both_orders: int = 0
    agreeing: int = 0
    consistent: int = 0
    advantage_total: float = 0.0
    majority: int = 0

    def add(self, outcome: PairwiseOutcome) -> None:
        self.winners[outcome.winner or "-"] += 1
        self.majority += outcome.n_majority or 0
        self.judgments += outcome.n_judgments
        both = outcome.n_judgments if outcome.n_both_orders is None else outcome.n_both_orders
        self.both_orders += both
        self.agreeing += outcome.n_agreeing
        self.consistent += outcome.n_position_consistent
        if outcome.first_position_bias is not None:
            self.advantage_total += outcome.first_position_bias * both

    def totals(self) -> PairwiseTotals:
        wins_a, wins_b, ties = self.winners["A"], self.winners["B"], self.winners["tie"]
        decided = wins_a + wins_b + ties
        return PairwiseTotals(
            n_records=decided + self.winners["-"],
            wins_a=wins_a,
            wins_b=wins_b,
            ties=ties,
            undecided=self.winners["-"],
            win_rate_a=round((wins_a + ties / 2) / decided, 4) if decided else None,
            wins_a_pct=_pct(wins_a, decided),
            wins_b_pct=_pct(wins_b, decided),
            ties_pct=_pct(ties, decided),
            majority_agreement_pct=_pct(self.majority, self.judgments),
            n_judgments=self.judgments,
            agreement_pct=_pct(self.agreeing, self.judgments),
            position_consistency_pct=_pct(self.consistent, self.both_orders),
            first_position_bias=(
                round(self.advantage_total / self.both_orders, 4) if self.both_orders else None
            ),
        )


@dataclass
class PairwiseAccumulator:
    """Totals per dimension and overall, built while records stream past."""

    overall: _Tally = field(default_factory=_Tally)
    dimensions: dict[str, _Tally] = field(default_factory=dict)

    def add(self, criterion: str, outcome: PairwiseOutcome) -> None:
        self.overall.add(outcome)
        self.dimensions.setdefault(criterion, _Tally()).add(outcome)

    @property
    def empty(self) -> bool:
        return not self.dimensions

    def report(self) -> PairwiseSummary:
        return PairwiseSummary(
            overall=self.overall.totals(),
            dimensions={name: tally.totals() for name, tally in self.dimensions.items()},
        )
