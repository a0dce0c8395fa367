"""The trust report (schemas.trust) from the gathered records (schemas.trust_records).

Every statistic with an interval is evaluated on the same bootstrap resamples of a
dimension's labelled items, so the panel and its best judge are compared on the same items
each time (a paired interval). The best judge is picked on the same data it is then compared
on, which flatters it a little: a panel that still beats it is clearly better.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Literal

from jury.schemas.pairwise import Winner
from jury.schemas.trust import (
    DimensionTrust,
    EffectiveJudges,
    ErrorCorrelation,
    Estimate,
    Finding,
    PanelComparison,
    RaterAgreement,
    TrustReport,
)
from jury.schemas.trust_records import PANEL, DimensionRecords, TrustRecords
from jury.stats.bootstrap import DEFAULT_LEVEL, DEFAULT_RESAMPLES, bootstrap_intervals
from jury.stats.effective import defined_subset, effective_number, pairwise_complete
from jury.stats.measures import (
    kendall_tau_b,
    mean_absolute_error,
    pass_accuracy,
    preference_accuracy,
    quadratic_weighted_kappa,
    spearman,
)

MIN_ITEMS = 3  # fewer shared items leave a correlation meaningless
SCORE_METRICS = ("spearman", "kendall", "kappa", "mae", "pass_accuracy")
Statistic = Callable[[Sequence[int]], float | None]
Key = tuple[str, str]  # (rater, metric), or ("comparison", "advantage")
COMPARISON: Key = ("comparison", "advantage")


def _score_metric(
    name: str, xs: list[float], ys: list[float], passes: list[bool], threshold: float
) -> float | None:
    if name == "spearman":
        return spearman(xs, ys)
    if name == "kendall":
        return kendall_tau_b(xs, ys)
    if name == "kappa":
        return quadratic_weighted_kappa(xs, ys)
    if name == "mae":
        return mean_absolute_error(xs, ys)
    return pass_accuracy(passes, ys, threshold)


class _Dimension:
    """The statistics of one dimension, as functions of a resample of labelled items."""

    def __init__(self, records: DimensionRecords) -> None:
        self.records = records
        self.judges = list(records.judges)
        self.raters = [*self.judges, PANEL]
        labelled = records.labelled
        self.threshold = labelled[0].threshold if labelled else 0.0
        self.score_labels = [r.score_label or 0.0 for r in labelled]
        self.side_labels: list[Winner] = [r.side_label or "tie" for r in labelled]
        self.values = {rater: records.values(rater) for rater in self.raters}
        self.passes = {rater: records.passes(rater) for rater in self.raters}
        self.sides = {rater: records.sides(rater) for rater in self.raters}

    @property
    def pairwise(self) -> bool:
        return self.records.kind == "pairwise"

    def metrics(self) -> tuple[str, ...]:
        return ("accuracy",) if self.pairwise else SCORE_METRICS

    def statistic(self, rater: str, metric: str) -> Statistic:
        def score_statistic(units: Sequence[int]) -> float | None:
            values, passes = self.values[rater], self.passes[rater]
            kept = [i for i in units if values[i] is not None]
            if not kept:
                return None
            return _score_metric(
                metric,
                [values[i] or 0.0 for i in kept],
                [self.score_labels[i] for i in kept],
                [bool(passes[i]) for i in kept],
                self.threshold,
            )

        def side_statistic(units: Sequence[int]) -> float | None:
            sides = self.sides[rater]
            kept = [i for i in units if sides[i] is not None]
            return preference_accuracy(
                [sides[i] or "tie" for i in kept], [self.side_labels[i] for i in kept]
            )

        return side_statistic if self.pairwise else score_statistic

    def shared(self, rater: str, other: str, units: Sequence[int]) -> list[int]:
        """The units both raters scored."""
        mine, theirs = self._present(rater), self._present(other)
        return [i for i in units if mine[i] and theirs[i]]

    def _present(self, rater: str) -> list[bool]:
        source = self.sides[rater] if self.pairwise else self.values[rater]
        return [value is not None for value in source]

    def primary(self) -> str:
        """The measure the panel and its best judge are compared by."""
        return "accuracy" if self.pairwise else "mae"

    def advantage(self, best: str) -> Statistic:
        """How much better the panel is than `best` on the items both scored."""
        metric = self.primary()
        panel_stat, best_stat = self.statistic(PANEL, metric), self.statistic(best, metric)

        def statistic(units: Sequence[int]) -> float | None:
            both = self.shared(PANEL, best, units)
            panel, judge = panel_stat(both), best_stat(both)
            if panel is None or judge is None:
                return None
            return panel - judge if metric == "accuracy" else judge - panel

        return statistic

    def best_judge(self) -> str | None:
        metric = self.primary()
        everything = range(len(self.records.labelled))
        found: list[tuple[float, str]] = []
        for judge in self.judges:
            value = self.statistic(judge, metric)(self.shared(PANEL, judge, everything))
            if value is not None:
                found.append((-value if metric == "accuracy" else value, judge))
        return min(found)[1] if found else None

    def errors_vs_labels(self) -> list[list[float | None]]:
        columns: list[list[float | None]] = []
        for judge in self.judges:
            if self.pairwise:
                columns.append(
                    [
                        None if side is None else 1.0 - (preference_accuracy([side], [label]) or 0)
                        for side, label in zip(self.sides[judge], self.side_labels, strict=True)
                    ]
                )
            else:
                columns.append(
                    [
                        None if value is None else value - label
                        for value, label in zip(self.values[judge], self.score_labels, strict=True)
                    ]
                )
        return columns


def _complete_rows(columns: Sequence[Sequence[float | None]]) -> int:
    """Rows where every column has a (non-NaN) value."""
    if not columns:
        return 0
    return sum(all(v is not None and v == v for v in row) for row in zip(*columns, strict=True))


def _estimate(value: float | None, interval: tuple[float, float] | None) -> Estimate:
    low, high = interval if interval is not None else (None, None)
    return Estimate(value=value, low=low, high=high)


def _comparison(
    dimension: _Dimension,
    best: str,
    value: float | None,
    interval: tuple[float, float] | None,
) -> PanelComparison | None:
    if value is None:
        return None
    metric = dimension.primary()
    everything = range(len(dimension.records.labelled))
    both = dimension.shared(PANEL, best, everything)
    panel = dimension.statistic(PANEL, metric)(both)
    judge = dimension.statistic(best, metric)(both)
    if panel is None or judge is None:
        return None
    finding: Finding = "same"
    if interval is not None and interval[0] > 0:
        finding = "better"
    elif interval is not None and interval[1] < 0:
        finding = "worse"
    advantage = _estimate(value, interval)
    return PanelComparison(
        metric="accuracy" if metric == "accuracy" else "mae",
        best_judge=best,
        panel=panel,
        best=judge,
        advantage=advantage,
        n_items=len(both),
        finding=finding,
        sentence=comparison_sentence(finding, best, metric, panel, judge, advantage, len(both)),
    )


def comparison_sentence(
    finding: Finding,
    best: str,
    metric: str,
    panel: float,
    judge: float,
    advantage: Estimate,
    n_items: int,
) -> str:
    shown = (lambda v: f"{v:.0%}") if metric == "accuracy" else (lambda v: f"{v:.2f}")
    name = "accuracy" if metric == "accuracy" else "mean absolute error"
    figures = f"{name} {shown(panel)} against {shown(judge)}"
    if advantage.low is not None and advantage.high is not None:
        interval = f"95% interval of the difference {advantage.low:+.3f} to {advantage.high:+.3f}"
    else:
        interval = "too few items for an interval"
    details = f"({interval}, {n_items} items)"
    if finding == "better":
        return (
            f"The panel agrees with people better than its best judge, {best}: {figures} {details}."
        )
    if finding == "worse":
        return (
            f"Its best judge, {best}, agrees with people better than the panel: "
            f"{figures} {details}."
        )
    return (
        f"The panel agrees with people about as well as its best judge, {best}: {figures}; "
        f"the difference could be chance {details}."
    )


def dimension_trust(
    records: DimensionRecords, resamples: int, level: float, seed: int
) -> DimensionTrust:
    dimension = _Dimension(records)
    n_labelled = len(records.labelled)
    statistics: dict[Key, Statistic] = {
        (rater, metric): dimension.statistic(rater, metric)
        for rater in dimension.raters
        for metric in dimension.metrics()
    }
    best = dimension.best_judge() if len(dimension.judges) > 1 else None
    if best is not None:
        statistics[COMPARISON] = dimension.advantage(best)
    intervals = bootstrap_intervals(
        n_labelled, statistics, resamples=resamples, level=level, seed=seed
    )
    everything = list(range(n_labelled))
    raters = []
    for rater in dimension.raters if n_labelled else []:
        present = sum(dimension._present(rater))
        fields = {
            metric: _estimate(statistics[(rater, metric)](everything), intervals[(rater, metric)])
            for metric in dimension.metrics()
        }
        raters.append(RaterAgreement(rater=rater, n_items=present, **fields))
    comparison = None
    if best is not None:
        comparison = _comparison(
            dimension, best, statistics[COMPARISON](everything), intervals[COMPARISON]
        )
    return DimensionTrust(
        kind=records.kind,
        n_records=records.n_records,
        n_labelled=n_labelled,
        raters=raters,
        comparison=comparison,
        **_panel_structure(dimension),
    )


def _panel_structure(dimension: _Dimension) -> dict[str, object]:
    """Error correlations and effective judges: against labels where there are some, against
    the consensus and from the scores always (two judges or more)."""
    judges = dimension.judges
    found: dict[str, object] = {}
    if len(judges) < 2:
        return found
    records = dimension.records
    if records.labelled:
        errors = dimension.errors_vs_labels()
        matrix = pairwise_complete(errors)
        n_items = _complete_rows(errors)
        found["errors_vs_labels"] = ErrorCorrelation(
            reference="labels", judges=judges, matrix=matrix, n_items=n_items
        )
        found["effective_from_errors"] = _effective("errors", judges, matrix, n_items)
    # Arrays of floats (NaN where missing): a few bytes per record, whatever the batch size.
    deviations = [
        array("d", (score - final for score, final in zip(column, records.finals, strict=True)))
        for column in records.columns
    ]
    n_items = _complete_rows(deviations)
    found["errors_vs_consensus"] = ErrorCorrelation(
        reference="consensus", judges=judges, matrix=pairwise_complete(deviations), n_items=n_items
    )
    found["effective_from_scores"] = _effective(
        "scores", judges, pairwise_complete(records.columns), _complete_rows(records.columns)
    )
    return found


def _effective(
    basis: Literal["errors", "scores"],
    judges: list[str],
    matrix: list[list[float | None]],
    n_items: int,
) -> EffectiveJudges:
    """Kish's figure over the judges whose correlations are defined."""
    kept = defined_subset(matrix)
    value = None
    if n_items >= MIN_ITEMS and len(kept) >= 2:
        value = effective_number([[matrix[i][j] for j in kept] for i in kept])
    return EffectiveJudges(
        basis=basis,
        n_judges=len(kept),
        value=value,
        n_items=n_items,
        left_out=[judge for index, judge in enumerate(judges) if index not in kept],
    )


def headline(dimensions: dict[str, DimensionTrust]) -> str | None:
    """One sentence: does the panel agree with people better than its best judge?"""
    compared = {name: d.comparison for name, d in dimensions.items() if d.comparison}
    if not compared:
        return None
    if len(compared) == 1:
        return next(iter(compared.values())).sentence
    groups: dict[Finding, list[str]] = {"better": [], "same": [], "worse": []}
    for name, comparison in compared.items():
        groups[comparison.finding].append(name)
    parts = []
    wording = {
        "better": "better than its best judge",
        "same": "about as well as its best judge",
        "worse": "worse than its best judge",
    }
    for finding in ("better", "same", "worse"):
        names = groups[finding]
        if names:
            share = f"{len(names)} of {len(compared)} dimensions"
            parts.append(f"{wording[finding]} on {share} ({', '.join(names)})")
    return "The panel agrees with people " + "; ".join(parts) + "."


def trust_report(
    records: TrustRecords,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> TrustReport:
    dimensions = {
        name: dimension_trust(d, resamples, level, seed) for name, d in records.dimensions.items()
    }
    return TrustReport(
        headline=headline(dimensions),
        n_labelled=records.n_labelled,
        resamples=resamples,
        level=level,
        seed=seed,
        dimensions=dimensions,
    )
