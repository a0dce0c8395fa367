"""The trust report: does the panel agree with people, and does it help over one judge?

Per dimension, with people's labels: each judge's and the panel's agreement with them
(Spearman, Kendall, quadratic-weighted kappa, mean absolute error, pass/fail accuracy; for
pairwise batches, accuracy against the preferred side), each with a bootstrap interval over
items; the panel against its best single judge on the same items; the correlation of the
judges' errors against the labels and the effective number of judges it implies. Without
labels: the correlation of the judges' deviations from the panel consensus, and how many
independent opinions their scores carry. Built by schemas.trust_records.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Kind = Literal["scores", "pairwise"]
Finding = Literal["better", "same", "worse"]


class Estimate(BaseModel):
    """A statistic and its bootstrap interval (None where undefined)."""

    value: float | None
    low: float | None = None
    high: float | None = None


class RaterAgreement(BaseModel):
    """One judge (or the panel) against people's labels on one dimension."""

    rater: str  # a judge's name, or "panel"
    n_items: int  # labelled items the rater scored
    spearman: Estimate | None = None
    kendall: Estimate | None = None
    kappa: Estimate | None = None  # quadratic-weighted, on whole points of the scale
    mae: Estimate | None = None
    pass_accuracy: Estimate | None = None
    accuracy: Estimate | None = None  # pairwise: share of preferences matched, a tie half


class PanelComparison(BaseModel):
    """The panel against its best single judge, on the items both scored."""

    metric: Literal["mae", "accuracy"]
    best_judge: str
    panel: float
    best: float
    advantage: Estimate  # how much better the panel is (positive: better), with its interval
    n_items: int
    finding: Finding
    sentence: str


class ErrorCorrelation(BaseModel):
    """Pearson correlations of the judges' errors, each pair over the items both scored.

    reference `labels`: error = score − people's label (pairwise: 1 for a wrong side, ½ for
    a tie, 0 for the right one). reference `consensus`: deviation = score − the record's final
    score; judges err together relative to the rest where it is above −1/(k−1), the value
    independent judges of equal spread give (deviations from a shared mean sum to zero).
    """

    reference: Literal["labels", "consensus"]
    judges: list[str]
    matrix: list[list[float | None]]
    n_items: int


class EffectiveJudges(BaseModel):
    """Kish's effective number of judges, k / (1 + (k − 1)·mean correlation).

    basis `errors`: the correlation of errors against people's labels: how many independent
    judges the panel is worth (arXiv 2605.29800). basis `scores`: the correlation of the
    judges' scores, when there are no labels: how many independent opinions they voice.
    Judges that track the truth well agree, so this counts shared truth as well as shared
    mistakes: read it as how much the judges repeat each other, not as their worth.
    """

    basis: Literal["errors", "scores"]
    n_judges: int  # the judges it counts
    value: float | None
    n_items: int
    # judges whose correlations are undefined (every score the same, too few shared items)
    left_out: list[str] = Field(default_factory=list)


class DimensionTrust(BaseModel):
    kind: Kind
    n_records: int
    n_labelled: int
    raters: list[RaterAgreement]
    comparison: PanelComparison | None = None
    errors_vs_labels: ErrorCorrelation | None = None
    errors_vs_consensus: ErrorCorrelation | None = None
    effective_from_errors: EffectiveJudges | None = None
    effective_from_scores: EffectiveJudges | None = None


class TrustReport(BaseModel):
    headline: str | None  # the one sentence on whether the panel helps (needs labels)
    n_labelled: int  # labelled records, over all dimensions
    resamples: int
    level: float
    seed: int
    dimensions: dict[str, DimensionTrust]
