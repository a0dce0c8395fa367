"""How far the judges of a panel agree: pure statistics over result records (stdlib only).

For each dimension, and over the whole batch (every (item, dimension) cell a unit):

- **Krippendorff's alpha**, interval and ordinal. Units are items, coders are judges, a judge's
  value is its within-model aggregated score. A judge that failed on an item is a missing
  value; items with fewer than two scores are not pairable and left out, as alpha prescribes.
  1 is perfect agreement, 0 agreement at chance, below 0 systematic disagreement.
- **Spearman's rank correlation** for each pair of judges, over the items both scored: do they
  order the items alike, whatever their offsets?
- **Bias**: each judge's mean offset from the panel, i.e. its score minus the plain mean of the
  judges that scored the item, over items scored by two judges or more.
- **Within-model variance share**: of the spread of sample scores inside each cell, the share
  that lies within judges (a judge disagreeing with itself from sample to sample) rather than
  between them. High: more samples per judge steady the verdict; low: the judges differ in
  earnest, and more or other judges would.

Everything is accumulated one record at a time (`AgreementAccumulator.add`), so results are
streamed: alpha, bias and the variance share keep a few numbers per distinct score value and
per judge; Spearman keeps one float per (item, judge) in a compact array.
"""

from __future__ import annotations

import math
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

from pydantic import BaseModel

from jury.schemas.results import JudgeEvaluation, Verdict
from jury.stats.ranks import spearman

AlphaLevel = Literal["interval", "ordinal"]
_MISSING = math.nan
# Scores equal up to float noise (13/3 summed in another order) are one value for alpha.
_VALUE_DIGITS = 9


class PairCorrelation(BaseModel):
    judge_a: str
    judge_b: str
    spearman: float | None  # None: fewer than two shared items, or one side constant
    n_items: int


class JudgeBias(BaseModel):
    judge: str
    mean_offset: float | None  # None: never scored an item beside another judge
    n_items: int


class Agreement(BaseModel):
    """Agreement statistics over one dimension, or over the whole batch."""

    judges: list[str]
    n_items: int  # items (cells, overall) scored by two judges or more
    alpha_interval: float | None
    alpha_ordinal: float | None
    alpha_note: str | None = None  # why alpha is undefined, when it is
    spearman: list[PairCorrelation]
    bias: list[JudgeBias]
    within_model_variance_share: float | None


class AgreementReport(BaseModel):
    overall: Agreement
    dimensions: dict[str, Agreement]


class Coincidences:
    """Krippendorff's coincidence matrix, filled one unit at a time."""

    def __init__(self) -> None:
        self.pairs: defaultdict[tuple[float, float], float] = defaultdict(float)
        self.value_counts: defaultdict[float, int] = defaultdict(int)

    def add_unit(self, values: Iterable[float | None]) -> None:
        self.add_counts(_value_counts(v for v in values if v is not None and not math.isnan(v)))

    def add_counts(self, present: Mapping[float, int]) -> None:
        """Add one unit, given how many coders gave it each value."""
        m = sum(present.values())
        if m < 2:
            return  # not pairable: a lone value says nothing about agreement
        for c, n_c in present.items():
            self.value_counts[c] += n_c
            for k, n_k in present.items():
                self.pairs[(c, k)] += n_c * (n_k - (c == k)) / (m - 1)

    def alpha(self, level: AlphaLevel) -> tuple[float | None, str | None]:
        """(alpha, None), or (None, why it is undefined)."""
        n = sum(self.value_counts.values())
        if n == 0:
            return None, "no item was scored by two judges or more"
        if len(self.value_counts) < 2:
            return None, "every score is the same, so there is no disagreement to expect"
        position = _ordinal_positions(self.value_counts) if level == "ordinal" else _identity
        observed = sum(w * (position(c) - position(k)) ** 2 for (c, k), w in self.pairs.items())
        # Σ_c Σ_k n_c n_k δ²(c, k) = 2n Σ_c n_c (x_c - mean)², for δ a difference of positions.
        mean = sum(n_c * position(c) for c, n_c in self.value_counts.items()) / n
        spread = sum(n_c * (position(c) - mean) ** 2 for c, n_c in self.value_counts.items())
        expected = 2 * n * spread
        return 1.0 - (n - 1) * observed / expected, None


def _value_counts(values: Iterable[float]) -> dict[float, int]:
    counts: dict[float, int] = {}
    for value in values:
        key = round(value, _VALUE_DIGITS) + 0.0  # + 0.0 turns -0.0 into 0.0
        counts[key] = counts.get(key, 0) + 1
    return counts


def _identity(value: float) -> float:
    return value


def _ordinal_positions(counts: Mapping[float, int]) -> Callable[[float], float]:
    """Ordinal distance as a difference of positions.

    Krippendorff's δ(c, k) = Σ_{g=c..k} n_g - (n_c + n_k)/2 equals M_k - M_c for the midrank
    M_g = Σ_{h<g} n_h + n_g/2, so ordinal alpha is interval alpha on midranks.
    """
    midrank: dict[float, float] = {}
    below = 0
    for value in sorted(counts):
        midrank[value] = below + counts[value] / 2
        below += counts[value]
    return midrank.__getitem__


def krippendorff_alpha(
    units: Iterable[Sequence[float | None]], level: AlphaLevel = "interval"
) -> float | None:
    """Alpha of a reliability table: one row per unit, one value (or None) per coder."""
    coincidences = Coincidences()
    for unit in units:
        coincidences.add_unit(unit)
    return coincidences.alpha(level)[0]


@dataclass(frozen=True)
class _Cell:
    """What one record contributes, computed once for its dimension and for the batch."""

    judges: tuple[str, ...]  # every judge on the record, scored or not
    scores: dict[str, float]  # the judges that scored
    value_counts: dict[float, int]
    offsets: dict[str, float]  # from the mean of the judges that scored
    ss_within: float
    ss_between: float


def _cell_of(evaluations: Mapping[str, JudgeEvaluation]) -> _Cell:
    scores = {
        judge: e.aggregated_score
        for judge, e in evaluations.items()
        if e.aggregated_score is not None
    }
    if len(scores) < 2:
        return _Cell(tuple(evaluations), scores, {}, {}, 0.0, 0.0)
    panel_mean = sum(scores.values()) / len(scores)
    # One-way decomposition of the cell's sample scores: within judges vs between them.
    samples = [evaluations[judge].samples for judge in scores]
    pooled = [x for judge_samples in samples for x in judge_samples]
    ss_within = ss_between = 0.0
    if len(pooled) > 1:
        grand_mean = sum(pooled) / len(pooled)
        for judge_samples in samples:
            if judge_samples:
                judge_mean = sum(judge_samples) / len(judge_samples)
                ss_within += sum((x - judge_mean) ** 2 for x in judge_samples)
                ss_between += len(judge_samples) * (judge_mean - grand_mean) ** 2
    return _Cell(
        judges=tuple(evaluations),
        scores=scores,
        value_counts=_value_counts(scores.values()),
        offsets={judge: score - panel_mean for judge, score in scores.items()},
        ss_within=ss_within,
        ss_between=ss_between,
    )


class _Scope:
    """The running state for one dimension, or for the whole batch."""

    def __init__(self) -> None:
        self.judges: dict[str, int] = {}
        self.columns: list[array[float]] = []  # per judge, one score per unit (NaN: none)
        self.n_units = 0
        self.n_pairable = 0
        self.coincidences = Coincidences()
        self.offset_sums: list[float] = []
        self.offset_counts: list[int] = []
        self.ss_within = 0.0
        self.ss_between = 0.0

    def add(self, cell: _Cell) -> None:
        for judge in cell.judges:
            if judge not in self.judges:
                self.judges[judge] = len(self.columns)
                self.columns.append(array("d", [_MISSING]) * self.n_units)
                self.offset_sums.append(0.0)
                self.offset_counts.append(0)
        for judge, column in self.judges.items():
            self.columns[column].append(cell.scores.get(judge, _MISSING))
        self.n_units += 1
        if not cell.offsets:
            return
        self.n_pairable += 1
        self.coincidences.add_counts(cell.value_counts)
        for judge, offset in cell.offsets.items():
            column = self.judges[judge]
            self.offset_sums[column] += offset
            self.offset_counts[column] += 1
        self.ss_within += cell.ss_within
        self.ss_between += cell.ss_between

    def report(self) -> Agreement:
        names = list(self.judges)
        if len(names) < 2:
            interval = ordinal = None
            note: str | None = f"alpha needs two judges or more; this panel has {len(names)}"
        else:
            interval, note = self.coincidences.alpha("interval")
            ordinal, _ = self.coincidences.alpha("ordinal")
        total_ss = self.ss_within + self.ss_between
        return Agreement(
            judges=names,
            n_items=self.n_pairable,
            alpha_interval=interval,
            alpha_ordinal=ordinal,
            alpha_note=note,
            spearman=[self._correlation(a, b) for a, b in combinations(names, 2)],
            bias=[
                JudgeBias(
                    judge=name,
                    mean_offset=(
                        self.offset_sums[column] / self.offset_counts[column]
                        if self.offset_counts[column]
                        else None
                    ),
                    n_items=self.offset_counts[column],
                )
                for name, column in self.judges.items()
            ],
            within_model_variance_share=self.ss_within / total_ss if total_ss > 0 else None,
        )

    def _correlation(self, judge_a: str, judge_b: str) -> PairCorrelation:
        xs: list[float] = []
        ys: list[float] = []
        for x, y in zip(
            self.columns[self.judges[judge_a]], self.columns[self.judges[judge_b]], strict=True
        ):
            if not (math.isnan(x) or math.isnan(y)):
                xs.append(x)
                ys.append(y)
        return PairCorrelation(
            judge_a=judge_a, judge_b=judge_b, spearman=spearman(xs, ys), n_items=len(xs)
        )


class AgreementAccumulator:
    """Agreement statistics built while result records stream past."""

    def __init__(self) -> None:
        self._overall = _Scope()
        self._dimensions: dict[str, _Scope] = {}

    def add(self, verdict: Verdict) -> Verdict:
        cell = _cell_of(verdict.llm_evaluations)
        self._overall.add(cell)
        self._dimensions.setdefault(verdict.criterion_id, _Scope()).add(cell)
        return verdict

    def report(self) -> AgreementReport:
        return AgreementReport(
            overall=self._overall.report(),
            dimensions={name: scope.report() for name, scope in self._dimensions.items()},
        )


def batch_agreement(verdicts: Iterable[Verdict]) -> AgreementReport:
    """The agreement statistics of a batch's result records, per dimension and overall."""
    accumulator = AgreementAccumulator()
    for verdict in verdicts:
        accumulator.add(verdict)
    return accumulator.report()
