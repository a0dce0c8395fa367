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
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

Winner = Literal["A", "B", "tie"]
DEFAULT_TIE_TOLERANCE = 0.5


class PairwiseSettings(BaseModel):
    """The batch file's `pairwise:` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # A preference for A within ±tie_tolerance (in points of the dimension's scale) is a tie.
    tie_tolerance: float = Field(default=DEFAULT_TIE_TOLERANCE, ge=0)


def winner_of(preference: float, tie_tolerance: float) -> Winner:
    """A wins above +tolerance, B below -tolerance; anything in between is a tie."""
    if abs(preference) <= tie_tolerance:
        return "tie"
    return "A" if preference > 0 else "B"


class PairJudgment(NamedTuple):
    """One pairwise sample: the scores of A and B in each presentation order."""

    a_first_a: float  # A shown first: A's score
    a_first_b: float  # A shown first: B's score
    b_first_a: float  # B shown first: A's score
    b_first_b: float  # B shown first: B's score

    @property
    def preference(self) -> float:
        """score_a - score_b, averaged over both orders: the sample's stored score."""
        return ((self.a_first_a - self.a_first_b) + (self.b_first_a - self.b_first_b)) / 2

    @property
    def order_preferences(self) -> tuple[float, float]:
        """The preference for A read from each order alone (A first, B first)."""
        return self.a_first_a - self.a_first_b, self.b_first_a - self.b_first_b

    @property
    def first_position_advantage(self) -> float:
        """How many points the output shown first gains over the one shown second, on
        average over both orders: 0 for a judge without position bias."""
        return ((self.a_first_a - self.a_first_b) + (self.b_first_b - self.b_first_a)) / 2


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


def _pct(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def pairwise_outcome(
    preference: float | None, judgments: Iterable[PairJudgment], tie_tolerance: float
) -> PairwiseOutcome:
    """The outcome of one (item, dimension) from its panel preference and its judgments."""
    kept = list(judgments)
    winner = None if preference is None else winner_of(preference, tie_tolerance)
    agreeing = sum(winner_of(j.preference, tie_tolerance) == winner for j in kept)
    consistent = sum(
        winner_of(first, tie_tolerance) == winner_of(second, tie_tolerance)
        for first, second in (j.order_preferences for j in kept)
    )
    n = len(kept)
    return PairwiseOutcome(
        winner=winner,
        preference=preference,
        score_a=sum(j.a_first_a + j.b_first_a for j in kept) / (2 * n) if n else None,
        score_b=sum(j.a_first_b + j.b_first_b for j in kept) / (2 * n) if n else None,
        tie_tolerance=tie_tolerance,
        n_judgments=n,
        n_agreeing=agreeing,
        agreement_pct=_pct(agreeing, n),
        n_position_consistent=consistent,
        position_consistency_pct=_pct(consistent, n),
        first_position_bias=sum(j.first_position_advantage for j in kept) / n if n else None,
    )


class PairwiseTotals(BaseModel):
    """Win/loss/tie totals (from A's side) over a set of records, with their agreement."""

    n_records: int = 0
    wins_a: int = 0
    wins_b: int = 0
    ties: int = 0
    undecided: int = 0  # records without a score
    win_rate_a: float | None = None  # wins_a / decided records, ties counting half
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
    agreeing: int = 0
    consistent: int = 0
    advantage_total: float = 0.0

    def add(self, outcome: PairwiseOutcome) -> None:
        self.winners[outcome.winner or "-"] += 1
        self.judgments += outcome.n_judgments
        self.agreeing += outcome.n_agreeing
        self.consistent += outcome.n_position_consistent
        if outcome.first_position_bias is not None:
            self.advantage_total += outcome.first_position_bias * outcome.n_judgments

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
            n_judgments=self.judgments,
            agreement_pct=_pct(self.agreeing, self.judgments),
            position_consistency_pct=_pct(self.consistent, self.judgments),
            first_position_bias=(
                round(self.advantage_total / self.judgments, 4) if self.judgments else None
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
