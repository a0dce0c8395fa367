"""Win/loss/tie totals of a pairwise batch, per dimension and overall, built while its
records stream past (`jury results`, the report): the records' outcomes pooled."""

from __future__ import annotations

from dataclasses import dataclass, field

from jury.schemas.pairwise import PairwiseOutcome, PairwiseSummary, PairwiseTotals
from jury.worker.judging.pairwise_verdict import share_pct


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
            wins_a_pct=share_pct(wins_a, decided),
            wins_b_pct=share_pct(wins_b, decided),
            ties_pct=share_pct(ties, decided),
            majority_agreement_pct=share_pct(self.majority, self.judgments),
            n_judgments=self.judgments,
            agreement_pct=share_pct(self.agreeing, self.judgments),
            position_consistency_pct=share_pct(self.consistent, self.both_orders),
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
