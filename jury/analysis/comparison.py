"""Comparing two batches over the same items (`jury compare A B`), and how correlated a
batch's dimensions are. Pure: records and samples in, figures out.

The orthogonality experiment's questions: do two ways of judging (per dimension against
combined, two panels, two prompts) give the same scores, and what does each cost in latency,
tokens and money? An item's **latency** is its slowest call: the calls of an item run in
parallel, so the slowest one is when its last verdict can be built. Its **tokens** are the sum
over its samples (a combined call's tokens are split over its samples, so the sums are exact).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from jury.schemas.results import SampleResult, Verdict
from jury.stats.measures import pearson
from jury.stats.ranks import spearman


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


@dataclass
class _Usage:
    latency_ms: float = 0.0  # the slowest call
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, result: SampleResult) -> None:
        self.latency_ms = max(self.latency_ms, result.latency_ms)
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.cost_usd += result.cost_usd


class Usage(BaseModel):
    """Per item: median and mean latency (its slowest call), mean tokens; totals."""

    n_items: int
    latency_ms_median: float | None
    latency_ms_mean: float | None
    prompt_tokens_per_item: float | None
    completion_tokens_per_item: float | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


def _usage(per_item: Sequence[_Usage]) -> Usage:
    n = len(per_item)
    latencies = [u.latency_ms for u in per_item]
    return Usage(
        n_items=n,
        latency_ms_median=_r(statistics.median(latencies), 1) if n else None,
        latency_ms_mean=_r(statistics.fmean(latencies), 1) if n else None,
        prompt_tokens_per_item=_r(sum(u.prompt_tokens for u in per_item) / n, 1) if n else None,
        completion_tokens_per_item=(
            _r(sum(u.completion_tokens for u in per_item) / n, 1) if n else None
        ),
        prompt_tokens=sum(u.prompt_tokens for u in per_item),
        completion_tokens=sum(u.completion_tokens for u in per_item),
        cost_usd=round(sum(u.cost_usd for u in per_item), 6),
    )


@dataclass
class BatchUsage:
    """A batch's samples folded per item, and per (item, dimension)."""

    items: dict[str, _Usage] = field(default_factory=lambda: defaultdict(_Usage))
    cells: dict[str, dict[str, _Usage]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(_Usage))
    )

    def add(self, item_id: str, dimension: str, result: SampleResult) -> None:
        self.items[item_id].add(result)
        self.cells[dimension][item_id].add(result)

    def overall(self, items: Iterable[str]) -> Usage:
        return _usage([self.items[i] for i in items if i in self.items])

    def dimension(self, dimension: str, items: Iterable[str]) -> Usage:
        cells = self.cells.get(dimension, {})
        return _usage([cells[i] for i in items if i in cells])


class ScoreAgreement(BaseModel):
    """How alike two batches scored one dimension, over the items both scored."""

    dimension: str
    n_items: int
    pearson: float | None
    spearman: float | None
    mean_abs_diff: float | None
    mean_a: float | None
    mean_b: float | None
    a: Usage
    b: Usage


class Comparison(BaseModel):
    batch_a: str
    batch_b: str
    n_items: int  # items in both batches
    dimensions: list[ScoreAgreement]  # the dimensions both batches judged
    a: Usage
    b: Usage
    # B against A: negative when B is faster; B's prompt tokens per item over A's.
    latency_change_pct: float | None
    prompt_tokens_ratio: float | None


def final_scores(records: Iterable[Verdict]) -> dict[str, dict[str, float]]:
    """dimension → item → final score (records without one left out)."""
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    for record in records:
        final = record.consensus_metrics.final_score
        if final is not None:
            scores[record.criterion_id][record.item_id] = final
    return scores


def score_agreement(
    dimension: str, a: dict[str, float], b: dict[str, float], usage: tuple[Usage, Usage]
) -> ScoreAgreement:
    common = [i for i in a if i in b]
    xs, ys = [a[i] for i in common], [b[i] for i in common]
    return ScoreAgreement(
        dimension=dimension,
        n_items=len(common),
        pearson=_r(pearson(xs, ys)),
        spearman=_r(spearman(xs, ys)),
        mean_abs_diff=_r(statistics.fmean(abs(x - y) for x, y in zip(xs, ys, strict=True)))
        if xs
        else None,
        mean_a=_r(statistics.fmean(xs)) if xs else None,
        mean_b=_r(statistics.fmean(ys)) if ys else None,
        a=usage[0],
        b=usage[1],
    )


def compare_batches(
    ids: tuple[str, str],
    records: tuple[Iterable[Verdict], Iterable[Verdict]],
    usage: tuple[BatchUsage, BatchUsage],
    dimensions: Sequence[str],
) -> Comparison:
    """Batch B against batch A over the items and dimensions both hold."""
    scores_a, scores_b = final_scores(records[0]), final_scores(records[1])
    common = [i for i in usage[0].items if i in usage[1].items]
    rows = [
        score_agreement(
            d,
            scores_a.get(d, {}),
            scores_b.get(d, {}),
            (usage[0].dimension(d, common), usage[1].dimension(d, common)),
        )
        for d in dimensions
    ]
    a, b = usage[0].overall(common), usage[1].overall(common)
    latency = None
    if a.latency_ms_median and b.latency_ms_median is not None:
        latency = _r(100 * (b.latency_ms_median - a.latency_ms_median) / a.latency_ms_median, 1)
    tokens = None
    if a.prompt_tokens_per_item and b.prompt_tokens_per_item is not None:
        tokens = _r(b.prompt_tokens_per_item / a.prompt_tokens_per_item, 3)
    return Comparison(
        batch_a=ids[0],
        batch_b=ids[1],
        n_items=len(common),
        dimensions=rows,
        a=a,
        b=b,
        latency_change_pct=latency,
        prompt_tokens_ratio=tokens,
    )


class DimensionCorrelation(BaseModel):
    dimension_a: str
    dimension_b: str
    pearson: float | None
    n_items: int


@dataclass
class DimensionCorrelations:
    """Pearson's r between the final scores of each pair of dimensions, over the items that
    have both: near 0, orthogonal dimensions (judging them apart loses nothing)."""

    scores: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))

    def add(self, verdict: Verdict) -> None:
        final = verdict.consensus_metrics.final_score
        if final is not None and verdict.pairwise is None:
            self.scores[verdict.criterion_id][verdict.item_id] = final

    def report(self) -> list[DimensionCorrelation]:
        names = list(self.scores)
        found = []
        for n, first in enumerate(names):
            for second in names[n + 1 :]:
                a, b = self.scores[first], self.scores[second]
                common = [i for i in a if i in b]
                r = pearson([a[i] for i in common], [b[i] for i in common])
                found.append(
                    DimensionCorrelation(
                        dimension_a=first, dimension_b=second, pearson=_r(r), n_items=len(common)
                    )
                )
        return found
