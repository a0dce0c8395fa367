"""Pairwise comparison: its settings, the outcome of one (item, dimension), batch totals.

A pairwise batch compares two outputs of each item, `output_a` and `output_b`. Every sample
asks the judge twice, once with A shown first and once with B first, for a score of each
output on the dimension's scale; the sample's score is the *preference for A*, the mean over
both orders of score_a - score_b, so a judge that favours whatever it reads first cancels
out. The panel's preference (the verdict's final score) is the panel's score of A minus its
score of B, each side aggregated on its own; the winner comes from it and a tie tolerance,
never from a judge saying who won.

Settings and records only: the worker builds an outcome (jury.worker.judging.pairwise_verdict)
and `jury results` totals them while records stream past (jury.results.pairwise_totals).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

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
    score_a: float | None  # A's score: within_model per judge, then across_models (see above)
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
    # The LLM-judge evaluator's figures: each side's std over the judgments (score ± std),
    # the judgments' most frequent winner and the share naming it. When several winners are
    # named equally often (2 × A, 2 × B, 1 × tie) the majority is `tie`, the ones sharing the
    # top count are in majority_tied_between, and the share is the top count's (40 %).
    std_a: float | None = None
    std_b: float | None = None
    majority_winner: Winner | None = None
    n_majority: int | None = None
    majority_agreement_pct: float | None = None
    majority_tied_between: list[Winner] | None = None
    # Each judge's (A, B) scores, within_model over its judgments: score_a and score_b are the
    # batch's across_models of these, and the judge's aggregated_score is their difference.
    judge_scores: dict[str, tuple[float, float]] | None = None
    # With `pairwise.names`: the sides' names and the winner's (`tie` for a tie).
    name_a: str | None = None
    name_b: str | None = None
    winner_name: str | None = None


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
